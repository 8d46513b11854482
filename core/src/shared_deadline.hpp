// Private to core: one timeout shared by the acquires of a composed operation (acquire_all's
// list, a gated acquire's gate and lock): each gets what is left of it.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include <dlock/core/durations.hpp>

namespace dlock::detail {

/// One timeout for several acquires in turn: each gets what is left of it. A zero timeout
/// stays zero (one attempt at each) and forever stays forever.
class shared_deadline {
 public:
  /// Throws std::invalid_argument for a negative timeout.
  explicit shared_deadline(std::chrono::nanoseconds timeout) : timeout_(timeout) {
    using clock = std::chrono::steady_clock;
    if (timeout < std::chrono::nanoseconds::zero()) {
      throw std::invalid_argument("dlock: negative timeout for acquire_all");
    }
    const auto now = clock::now();
    // A timeout too long to add to now is as good as forever.
    if (timeout > std::chrono::nanoseconds::zero() && timeout < clock::time_point::max() - now) {
      deadline_ = now + timeout;
    } else if (timeout > std::chrono::nanoseconds::zero()) {
      timeout_ = forever;
    }
  }
  std::chrono::nanoseconds remaining() const {
    if (!deadline_) return timeout_;  // forever, or zero: one attempt at each lock
    return std::max(std::chrono::nanoseconds::zero(),
                    std::chrono::duration_cast<std::chrono::nanoseconds>(
                        *deadline_ - std::chrono::steady_clock::now()));
  }

 private:
  std::chrono::nanoseconds timeout_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
};

}  // namespace dlock::detail
