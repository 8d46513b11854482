// Private to core: one acquire, from the local gate to the backend's answer, and what both
// the queued path and the blocking fast path need to tell about its end.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/detail/acquire.hpp>

#include "acquire_machine.hpp"
#include "provider_stats.hpp"

namespace dlock::detail {

/// start_acquire for a step of a chain (a gated acquire, acquire_all, an upgrade, a
/// campaign): `done` runs on the provider's executor, since it calls into the backend (a
/// release, the next step, a proclaim) in ways that may wait for the thread acquires complete
/// on (backend::acquire_executor). Where that is the provider's executor, start_acquire itself.
void start_chained_acquire(const lock_target& target, lock_mode mode,
                           std::chrono::nanoseconds timeout, std::stop_token stop,
                           bool fail_with_error, try_acquire_completion done);

/// What the backend is asked for an acquire of `target` in `mode` (one attempt).
acquire_request request_for(const lock_target& target, lock_mode mode);

/// Throws std::logic_error when called on the provider's own thread, where a blocking `what`
/// would wait for itself; the message suggests `instead`.
void refuse_own_thread(const lock_target& target, std::string_view what,
                       std::string_view instead);

/// Counts an acquire's outcome in its provider's metrics and tells its metrics sink, unless
/// the acquire is a step of a gated acquire (which counts once for both steps). `started` is
/// read only with a sink.
void count_outcome(const lock_target& target, lock_mode mode, acquire_outcome outcome,
                   std::chrono::steady_clock::time_point started) noexcept;

/// The exception of an acquire() that did not get the lock: timeout_error or cancelled_error.
std::exception_ptr not_obtained_error(const lock_target& target, ending why,
                                      std::chrono::nanoseconds timeout);

/// One acquire, from the local gate to the backend's answer: performs what its
/// acquire_machine asks and feeds it what happens. Every step runs on the operation's strand.
class acquire_op : public std::enable_shared_from_this<acquire_op> {
 public:
  acquire_op(const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
             std::stop_token stop, bool fail_with_error, try_acquire_completion done);

  /// Begins the operation on its strand.
  void start();
  /// Called when the gate is handed to this queued op; continues on its strand.
  void gate_granted_from_queue();

 private:
  using event = acquire_machine::event;

  bool waits() const { return timeout_ > std::chrono::nanoseconds::zero(); }
  void run();
  void arm_deadline_and_stop();
  void feed(event e);
  void perform(const acquire_machine::actions& actions);
  void start_backend();
  void backend_ended(std::exception_ptr error, std::unique_ptr<lease> granted);
  void answer();

  lock_target target_;
  lock_mode mode_;
  std::chrono::nanoseconds timeout_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  std::stop_token stop_;
  bool fail_with_error_;
  try_acquire_completion done_;
  boost::asio::strand<boost::asio::any_io_executor> strand_;
  boost::asio::steady_timer timer_;  ///< the deadline, then the stop grace
  std::string gate_key_;
  std::optional<std::stop_callback<std::function<void()>>> stop_callback_;
  std::shared_ptr<acquire_operation> backend_op_;
  acquire_machine machine_;
  /// The backend's outcome, held from its report until the answer or the give-back.
  std::exception_ptr error_;
  std::unique_ptr<lease> granted_;
};

}  // namespace dlock::detail
