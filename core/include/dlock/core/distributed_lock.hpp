// dlock/core/distributed_lock.hpp: dlock::distributed_lock, mutual exclusion by name.
#pragma once

#include <chrono>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/lock_handle.hpp>

namespace dlock {

class provider;

/// An exclusive lock on a name, shared by every process that uses the same backend.
///
/// Guarantees: at most one handle of a name is held at a time across all processes using the
/// backend, as long as no handle is lost(); fencing tokens of successive grants strictly
/// increase. Not reentrant: a second acquire of a held name, even from the same thread,
/// waits like any other contender (and so waits forever on its own handle).
///
/// Fairness: within one process, contenders for the same name on the same provider queue
/// locally, first come first served, and only the head of that queue talks to the backend;
/// across processes the order is the backend's (FIFO for ZooKeeper and Postgres).
///
/// Timeouts: a zero timeout makes exactly one attempt; a negative one is
/// std::invalid_argument. A stop request ends a wait promptly and leaves nothing behind at
/// the backend.
///
/// Thread safety: distinct objects: safe. Shared objects: safe (every member is const).
/// A lock object is cheap (a name and a pointer) and may outlive its provider.
///
///     dlock::distributed_lock lock = locks->create_lock("nightly-report");
///     if (std::optional<dlock::lock_handle> held = lock.try_acquire()) { run(*held); }
///     dlock::lock_handle h = lock.acquire(5s);   // throws dlock::timeout_error
class distributed_lock {
 public:
  /// Tries to acquire the lock for up to `timeout` (zero: one attempt, never waits).
  /// Returns: the handle, or std::nullopt when not obtained in time or a stop was requested.
  /// Throws: std::invalid_argument for a negative timeout; dlock::connection_error when the
  /// backend cannot be reached; std::logic_error when called on the provider's own thread.
  /// Blocks: up to `timeout`, plus the backend's round trip.
  [[nodiscard]] std::optional<lock_handle> try_acquire(std::chrono::nanoseconds timeout = {},
                                                       std::stop_token stop = {}) const {
    return detail::acquire_blocking(target_, lock_mode::exclusive, timeout, std::move(stop),
                                    false);
  }

  /// Acquires the lock, waiting up to `timeout` (default: forever).
  /// Throws: dlock::timeout_error, dlock::cancelled_error (stop requested), and as try_acquire.
  [[nodiscard]] lock_handle acquire(std::chrono::nanoseconds timeout = forever,
                                    std::stop_token stop = {}) const {
    return std::move(*detail::acquire_blocking(target_, lock_mode::exclusive, timeout,
                                               std::move(stop), true));
  }

  /// Starts try_acquire without holding a thread while it waits.
  ///
  /// Completion signature: void(std::exception_ptr, std::optional<lock_handle>); the
  /// exception is one try_acquire would throw. use_future and use_awaitable rethrow it.
  /// Cancellation: by `stop` only (Boost 1.74 has no cancellation slots); the operation then
  /// removes its footprint at the backend and completes with std::nullopt.
  /// Object lifetimes: the lock object need not outlive the operation.
  /// Thread safety: the handler runs on its associated executor (by default the provider's),
  /// never inside this call.
  /// Throws: std::invalid_argument for a negative timeout, at initiation.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::try_acquire_signature) CompletionToken>
  auto async_try_acquire(std::chrono::nanoseconds timeout, std::stop_token stop,
                         CompletionToken&& token) const {
    return detail::async_try_acquire(target_, lock_mode::exclusive, timeout, std::move(stop),
                                     std::forward<CompletionToken>(token));
  }

  /// Starts acquire without holding a thread while it waits.
  ///
  /// Completion signature: void(std::exception_ptr, lock_handle); not obtaining the lock is
  /// a timeout_error or cancelled_error, as for acquire. Otherwise as async_try_acquire.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::acquire_signature) CompletionToken>
  auto async_acquire(std::chrono::nanoseconds timeout, std::stop_token stop,
                     CompletionToken&& token) const {
    return detail::async_acquire(target_, lock_mode::exclusive, timeout, std::move(stop),
                                 std::forward<CompletionToken>(token));
  }

  /// A copy of this lock whose grants last at most `limit` (zero: no limit; the provider's
  /// default otherwise applies). When a holder keeps it longer (an endless loop, a stuck
  /// call), its handle is marked lost and the lock is released, so others get it; see
  /// docs/semantics.md, "Maximum hold time". Throws std::invalid_argument if negative.
  [[nodiscard]] distributed_lock with_max_hold(std::chrono::nanoseconds limit) const {
    return distributed_lock(detail::with_max_hold(target_, limit));
  }

  /// A copy of this lock whose grants hold it at least `min_hold` from the grant, as the
  /// server's clock counts (the machine's for the file and memory backends): a release before
  /// then leaves it held until grant + min_hold, also when the holder's process exits or dies,
  /// and every dlock acquire of the name, with or without the option, waits for it. For a job
  /// that must run once per window across hosts whose clocks disagree (docs/recipes.md). Zero:
  /// none (the provider's default otherwise applies). Throws std::invalid_argument if
  /// negative, or where the backend cannot keep it (docs/semantics.md, "Minimum hold").
  [[nodiscard]] distributed_lock with_min_hold(std::chrono::nanoseconds min_hold) const {
    return distributed_lock(detail::with_min_hold(target_, min_hold));
  }

  /// A copy of this lock whose grants carry `owner` (what inspect() shows; the provider's
  /// owner otherwise, provider::set_owner). Throws std::invalid_argument for an owner over 256
  /// bytes or with a control character.
  [[nodiscard]] distributed_lock with_owner(std::string owner) const {
    return distributed_lock(detail::with_owner(target_, std::move(owner)));
  }

  /// Asks the lock service whether the grant with `fencing_token` still holds this lock: true
  /// only while that grant holds it at the server (not after its release, its loss, or during
  /// a later grant; an unknown token is not current). For a resource server that receives
  /// writes stamped with a token and does not store tokens itself (docs/fencing.md). One round
  /// trip where the backend allows it; RedLock answers by majority.
  /// Throws: dlock::connection_error when the server does not answer (never "false");
  /// std::invalid_argument naming the option where the configuration stores no token with its
  /// grants (Redis plain_keys or layout=dotnet, PostgreSQL without owners_table or
  /// fencing_sequence, MySQL without grant_table); std::logic_error on the provider's thread.
  [[nodiscard]] bool is_current(std::uint64_t fencing_token) const {
    return detail::is_current(target_, fencing_token);
  }

  const std::string& name() const noexcept { return target_.name; }

 private:
  friend class provider;
  friend class lock_request;
  explicit distributed_lock(detail::lock_target target) : target_(std::move(target)) {}
  detail::lock_target target_;
};

}  // namespace dlock
