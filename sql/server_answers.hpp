// Private to the SQL backends: what the server's answers on a pool's sessions tell of it, for
// the silence that gives a wait up and for the validity of a grant that came out of a wait.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include <dlock/core/backend/lease.hpp>

namespace dlock {

/// When the server last answered a statement on any of a pool's sessions, and the sending of
/// the latest statement it answered. Any thread.
///
/// A grant is known valid until the sending of the last statement the server answered on its
/// session plus the silence bound (1.5 keepalive periods), after which the probes give a
/// silent session up. A session waiting in a blocking statement cannot be probed: its wait
/// goes on only while the server answers on another session, so a grant out of a wait counts
/// from the latest sending the server answered there, when that is later than its own
/// statement's, which may have been sent long before.
class server_answers {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  explicit server_answers(std::chrono::nanoseconds keepalive) noexcept
      : silence_bound_(keepalive * 3 / 2) {}

  /// The server answered, just now, a statement sent at `sent`.
  void heard(time_point sent) noexcept {
    heard_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                 std::memory_order_relaxed);
    const auto count = sent.time_since_epoch().count();
    auto latest = answered_sent_.load(std::memory_order_relaxed);
    while (latest < count &&
           !answered_sent_.compare_exchange_weak(latest, count, std::memory_order_relaxed)) {
    }
  }

  /// The server answered, just now, a probe sent at `sent` on a session whose grants share
  /// `validity`: they are known valid until then plus the silence bound.
  void probe_answered(grant_validity& validity, time_point sent) noexcept {
    heard(sent);
    validity.extend_to(sent + silence_bound_);
  }

  /// When its last answer came; time_point{} before the first.
  time_point last_heard() const noexcept {
    return time_point(time_point::duration(heard_.load(std::memory_order_relaxed)));
  }

  /// `validity`, a session's, moved on for a grant that a statement sent no earlier than
  /// `sent` just gave on it; from the latest sending answered elsewhere too when the grant
  /// came out of a wait (`waited`).
  std::shared_ptr<const grant_validity> validity_of_grant(
      const std::shared_ptr<grant_validity>& validity, time_point sent, bool waited) const {
    validity->extend_to(sent + silence_bound_);
    const time_point elsewhere(
        time_point::duration(answered_sent_.load(std::memory_order_relaxed)));
    if (waited && elsewhere != time_point{}) validity->extend_to(elsewhere + silence_bound_);
    return validity;
  }

 private:
  // How long after the sending of its last answered statement a silent session is given up.
  std::chrono::nanoseconds silence_bound_;
  std::atomic<time_point::rep> heard_{0};          // the arrival of its last answer
  std::atomic<time_point::rep> answered_sent_{0};  // the latest sending it answered
};

}  // namespace dlock
