// Private to dlock::redis: the watchdog, one timer per provider that extends every held lease
// every extend_every (pipelined, all sent back to back) and marks a grant lost once it can no
// longer be confirmed.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/lease.hpp>

#include "keys.hpp"

namespace dlock::redis::detail {

class redis_backend;

/// What the watchdog knows of one held grant. `registered` is guarded by the watchdog's mutex;
/// `validity` is shared with the lease (and so with core's clock, which marks the grant lost
/// when it passes even if the network thread is blocked); `lost` is the lease's lost signal.
struct held_grant {
  std::string name;
  key_set keys;
  std::string token;
  std::shared_ptr<grant_validity> validity;
  std::stop_source lost;
  bool registered = true;
};

/// Keeps the grants of one backend alive.
///
/// A grant is lost when an extension answers "not ours" from so many nodes that a quorum can no
/// longer confirm it, or when its validity passes unconfirmed (the timer wakes for that, too).
/// A failed extension that leaves the grant valid is reported to the provider's error hook.
///
/// Thread safety: watch() and forget() from any thread; the timer runs on the network thread.
/// Lifetime: a member of `owner`; its handlers hold the owner weakly.
class watchdog {
 public:
  explicit watchdog(redis_backend& owner);

  /// Puts `grant` under watch, starting the timer if it is the only one.
  void watch(std::shared_ptr<held_grant> grant);
  /// Takes `grant` from the watch; it is never extended again.
  void forget(const std::shared_ptr<held_grant>& grant);
  /// How many watched grants are still waiting, at `now`, for the extension that was due (their
  /// validity ends within `overdue_below`: expiry minus the extension period and its command
  /// timeout, for a grant confirmed on time), or ran out unconfirmed and are not released yet.
  /// Any thread.
  std::size_t overdue(std::chrono::steady_clock::time_point now,
                      std::chrono::nanoseconds overdue_below) const;
  /// Extends every held lease now rather than at the next period: after a failover, a grant
  /// the new master does not hold is found lost at once (an extension answers "not ours"),
  /// and one it holds is confirmed there. Any thread.
  void verify_now();
  /// Drops the timer. Requires: the network thread has stopped.
  void shut_down() noexcept { timer_.reset(); }

 private:
  void schedule();
  void tick();
  void extend(const std::shared_ptr<held_grant>& grant);

  redis_backend& owner_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<held_grant>> held_;
  // Grants whose validity ran out unconfirmed, until their handles release them: overdue too.
  std::vector<std::shared_ptr<held_grant>> ran_out_;
  bool running_ = false;
  std::chrono::steady_clock::time_point next_extension_;
  std::optional<boost::asio::steady_timer> timer_;
};

}  // namespace dlock::redis::detail
