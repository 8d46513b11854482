// dlock/core/detail/acquire.hpp: what the primitives' inline templates need from core.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>  // before awaitable.hpp, which uses std::exchange without it (Boost 1.74)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif

#include <dlock/core/backend/resource_kind.hpp>
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
  resource_kind kind = resource_kind::lock;
  std::string name;
  std::uint32_t max_count = 1;
  /// Zero: no limit. Otherwise a grant is marked lost and released after this long.
  std::chrono::nanoseconds max_hold{0};
  /// One step of a gated acquire (core/src/gated_acquire.cpp): the gate, or the
  /// reader-writer lock behind it. A step is taken as asked (a write is not gated again),
  /// not counted in the provider's metrics and not told to its metrics sink: the gated
  /// acquire counts once.
  bool step = false;
  /// The owner stored with its grants; empty: the provider's (provider::set_owner).
  std::string owner;
  /// Zero: none. Otherwise a lock's grant holds the name at least this long (min_hold).
  std::chrono::nanoseconds min_hold{0};
};

/// A copy of `target` whose grants end after `max_hold`. Throws std::invalid_argument for a
/// negative duration.
lock_target with_max_hold(lock_target target, std::chrono::nanoseconds max_hold);

/// A copy of `target` whose grants hold its name at least `min_hold`. Throws
/// std::invalid_argument for a negative duration, or a backend that cannot keep it.
lock_target with_min_hold(lock_target target, std::chrono::nanoseconds min_hold);

/// Throws std::invalid_argument unless `service`'s backend can keep a minimum hold of
/// `min_hold` (zero always can); `what` names the lock or the provider's default.
void check_min_hold(const lock_service& service, std::chrono::nanoseconds min_hold,
                    const std::string& what);

/// A copy of `target` whose grants carry `owner`. Throws std::invalid_argument for an owner
/// that validate_owner() rejects.
lock_target with_owner(lock_target target, std::string owner);

/// Whether the exclusive grant with `fencing_token` (a lock's, or a reader-writer lock's
/// writer's) holds `target`'s name now (backend::is_current).
bool is_current(const lock_target& target, std::uint64_t fencing_token);

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

/// An async acquire that ended on the initiating thread.
struct settled_acquire {
  std::exception_ptr error;
  std::optional<lock_handle> handle;
};

/// The async API's uncontended attempt on the calling thread, made when the backend makes it
/// locally (inline_acquirer::acquires_inline_locally), as the sync API does. Empty when that
/// did not settle the acquire: then start_acquire.
std::optional<settled_acquire> settle_async_acquire_inline(const lock_target& target,
                                                           lock_mode mode,
                                                           std::chrono::nanoseconds timeout,
                                                           const std::stop_token& stop,
                                                           bool fail_with_error);

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

/// Calls an acquire's handler with its result: Throwing turns an empty optional result into a
/// default-constructed value (the error then says why).
template <bool Throwing, typename Result>
struct deliver_result {
  template <typename Handler>
  void operator()(Handler&& handler, std::exception_ptr error,
                  std::optional<Result> result) const {
    if constexpr (Throwing) {
      std::move(handler)(std::move(error), result ? std::move(*result) : Result{});
    } else {
      std::move(handler)(std::move(error), std::move(result));
    }
  }
};

/// The completion of an acquire, posted to the handler's executor.
template <bool Throwing, typename Result, typename Handler>
auto completion_posting_to(Handler&& handler, const boost::asio::any_io_executor& fallback) {
  return posted_completion(std::forward<Handler>(handler), fallback,
                           deliver_result<Throwing, Result>{});
}

/// The executor `handler` runs on: its own, or the provider's when it has none. Only the
/// latter asks the provider, whose thread starts at that question.
template <typename Handler>
auto handler_executor(const Handler& handler, const lock_target& target) {
  if constexpr (std::is_same_v<boost::asio::associated_executor_t<Handler>,
                               boost::asio::system_executor>) {
    return executor_of(target);
  } else {
    return boost::asio::get_associated_executor(handler);
  }
}

/// boost::asio::post, straight to an io_context's executor when a type-erased executor holds
/// one (the executor of a coroutine spawned on an io_context): Asio's type-erased post
/// requires three properties of it first, each a copy of the executor.
template <typename Executor, typename Function>
void post_to(const Executor& executor, Function&& function) {
  if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor>) {
    if (auto* plain = executor.template target<boost::asio::io_context::executor_type>()) {
      boost::asio::post(*plain, std::forward<Function>(function));
      return;
    }
  }
  boost::asio::post(executor, std::forward<Function>(function));
}

/// The initiation passed to boost::asio::async_initiate; Throwing selects acquire (the
/// handle or an exception) over try_acquire (an optional handle).
template <bool Throwing>
struct initiate_acquire {
  lock_target target;
  lock_mode mode;
  /// False when the caller has made the inline attempt already (awaitable_acquire).
  bool attempt_inline = true;

  template <typename Handler>
  void operator()(Handler&& handler, std::chrono::nanoseconds timeout,
                  std::stop_token stop) const {
    // Settled here, the result is posted straight to the handler's executor: no type-erased
    // completion and no work guard, which an uncontended async acquire would otherwise pay for.
    if (auto settled = attempt_inline ? settle_async_acquire_inline(target, mode, timeout, stop,
                                                                    Throwing)
                                      : std::nullopt) {
      const auto executor = handler_executor(handler, target);  // before handler moves
      post_to(executor, [handler = std::forward<Handler>(handler),
                         settled = std::move(*settled)]() mutable {
        deliver_result<Throwing, lock_handle>{}(std::move(handler), std::move(settled.error),
                                                std::move(settled.handle));
      });
      return;
    }
    start_acquire(target, mode, timeout, std::move(stop), Throwing,
                  completion_posting_to<Throwing, lock_handle>(std::forward<Handler>(handler),
                                                               executor_of(target)));
  }
};

#if defined(BOOST_ASIO_HAS_CO_AWAIT)
/// Tells use_awaitable_t<Executor> tokens apart, and which executor their coroutine has.
template <typename Token>
struct awaitable_token : std::false_type {};
template <typename Executor>
struct awaitable_token<boost::asio::use_awaitable_t<Executor>> : std::true_type {
  using executor = Executor;
};

/// An acquire co_awaited with use_awaitable. An uncontended attempt that settles on the
/// coroutine's thread continues the coroutine as a nested awaitable that returns at once: no
/// trip through the executor's queue, which would cost more than the memory backend's whole
/// acquire. Nothing runs before the co_await, as with async_initiate's awaitable; otherwise
/// the acquire is started as any other.
template <bool Throwing, typename Executor>
auto awaitable_acquire(lock_target target, lock_mode mode, std::chrono::nanoseconds timeout,
                       std::stop_token stop)
    -> boost::asio::awaitable<std::conditional_t<Throwing, lock_handle, std::optional<lock_handle>>,
                              Executor> {
  using result = std::conditional_t<Throwing, lock_handle, std::optional<lock_handle>>;
  std::optional<settled_acquire> settled =
      settle_async_acquire_inline(target, mode, timeout, stop, Throwing);
  if (!settled) {
    using signature = std::conditional_t<Throwing, acquire_signature, try_acquire_signature>;
    // Named, not temporaries in the co_await expression: GCC 12 destroys such a temporary
    // twice when it is passed by value into a coroutine (the contract suite crashed so).
    boost::asio::use_awaitable_t<Executor> token;
    initiate_acquire<Throwing> initiation{std::move(target), mode, false};
    auto started = boost::asio::async_initiate<boost::asio::use_awaitable_t<Executor>, signature>(
        std::move(initiation), token, timeout, std::move(stop));
    result waited = co_await std::move(started);
    co_return waited;
  }
  if (settled->error) std::rethrow_exception(settled->error);
  if constexpr (Throwing) {
    co_return std::move(*settled->handle);
  } else {
    co_return std::move(settled->handle);
  }
}
#endif

template <bool Throwing, typename Signature, typename CompletionToken>
auto initiate_async_acquire(const lock_target& target, lock_mode mode,
                            std::chrono::nanoseconds timeout, std::stop_token stop,
                            CompletionToken&& token) {
  check_timeout(target, timeout);
#if defined(BOOST_ASIO_HAS_CO_AWAIT)
  if constexpr (awaitable_token<std::decay_t<CompletionToken>>::value) {
    using executor = typename awaitable_token<std::decay_t<CompletionToken>>::executor;
    return awaitable_acquire<Throwing, executor>(target, mode, timeout, std::move(stop));
  } else
#endif
  {
    return boost::asio::async_initiate<CompletionToken, Signature>(
        initiate_acquire<Throwing>{target, mode}, token, timeout, std::move(stop));
  }
}

template <typename CompletionToken>
auto async_try_acquire(const lock_target& target, lock_mode mode,
                       std::chrono::nanoseconds timeout, std::stop_token stop,
                       CompletionToken&& token) {
  return initiate_async_acquire<false, try_acquire_signature>(
      target, mode, timeout, std::move(stop), std::forward<CompletionToken>(token));
}

template <typename CompletionToken>
auto async_acquire(const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
                   std::stop_token stop, CompletionToken&& token) {
  return initiate_async_acquire<true, acquire_signature>(target, mode, timeout, std::move(stop),
                                                         std::forward<CompletionToken>(token));
}

}  // namespace detail
}  // namespace dlock
