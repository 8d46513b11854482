// One acquire, from the local gate to the backend's answer (see acquire_op.hpp).
#include "acquire_op.hpp"

#include <utility>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "held_lock.hpp"
#include "lock_service.hpp"

namespace dlock::detail {

namespace {

std::string format_timeout(std::chrono::nanoseconds timeout) {
  using namespace std::chrono;
  if (timeout % seconds(1) == nanoseconds::zero()) {
    return std::to_string(duration_cast<seconds>(timeout).count()) + "s";
  }
  if (timeout % milliseconds(1) == nanoseconds::zero()) {
    return std::to_string(duration_cast<milliseconds>(timeout).count()) + "ms";
  }
  return std::to_string(duration_cast<microseconds>(timeout).count()) + "us";
}

const char* primitive_noun(resource_kind kind) {
  switch (kind) {
    case resource_kind::lock: return "lock";
    case resource_kind::reader_writer_lock: return "reader-writer lock";
    case resource_kind::semaphore: return "semaphore";
    case resource_kind::upgrade_gate: return "upgrade gate of reader-writer lock";
    case resource_kind::election: return "leadership of election";
  }
  return "lock";
}

}  // namespace

acquire_request request_for(const lock_target& target, lock_mode mode) {
  acquire_request request;
  request.kind = target.kind;
  request.name = target.name;
  request.mode = mode;
  request.max_count = target.max_count;
  request.owner = target.owner.empty() ? target.service->owner() : target.owner;
  if (target.kind == resource_kind::lock) request.min_hold = target.min_hold;
  return request;
}

void count_outcome(const lock_target& target, lock_mode mode, acquire_outcome outcome,
                   std::chrono::steady_clock::time_point started) noexcept {
  if (!target.step) target.service->stats().acquire_ended(labels_of(target, mode), outcome, started);
}

std::exception_ptr not_obtained_error(const lock_target& target, ending why,
                                      std::chrono::nanoseconds timeout) {
  const std::string where = "dlock: " + target.service->describe() + ": ";
  const std::string what = std::string(primitive_noun(target.kind)) + " '" +
                           naming::quote_for_message(target.name) + "'";
  if (why == ending::stopped) {
    return std::make_exception_ptr(
        cancelled_error(where + "stop requested while waiting for " + what));
  }
  if (timeout == std::chrono::nanoseconds::zero()) {
    return std::make_exception_ptr(timeout_error(where + what + " is held elsewhere"));
  }
  return std::make_exception_ptr(timeout_error(
      where + "timed out after " + format_timeout(timeout) + " waiting for " + what));
}


acquire_op::acquire_op(const lock_target& target, lock_mode mode,
                       std::chrono::nanoseconds timeout, std::stop_token stop,
                       bool fail_with_error, try_acquire_completion done)
    : target_(target),
      mode_(mode),
      timeout_(timeout),
      stop_(std::move(stop)),
      fail_with_error_(fail_with_error),
      done_(std::move(done)),
      strand_(boost::asio::make_strand(target.service->backend().acquire_executor())),
      timer_(strand_),
      gate_key_(local_gates::key_of(target)) {}

void acquire_op::start() {
  boost::asio::post(strand_, [self = shared_from_this()] { self->run(); });
}

void acquire_op::gate_granted_from_queue() {
  boost::asio::post(strand_, [self = shared_from_this()] { self->feed(event::gate_granted); });
}

void acquire_op::run() {
  const bool stopped = stop_.stop_requested();
  if (!stopped && waits()) arm_deadline_and_stop();
  perform(machine_.start(waits(), stopped));
}

void acquire_op::arm_deadline_and_stop() {
  const auto now = std::chrono::steady_clock::now();
  if (timeout_ < std::chrono::steady_clock::time_point::max() - now) {
    deadline_ = now + timeout_;
    timer_.expires_at(deadline_);
    timer_.async_wait(boost::asio::bind_executor(
        strand_, [self = shared_from_this()](boost::system::error_code ec) {
          if (!ec) self->feed(event::deadline);
        }));
  }
  if (stop_.stop_possible()) {
    // Runs on the requester's thread, whose stop_callback destructor waits for it: post only.
    stop_callback_.emplace(stop_, [weak = weak_from_this(), strand = strand_] {
      boost::asio::post(strand, [weak] {
        if (auto self = weak.lock()) self->feed(event::stop);
      });
    });
  }
}

void acquire_op::feed(event e) { perform(machine_.on(e)); }

void acquire_op::perform(const acquire_machine::actions& actions) {
  for (const auto a : actions) {
    switch (a) {
      case acquire_machine::action::enter_gate:
        if (target_.service->gates().enter(gate_key_, shared_from_this())) {
          feed(event::gate_granted);
        }
        break;
      case acquire_machine::action::withdraw_from_gate:
        // Not found means the gate is on its way to us: gate_granted comes then.
        if (target_.service->gates().withdraw(gate_key_, this)) feed(event::gate_withdrawn);
        break;
      case acquire_machine::action::start_backend:
        start_backend();
        break;
      case acquire_machine::action::withdraw_attempt:
        if (backend_op_) backend_op_->cancel();
        break;
      case acquire_machine::action::arm_grace:
        timer_.expires_after(stop_grace);
        timer_.async_wait(boost::asio::bind_executor(
            strand_, [self = shared_from_this()](boost::system::error_code ec) {
              if (!ec) self->feed(event::grace_elapsed);
            }));
        break;
      case acquire_machine::action::leave_gate:
        if (!target_.service) break;  // answered: the gate was left then
        if (auto next = target_.service->gates().leave(gate_key_)) next->gate_granted_from_queue();
        break;
      case acquire_machine::action::answer:
        answer();
        break;
      case acquire_machine::action::give_back:
        // A lease's destructor releases without waiting (lease.hpp), as this strand must not.
        granted_.reset();
        error_ = nullptr;
        break;
    }
  }
}

void acquire_op::start_backend() {
  acquire_request request = request_for(target_, mode_);
  request.wait = waits();
  request.deadline = deadline_;
  try {
    backend_op_ = target_.service->backend().start_acquire(
        std::move(request), [self = shared_from_this()](std::exception_ptr error,
                                                        std::unique_ptr<lease> granted) mutable {
          auto strand = self->strand_;
          boost::asio::post(strand, [self = std::move(self), error = std::move(error),
                                     granted = std::move(granted)]() mutable {
            self->backend_ended(std::move(error), std::move(granted));
          });
        });
  } catch (...) {
    backend_ended(std::current_exception(), nullptr);
  }
}

void acquire_op::backend_ended(std::exception_ptr error, std::unique_ptr<lease> granted) {
  backend_op_.reset();
  const event e = granted ? event::backend_granted
                  : error ? event::backend_failed
                          : event::backend_declined;
  error_ = std::move(error);
  granted_ = std::move(granted);
  feed(e);
  // Whatever the machine did not take (a failure after the caller heard) is dropped here.
  error_ = nullptr;
}

void acquire_op::answer() {
  timer_.cancel();
  stop_callback_.reset();
  std::optional<lock_handle> handle;
  std::exception_ptr error = std::move(error_);
  acquire_outcome outcome = acquire_outcome::granted;
  if (granted_) {
    handle.emplace(handle_for(target_, mode_, std::move(granted_)));
  } else if (error) {
    outcome = acquire_outcome::failed;
  } else {
    const ending why = machine_.why_not();
    outcome = why == ending::stopped ? acquire_outcome::cancelled
              : waits()              ? acquire_outcome::timed_out
                                     : acquire_outcome::not_acquired;
    if (fail_with_error_) error = not_obtained_error(target_, why, timeout_);
  }
  count_outcome(target_, mode_, outcome, started_);
  auto done = std::move(done_);
  // The caller may drop its last reference as soon as it has the result; then it, not
  // this thread, shuts the provider down (a thread cannot join itself).
  target_.service.reset();
  done(std::move(error), std::move(handle));
}

}  // namespace dlock::detail
