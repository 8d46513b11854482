// dlock/core/acquire_all.hpp: taking several locks together, without deadlock.
//
// acquire_all() takes a list of locks (any mix of primitives and providers) in one canonical
// order that every process computes the same way, so two callers listing the same locks in
// different orders cannot deadlock each other. One timeout and one stop token cover the whole
// list; on any failure what was already taken is released, exactly once, before the call
// returns. The result is one lock_set: releasing it releases all.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include <boost/asio/async_result.hpp>

#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/detail/unique_function.hpp>
#include <dlock/core/distributed_lock.hpp>
#include <dlock/core/distributed_reader_writer_lock.hpp>
#include <dlock/core/distributed_semaphore.hpp>
#include <dlock/core/lock_handle.hpp>

namespace dlock {

class lock_set;

namespace detail {
struct lock_set_access;
}

/// One entry of an acquire_all() list: a lock, a semaphore slot, or one side of a
/// reader-writer lock. Cheap to copy; refers to its provider like the lock object does.
class lock_request {
 public:
  /// The exclusive lock.
  lock_request(const distributed_lock& lock);  // NOLINT: implicit on purpose
  /// One slot of the semaphore.
  lock_request(const distributed_semaphore& semaphore);  // NOLINT: implicit on purpose
  /// The shared (read) side of a reader-writer lock.
  static lock_request read(const distributed_reader_writer_lock& lock);
  /// The exclusive (write) side of a reader-writer lock.
  static lock_request write(const distributed_reader_writer_lock& lock);

  const std::string& name() const noexcept { return target_.name; }

 private:
  friend struct detail::lock_set_access;
  lock_request(detail::lock_target target, lock_mode mode)
      : target_(std::move(target)), mode_(mode) {}
  detail::lock_target target_;
  lock_mode mode_;
};

/// Several locks held together: what acquire_all() returns.
///
/// Ownership: move-only; destruction releases every lock (in the reverse of the order they
/// were taken). Entries keep the order of the list given to acquire_all().
///
/// Lost: lost() is true, and lost_token() stopped, as soon as any one lock is lost.
///
/// Thread safety: as lock_handle.
class [[nodiscard]] lock_set {
 public:
  lock_set() noexcept;
  lock_set(lock_set&& other) noexcept;
  lock_set& operator=(lock_set&& other) noexcept;
  ~lock_set();

  explicit operator bool() const noexcept { return state_ != nullptr; }
  /// How many locks it holds (0 when empty).
  std::size_t size() const noexcept;
  /// The handle of the lock listed at `index`. Throws std::out_of_range otherwise.
  const lock_handle& operator[](std::size_t index) const;
  /// The fencing token of the lock listed at `index`. Throws std::out_of_range otherwise.
  std::uint64_t fencing_token(std::size_t index) const;

  /// Releases every lock now; idempotent. Throws the first connection_error after trying
  /// every lock (the set is empty afterwards anyway).
  void release();
  /// True when any lock of the set is lost, and on an empty set.
  bool lost() const noexcept;
  /// Stopped when any lock of the set is lost (already stopped on an empty set).
  std::stop_token lost_token() const noexcept;

 private:
  friend struct detail::lock_set_access;
  struct state;
  explicit lock_set(std::unique_ptr<state> held) noexcept;
  std::unique_ptr<state> state_;
};

namespace detail {

using acquire_all_completion =
    unique_function<void(std::exception_ptr, std::optional<lock_set>)>;

/// Sorts, checks and takes the locks one after another; `done` runs once, never inside
/// this call. Throws std::invalid_argument for an empty list, a lock listed twice or a
/// negative timeout.
void start_acquire_all(std::vector<lock_request> locks, std::chrono::nanoseconds timeout,
                       std::stop_token stop, bool fail_with_error, acquire_all_completion done);

/// Throws std::invalid_argument as start_acquire_all would, before anything is started.
void check_acquire_all(const std::vector<lock_request>& locks, std::chrono::nanoseconds timeout);

/// The executor of the first listed lock's provider: the default for async completions.
boost::asio::any_io_executor executor_of(const std::vector<lock_request>& locks);

std::optional<lock_set> acquire_all_blocking(std::vector<lock_request> locks,
                                             std::chrono::nanoseconds timeout,
                                             std::stop_token stop, bool fail_with_error);

template <bool Throwing>
struct initiate_acquire_all {
  template <typename Handler>
  void operator()(Handler&& handler, std::vector<lock_request> locks,
                  std::chrono::nanoseconds timeout, std::stop_token stop) const {
    auto executor = executor_of(locks);
    start_acquire_all(std::move(locks), timeout, std::move(stop), Throwing,
                      completion_posting_to<Throwing, lock_set>(std::forward<Handler>(handler),
                                                                executor));
  }
};

}  // namespace detail

/// Takes every lock of `locks` within `timeout` (zero: one attempt at each), in the
/// canonical order: by backend, endpoint, primitive and name, the same in every process.
/// Each lock gets what remains of the one timeout; a stop request ends the whole call.
/// Returns: the set, or std::nullopt when one lock was not obtained in time or a stop was
/// requested; whatever was taken by then has been released.
/// Throws: std::invalid_argument (empty list, a lock listed twice, negative timeout); as
/// distributed_lock::try_acquire otherwise, after releasing what was taken.
[[nodiscard]] inline std::optional<lock_set> try_acquire_all(
    std::vector<lock_request> locks, std::chrono::nanoseconds timeout = {},
    std::stop_token stop = {}) {
  return detail::acquire_all_blocking(std::move(locks), timeout, std::move(stop), false);
}

/// As try_acquire_all, but waits forever by default and throws dlock::timeout_error or
/// dlock::cancelled_error (naming the lock it was waiting for) instead of returning empty.
[[nodiscard]] inline lock_set acquire_all(std::vector<lock_request> locks,
                                          std::chrono::nanoseconds timeout = forever,
                                          std::stop_token stop = {}) {
  return std::move(
      *detail::acquire_all_blocking(std::move(locks), timeout, std::move(stop), true));
}

/// The async twin of try_acquire_all.
/// Completion signature: void(std::exception_ptr, std::optional<lock_set>).
/// Cancellation, executors and lifetimes: as distributed_lock::async_try_acquire; the default
/// executor is that of the first listed lock's provider.
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(std::exception_ptr, std::optional<lock_set>))
              CompletionToken>
auto async_try_acquire_all(std::vector<lock_request> locks, std::chrono::nanoseconds timeout,
                           std::stop_token stop, CompletionToken&& token) {
  detail::check_acquire_all(locks, timeout);  // thrown at the call, whatever the token
  return boost::asio::async_initiate<CompletionToken,
                                     void(std::exception_ptr, std::optional<lock_set>)>(
      detail::initiate_acquire_all<false>{}, token, std::move(locks), timeout, std::move(stop));
}

/// The async twin of acquire_all.
/// Completion signature: void(std::exception_ptr, lock_set).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(std::exception_ptr, lock_set)) CompletionToken>
auto async_acquire_all(std::vector<lock_request> locks, std::chrono::nanoseconds timeout,
                       std::stop_token stop, CompletionToken&& token) {
  detail::check_acquire_all(locks, timeout);  // thrown at the call, whatever the token
  return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, lock_set)>(
      detail::initiate_acquire_all<true>{}, token, std::move(locks), timeout, std::move(stop));
}

}  // namespace dlock
