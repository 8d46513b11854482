// dlock/core/backend/blocking_call.hpp: a caller's thread waiting, within a limit, for an
// answer that a backend's own thread gives (for backend implementers).
//
// Every blocking call into a backend (a release, a count, core's sync acquire) has the same
// shape: post work to the backend's thread, wait for its answer, give up after a limit.
// blocking_reply is that answer; call_and_wait() is the whole shape.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <dlock/core/errors.hpp>

namespace dlock {

/// One answer (a value or an exception), given once from any thread, awaited by one caller.
/// Copies share the answer, so a copy can travel into a handler while the caller waits.
///
/// Not a std::promise: the waiter moves the outcome out under the mutex, so an exception is
/// owned by the thread that rethrows it alone, whichever thread drops the shared state last.
/// An answer given after the waiter gave up is refused (set_value() returns false), so a giver
/// whose value needs undoing (a grant) knows to undo it.
///
/// Thread safety: set_value()/set_error() from any thread; get()/get_for() from one thread.
template <typename Result>
class blocking_reply {
 public:
  blocking_reply() : state_(std::make_shared<state>()) {}

  /// Gives the answer. Returns false, leaving `value` untouched, when an answer was given
  /// already or the waiter gave up.
  bool set_value(Result&& value) const {
    std::lock_guard lock(state_->mutex);
    if (!open()) return false;
    state_->value.emplace(std::move(value));
    return mark_given();
  }
  /// Gives an exception as the answer; false as for set_value().
  bool set_error(std::exception_ptr error) const {
    std::lock_guard lock(state_->mutex);
    if (!open()) return false;
    state_->error = std::move(error);
    return mark_given();
  }

  /// Blocks until the answer is given; returns its value or rethrows its exception.
  Result get() const {
    std::unique_lock lock(state_->mutex);
    state_->given_cv.wait(lock, [&] { return state_->given; });
    return take(lock);
  }

  /// As get(), waiting at most `timeout` (nanoseconds::max(): no limit). std::nullopt when no
  /// answer came in time; a later answer is then refused.
  std::optional<Result> get_for(std::chrono::nanoseconds timeout) const {
    if (timeout == std::chrono::nanoseconds::max()) return get();
    std::unique_lock lock(state_->mutex);
    if (!state_->given_cv.wait_for(lock, timeout, [&] { return state_->given; })) {
      state_->abandoned = true;
      return std::nullopt;
    }
    return take(lock);
  }

  /// As get_for(), for a waiter that waits in steps and does something between them: an
  /// answer that did not come in time is still taken later.
  std::optional<Result> get_within(std::chrono::nanoseconds timeout) const {
    std::unique_lock lock(state_->mutex);
    if (!state_->given_cv.wait_for(lock, timeout, [&] { return state_->given; })) {
      return std::nullopt;
    }
    return take(lock);
  }

 private:
  struct state {
    std::mutex mutex;
    std::condition_variable given_cv;
    bool given = false;
    bool abandoned = false;
    std::optional<Result> value;
    std::exception_ptr error;
  };

  bool open() const { return !state_->given && !state_->abandoned; }
  bool mark_given() const {
    state_->given = true;
    state_->given_cv.notify_one();
    return true;
  }

  Result take(std::unique_lock<std::mutex>& lock) const {
    std::exception_ptr error = std::move(state_->error);
    std::optional<Result> value = std::move(state_->value);
    lock.unlock();
    if (error) std::rethrow_exception(std::move(error));
    return std::move(*value);
  }

  std::shared_ptr<state> state_;
};

/// Posts `work(reply)` to `executor` and waits up to `timeout` for the blocking_reply<Result>
/// it gives (an exception thrown by `work` is the answer too). Returns the value or rethrows
/// the exception.
/// Throws: dlock::connection_error(`timeout_message`) when no answer came within `timeout`.
/// Requires: not called on the executor's thread (it would wait for itself).
template <typename Result, typename Work>
Result call_and_wait(const boost::asio::any_io_executor& executor,
                     std::chrono::nanoseconds timeout, const std::string& timeout_message,
                     Work&& work) {
  blocking_reply<Result> reply;
  boost::asio::post(executor, [reply, work = std::forward<Work>(work)]() mutable {
    try {
      work(reply);
    } catch (...) {
      reply.set_error(std::current_exception());
    }
  });
  std::optional<Result> result = reply.get_for(timeout);
  if (!result) throw connection_error(timeout_message);
  return std::move(*result);
}

}  // namespace dlock
