// dlock/core/fence.hpp: the resource side of fencing, for a resource in the same program.
//
// A lock alone cannot stop a holder that was paused (a GC pause, a stopped VM, a slow page-in)
// past its lease: when it wakes up it still believes it holds the lock, while another holder
// already does. The fencing token closes that hole only if the resource checks it: it keeps
// the highest token it has seen and refuses any lower one. docs/fencing.md shows the same
// rule for PostgreSQL rows, Redis keys and ZooKeeper nodes.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include <dlock/core/errors.hpp>
#include <dlock/core/lock_handle.hpp>

namespace dlock {

/// Guards one in-process resource with fencing tokens: a write runs only if its token is at
/// least the highest token any write has presented, and presenting it raises that mark. The
/// check and the write are one step under the fence's mutex, so a stale writer can never
/// interleave with a newer one. A holder may write as often as it likes with its own token.
///
///     dlock::fence inventory_fence;
///     auto held = lock.acquire();
///     inventory_fence.write(held, [&] { stock -= 1; });   // throws if a newer holder wrote
///
/// Thread safety: every member may be called concurrently.
class fence {
 public:
  fence() = default;
  /// A fence that has already seen `highest` (restored from storage, say).
  explicit fence(std::uint64_t highest) noexcept : highest_(highest) {}
  fence(const fence&) = delete;
  fence& operator=(const fence&) = delete;

  /// Runs `write()` and returns its result if `token` is at least the highest token seen,
  /// which then becomes `token`. Throws dlock::lock_lost_error, without running `write`, when
  /// a newer holder has already written. Exceptions of `write` propagate; the mark is raised
  /// anyway, since a newer holder's attempt must fence out older ones whatever it did.
  template <typename Write>
  std::invoke_result_t<Write&> write(std::uint64_t token, Write&& write) {
    std::lock_guard guard(mutex_);
    admit_locked(token);
    return std::forward<Write>(write)();
  }

  /// As write(handle.fencing_token(), write), but also refuses a handle that is empty or
  /// already known to be lost, with dlock::lock_lost_error.
  template <typename Write>
  std::invoke_result_t<Write&> write(const lock_handle& handle, Write&& write) {
    if (!handle.held()) {
      throw lock_lost_error("dlock: fence: the lock" + quoted_name(handle) +
                            " is no longer held; the write was refused");
    }
    return this->write(handle.fencing_token(), std::forward<Write>(write));
  }

  /// Whether a write with `token` would run now (a hint only: another writer may raise the
  /// mark before the write; use write() for the decision).
  bool admits(std::uint64_t token) const {
    std::lock_guard guard(mutex_);
    return token >= highest_;
  }

  /// The highest token presented so far (0 before the first write).
  std::uint64_t highest() const {
    std::lock_guard guard(mutex_);
    return highest_;
  }

 private:
  void admit_locked(std::uint64_t token) {
    if (token < highest_) {
      throw lock_lost_error("dlock: fence: fencing token " + std::to_string(token) +
                            " is older than " + std::to_string(highest_) +
                            ", which a newer holder presented; the write was refused");
    }
    highest_ = token;
  }
  static std::string quoted_name(const lock_handle& handle) {
    return handle ? " '" + handle.name() + "'" : std::string();
  }

  mutable std::mutex mutex_;
  std::uint64_t highest_ = 0;
};

}  // namespace dlock
