// dlock/core/detail/acquire.hpp: what the primitives' inline templates need from core.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <dlock/core/durations.hpp>
#include <dlock/core/lock_kind.hpp>
#include <dlock/core/detail/unique_function.hpp>
#include <dlock/core/lock_handle.hpp>

namespace dlock {

namespace detail {

class lock_service;

using try_acquire_signature = void(std::exception_ptr, std::optional<lock_handle>);
using acquire_signature = void(std::exception_ptr, lock_handle);
using try_acquire_completion = unique_function<try_acquire_signature>;

/// One primitive of one provider, by name.
struct lock_target {
  std::shared_ptr<lock_service> service;
  primitive kind = primitive::lock;
  std::string name;
  std::uint32_t max_count = 1;
  /// Zero: no limit. Otherwise a grant is marked lost and released after this long.
  std::chrono::nanoseconds max_hold{0};
  /// One step of a gated acquire (core/src/gated_acquire.cpp): the gate, or the
  /// reader-writer lock behind it. A step is taken as asked (a write is not gated again) and
  /// not counted in the provider's metrics: the gated acquire counts once.
  bool step = false;
  /// The owner stored with its grants; empty: the provider's (provider::set_owner).
  std::string owner;
};

/// A copy of `target` whose grants end after `max_hold`. Throws std::invalid_argument for a
/// negative duration.
lock_target with_max_hold(lock_target target, std::chrono::nanoseconds max_hold);

/// A copy of `target` whose grants carry `owner`. Throws std::invalid_argument for an owner
/// that validate_owner() rejects.
lock_target with_owner(lock_target target, std::string owner);

/// The semaphore's current count (free slots), if its backend can tell.
std::optional<std::uint32_t> current_count(const lock_target& target);

/// Throws std::invalid_argument for a negative timeout.
void check_timeout(const lock_target& target, std::chrono::nanoseconds timeout);
boost::asio::any_io_executor executor_of(const lock_target& target);

/// Starts an acquire. `done` runs exactly once, never inside this call. With
/// `fail_with_error`, not obtaining the lock completes with timeout_error or cancelled_error
/// instead of an empty optional.
void start_acquire(const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
                   std::stop_token stop, bool fail_with_error, try_acquire_completion done);

/// The async API's start: as start_acquire, after an uncontended attempt on the calling thread
/// when the backend makes it locally (backend::acquires_inline_locally), as the sync API does.
/// `done` must post its handler (a completion never runs inside the initiating call).
void start_async_acquire(const lock_target& target, lock_mode mode,
                         std::chrono::nanoseconds timeout, std::stop_token stop,
                         bool fail_with_error, try_acquire_completion done);

/// The sync API: runs start_acquire and blocks the calling thread on its result.
/// Throws std::logic_error when called from a thread the backend needs (it would deadlock).
std::optional<lock_handle> acquire_blocking(const lock_target& target, lock_mode mode,
                                            std::chrono::nanoseconds timeout,
                                            std::stop_token stop, bool fail_with_error);

/// Wraps `handler` into the completion an async operation starts with: it keeps the
/// handler's associated executor (by default `fallback`) busy until it runs, and there calls
/// `deliver(handler, results...)` with the results it is given, never inside the initiating
/// call.
template <typename Handler, typename Deliver>
auto posted_completion(Handler&& handler, const boost::asio::any_io_executor& fallback,
                       Deliver deliver) {
  auto work =
      boost::asio::make_work_guard(boost::asio::get_associated_executor(handler, fallback));
  return [handler = std::forward<Handler>(handler), work = std::move(work),
          deliver](auto... results) mutable {
    auto executor = work.get_executor();
    boost::asio::post(executor, [handler = std::move(handler), deliver,
                                 ... results = std::move(results)]() mutable {
      deliver(std::move(handler), std::move(results)...);
    });
    work.reset();
  };
}

/// The completion of an acquire: Throwing turns an empty optional result into a
/// default-constructed value (the error then says why).
template <bool Throwing, typename Result, typename Handler>
auto completion_posting_to(Handler&& handler, const boost::asio::any_io_executor& fallback) {
  return posted_completion(
      std::forward<Handler>(handler), fallback,
      [](auto&& handler, std::exception_ptr error, std::optional<Result> result) {
        if constexpr (Throwing) {
          std::move(handler)(std::move(error), result ? std::move(*result) : Result{});
        } else {
          std::move(handler)(std::move(error), std::move(result));
        }
      });
}

/// The initiation passed to boost::asio::async_initiate; Throwing selects acquire (the
/// handle or an exception) over try_acquire (an optional handle).
template <bool Throwing>
struct initiate_acquire {
  lock_target target;
  lock_mode mode;

  template <typename Handler>
  void operator()(Handler&& handler, std::chrono::nanoseconds timeout,
                  std::stop_token stop) const {
    start_async_acquire(
        target, mode, timeout, std::move(stop), Throwing,
        completion_posting_to<Throwing, lock_handle>(std::forward<Handler>(handler),
                                                     executor_of(target)));
  }
};

template <typename CompletionToken>
auto async_try_acquire(const lock_target& target, lock_mode mode,
                       std::chrono::nanoseconds timeout, std::stop_token stop,
                       CompletionToken&& token) {
  check_timeout(target, timeout);
  return boost::asio::async_initiate<CompletionToken, try_acquire_signature>(
      initiate_acquire<false>{target, mode}, token, timeout, std::move(stop));
}

template <typename CompletionToken>
auto async_acquire(const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
                   std::stop_token stop, CompletionToken&& token) {
  check_timeout(target, timeout);
  return boost::asio::async_initiate<CompletionToken, acquire_signature>(
      initiate_acquire<true>{target, mode}, token, timeout, std::move(stop));
}

}  // namespace detail
}  // namespace dlock
