// The acquire state machine shared by every backend: local gate, timeout, stop request,
// completion. Every step of one operation runs on that operation's strand.
#include "lock_service.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <utility>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/errors.hpp>
#include <dlock/core/naming.hpp>

namespace dlock {

void report_background_error(const background_error_handler& handler,
                             std::exception_ptr error) noexcept {
  try {
    if (handler) {
      handler(error);
      return;
    }
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
  } catch (...) {
    std::cerr << "dlock: unknown error in background work\n";
  }
}

std::optional<std::uint32_t> backend::free_slots(const acquire_request&) { return std::nullopt; }

void backend::attach_events(std::shared_ptr<backend_events> events) noexcept {
  events_ = std::move(events);
}

namespace {

class printing_events final : public backend_events {
 public:
  void acquire_waiting() noexcept override {}
  void extension_failed() noexcept override {}
  void background_error(std::exception_ptr error) noexcept override {
    report_background_error({}, std::move(error));
  }
};

}  // namespace

backend_events& backend::events() const noexcept {
  static printing_events fallback;
  return events_ ? *events_ : static_cast<backend_events&>(fallback);
}

std::unique_ptr<lease> backend::try_acquire_inline(const acquire_request&) {
  throw std::logic_error("dlock: backend '" + std::string(scheme()) +
                         "' has no inline acquire");
}

}  // namespace dlock

namespace dlock::detail {

void provider_stats::report(std::exception_ptr error) noexcept {
  background_errors.fetch_add(1, std::memory_order_relaxed);
  report_background_error(on_error, std::move(error));
}

provider_metrics provider_stats::snapshot() const noexcept {
  auto read = [](const std::atomic<std::uint64_t>& counter) {
    return counter.load(std::memory_order_relaxed);
  };
  return {.acquired = read(acquired),
          .waits = read(waits),
          .not_acquired = read(not_acquired),
          .cancelled = read(cancelled),
          .failed = read(failed),
          .lost = read(lost),
          .release_errors = read(release_errors),
          .extension_failures = read(extension_failures),
          .background_errors = read(background_errors)};
}

namespace {

/// The backend's reports, into the provider's counters and error hook. It shares the
/// counters, not the service: the backend may outlive the service for a moment.
class stats_events final : public backend_events {
 public:
  explicit stats_events(std::shared_ptr<provider_stats> stats) : stats_(std::move(stats)) {}
  void acquire_waiting() noexcept override { provider_stats::add(stats_->waits); }
  void extension_failed() noexcept override { provider_stats::add(stats_->extension_failures); }
  void background_error(std::exception_ptr error) noexcept override {
    stats_->report(std::move(error));
  }

 private:
  std::shared_ptr<provider_stats> stats_;
};

}  // namespace

lock_service::lock_service(std::shared_ptr<dlock::backend> backend, error_handler on_error)
    : backend_(std::move(backend)), stats_(std::make_shared<provider_stats>()) {
  stats_->on_error = std::move(on_error);
  backend_->attach_events(std::make_shared<stats_events>(stats_));
}

void lock_service::report(std::exception_ptr error) noexcept { stats_->report(std::move(error)); }

std::string lock_service::describe() const {
  return std::string(backend_->scheme()) + ' ' + backend_->endpoint();
}

bool lock_service::try_enter_gate(const std::string& key) {
  std::lock_guard lock(gates_mutex_);
  return gates_.try_emplace(key).second;
}

bool lock_service::enter_gate(const std::string& key, const std::shared_ptr<acquire_op>& op) {
  std::lock_guard lock(gates_mutex_);
  auto [it, inserted] = gates_.try_emplace(key);
  if (!inserted) it->second.push_back(op);
  return inserted;
}

std::shared_ptr<acquire_op> lock_service::leave_gate(const std::string& key) {
  std::lock_guard lock(gates_mutex_);
  auto it = gates_.find(key);
  if (it == gates_.end()) return nullptr;
  if (it->second.empty()) {
    gates_.erase(it);
    return nullptr;
  }
  auto next = std::move(it->second.front());
  it->second.pop_front();
  return next;
}

bool lock_service::withdraw_from_gate(const std::string& key, const acquire_op* op) {
  std::lock_guard lock(gates_mutex_);
  auto it = gates_.find(key);
  if (it == gates_.end()) return false;
  auto& waiting = it->second;
  for (auto w = waiting.begin(); w != waiting.end(); ++w) {
    if (w->get() == op) {
      waiting.erase(w);
      return true;
    }
  }
  return false;
}

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

const char* primitive_noun(primitive kind) {
  switch (kind) {
    case primitive::lock: return "lock";
    case primitive::reader_writer_lock: return "reader-writer lock";
    case primitive::semaphore: return "semaphore";
  }
  return "lock";
}

enum class ending { none, timed_out, stopped };

std::string gate_key_of(const lock_target& target) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(target.kind)));
  return key + target.name;
}

acquire_request request_for(const lock_target& target, lock_mode mode) {
  acquire_request request;
  request.kind = target.kind;
  request.name = target.name;
  request.mode = mode;
  request.max_count = target.max_count;
  return request;
}

// At the deadline: tell the holder first (lost), then free the lock for the others.
void enforce_hold_limit(const std::weak_ptr<hold_limit>& weak_limit,
                        const std::weak_ptr<lock_service>& weak_service) {
  auto limit = weak_limit.lock();
  if (!limit) return;
  std::shared_ptr<lease> expired;
  {
    std::lock_guard lock(limit->mutex);
    expired = limit->claimed ? nullptr : limit->granted.lock();
  }
  if (!expired) return;
  // Outside the mutex: a stop_callback may release the handle at once.
  expired->lost_signal().request_stop();
  {
    std::lock_guard lock(limit->mutex);
    if (limit->claimed) return;
    limit->claimed = true;
  }
  try {
    expired->release();
  } catch (...) {
    if (auto service = weak_service.lock()) {
      provider_stats::add(service->stats().release_errors);
      service->report(std::current_exception());
    }
  }
}

lock_handle handle_for(const lock_target& target, std::unique_ptr<lease> granted) {
  auto state = std::make_unique<held_lock>();
  state->service = target.service;
  state->granted = std::move(granted);
  state->name = target.name;
  if (target.max_hold > std::chrono::nanoseconds::zero()) {
    auto limit = std::make_shared<hold_limit>(target.service->backend().executor());
    limit->granted = state->granted;
    limit->timer.expires_after(target.max_hold);
    limit->timer.async_wait([weak_limit = std::weak_ptr<hold_limit>(limit),
                             weak_service = std::weak_ptr<lock_service>(target.service)](
                                boost::system::error_code ec) {
      if (!ec) enforce_hold_limit(weak_limit, weak_service);
    });
    state->limit = std::move(limit);
  }
  return handle_access::make(std::move(state));
}

/// The exception of an acquire() that did not get the lock.
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

}  // namespace

/// One acquire, from the local gate to the backend's answer.
class acquire_op : public std::enable_shared_from_this<acquire_op> {
 public:
  acquire_op(const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
             std::stop_token stop, bool fail_with_error, try_acquire_completion done)
      : target_(target),
        mode_(mode),
        timeout_(timeout),
        stop_(std::move(stop)),
        fail_with_error_(fail_with_error),
        done_(std::move(done)),
        strand_(boost::asio::make_strand(target.service->backend().executor())),
        timer_(strand_),
        gate_key_(gate_key_of(target)) {}

  void start() {
    boost::asio::post(strand_, [self = shared_from_this()] { self->run(); });
  }

 private:
  enum class phase { starting, queued, at_backend, done };

  bool waits() const { return timeout_ > std::chrono::nanoseconds::zero(); }

  void run() {
    if (stop_.stop_requested()) {
      ending_ = ending::stopped;
      finish(nullptr, nullptr);
      return;
    }
    // A zero timeout makes exactly one attempt and never queues behind local waiters.
    if (!waits()) {
      begin_backend();
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (timeout_ < std::chrono::steady_clock::time_point::max() - now) {
      deadline_ = now + timeout_;
      timer_.expires_at(deadline_);
      timer_.async_wait(boost::asio::bind_executor(
          strand_, [self = shared_from_this()](boost::system::error_code ec) {
            if (!ec) self->expire(ending::timed_out);
          }));
    }
    if (stop_.stop_possible()) {
      // Runs on the requester's thread, whose stop_callback destructor waits for it: post only.
      stop_callback_.emplace(stop_, [weak = weak_from_this(), strand = strand_] {
        boost::asio::post(strand, [weak] {
          if (auto self = weak.lock()) self->expire(ending::stopped);
        });
      });
    }
    phase_ = phase::queued;
    if (target_.service->enter_gate(gate_key_, shared_from_this())) gate_granted();
  }

 public:
  /// Called (posted to our strand) when the gate is handed to this queued op.
  void gate_granted_from_queue() {
    boost::asio::post(strand_, [self = shared_from_this()] { self->gate_granted(); });
  }

 private:
  void gate_granted() {
    holds_gate_ = true;
    if (ending_ != ending::none) {
      finish(nullptr, nullptr);
      return;
    }
    begin_backend();
  }

  void begin_backend() {
    phase_ = phase::at_backend;
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
              self->backend_op_.reset();
              self->finish(std::move(error), std::move(granted));
            });
          });
    } catch (...) {
      finish(std::current_exception(), nullptr);
    }
  }

  void expire(ending why) {
    if (phase_ == phase::done) return;
    if (ending_ == ending::none) ending_ = why;
    if (phase_ == phase::queued && !holds_gate_) {
      // Not found means the gate is on its way to us; gate_granted() finishes then.
      if (target_.service->withdraw_from_gate(gate_key_, this)) finish(nullptr, nullptr);
    } else if (phase_ == phase::at_backend && backend_op_) {
      backend_op_->cancel();
    }
  }

  void finish(std::exception_ptr error, std::unique_ptr<lease> granted) {
    phase_ = phase::done;
    timer_.cancel();
    stop_callback_.reset();
    if (holds_gate_) {
      holds_gate_ = false;
      if (auto next = target_.service->leave_gate(gate_key_)) next->gate_granted_from_queue();
    }
    std::optional<lock_handle> handle;
    provider_stats& stats = target_.service->stats();
    if (granted) {
      provider_stats::add(stats.acquired);
      handle.emplace(handle_for(target_, std::move(granted)));
    } else if (error) {
      provider_stats::add(stats.failed);
    } else {
      provider_stats::add(ending_ == ending::stopped ? stats.cancelled : stats.not_acquired);
      if (fail_with_error_) error = not_obtained_error(target_, ending_, timeout_);
    }
    auto done = std::move(done_);
    // The caller may drop its last reference as soon as it has the result; then it, not
    // this thread, shuts the provider down (a thread cannot join itself).
    target_.service.reset();
    done(std::move(error), std::move(handle));
  }

  lock_target target_;
  lock_mode mode_;
  std::chrono::nanoseconds timeout_;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  std::stop_token stop_;
  bool fail_with_error_;
  try_acquire_completion done_;
  boost::asio::strand<boost::asio::any_io_executor> strand_;
  boost::asio::steady_timer timer_;
  std::string gate_key_;
  std::optional<std::stop_callback<std::function<void()>>> stop_callback_;
  std::shared_ptr<acquire_operation> backend_op_;
  phase phase_ = phase::starting;
  ending ending_ = ending::none;
  bool holds_gate_ = false;
};

lock_target with_max_hold(lock_target target, std::chrono::nanoseconds max_hold) {
  if (max_hold < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: negative max_hold for lock '" +
                                naming::quote_for_message(target.name) + "'");
  }
  target.max_hold = max_hold;
  return target;
}

void check_timeout(const lock_target& target, std::chrono::nanoseconds timeout) {
  if (timeout < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: negative timeout for lock '" +
                                naming::quote_for_message(target.name) + "'");
  }
}

boost::asio::any_io_executor executor_of(const lock_target& target) {
  return target.service->backend().executor();
}

void start_acquire(const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
                   std::stop_token stop, bool fail_with_error, try_acquire_completion done) {
  check_timeout(target, timeout);
  std::make_shared<acquire_op>(target, mode, timeout, std::move(stop), fail_with_error,
                               std::move(done))
      ->start();
}

namespace {

/// The uncontended fast path of a blocking acquire: one attempt on the caller's thread,
/// when the backend offers it and no local contender is ahead (a waiting acquire takes the
/// gate for its attempt, so it never overtakes the queue). Returns true when that settled
/// the acquire, with the handle (or nullopt) in `result`; false to go the queued way.
bool settled_inline(const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
                    std::optional<lock_handle>& result) {
  lock_service& service = *target.service;
  const bool waits = timeout > std::chrono::nanoseconds::zero();
  const std::string key = gate_key_of(target);
  if (waits && !service.try_enter_gate(key)) return false;
  auto leave_gate = [&] {
    if (!waits) return;
    if (auto next = service.leave_gate(key)) next->gate_granted_from_queue();
  };
  std::unique_ptr<lease> granted;
  try {
    granted = service.backend().try_acquire_inline(request_for(target, mode));
  } catch (...) {
    leave_gate();
    provider_stats::add(service.stats().failed);
    throw;
  }
  leave_gate();
  if (granted) {
    provider_stats::add(service.stats().acquired);
    result.emplace(handle_for(target, std::move(granted)));
    return true;
  }
  if (waits) return false;
  provider_stats::add(service.stats().not_acquired);  // a zero timeout had its one attempt
  return true;
}

}  // namespace

std::optional<lock_handle> acquire_blocking(const lock_target& target, lock_mode mode,
                                            std::chrono::nanoseconds timeout,
                                            std::stop_token stop, bool fail_with_error) {
  check_timeout(target, timeout);
  if (target.service->backend().running_in_this_thread()) {
    throw std::logic_error("dlock: blocking acquire of '" +
                           naming::quote_for_message(target.name) +
                           "' on the provider's own thread would deadlock; use async_acquire");
  }
  if (target.service->backend().acquires_inline() && !stop.stop_requested()) {
    std::optional<lock_handle> result;
    if (settled_inline(target, mode, timeout, result)) {
      if (!result && fail_with_error) {
        std::rethrow_exception(not_obtained_error(target, ending::none, timeout));
      }
      return result;
    }
  }
  // Not a std::promise: the caller moves the outcome out under the mutex, so the error is
  // owned by the thread that rethrows it alone, whichever thread drops the shared state.
  struct outcome {
    std::mutex mutex;
    std::condition_variable ready_cv;
    bool ready = false;
    std::exception_ptr error;
    std::optional<lock_handle> handle;
  };
  auto shared = std::make_shared<outcome>();
  start_acquire(target, mode, timeout, std::move(stop), fail_with_error,
                [shared](std::exception_ptr error, std::optional<lock_handle> handle) {
                  std::lock_guard lock(shared->mutex);
                  shared->error = std::move(error);
                  shared->handle = std::move(handle);
                  shared->ready = true;
                  shared->ready_cv.notify_one();
                });
  std::unique_lock lock(shared->mutex);
  shared->ready_cv.wait(lock, [&] { return shared->ready; });
  std::exception_ptr error = std::move(shared->error);
  std::optional<lock_handle> handle = std::move(shared->handle);
  lock.unlock();
  if (error) std::rethrow_exception(std::move(error));
  return handle;
}

std::optional<std::uint32_t> free_slots(const lock_target& target) {
  return target.service->backend().free_slots(request_for(target, lock_mode::exclusive));
}

}  // namespace dlock::detail
