#include <dlock/core/lock_handle.hpp>

#include <stdexcept>
#include <utility>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "held_lock.hpp"
#include "validity_clock.hpp"

namespace dlock {

namespace {

std::stop_token stopped_token() {
  static const std::stop_source stopped = [] {
    std::stop_source source;
    source.request_stop();
    return source;
  }();
  return stopped.get_token();
}

const std::string& empty_name() {
  static const std::string empty;
  return empty;
}

// Whoever comes first of the handle and the hold limit releases the lease.
void release_lease(detail::held_lock& held) {
  detail::held_lock* state = &held;
  std::shared_ptr<detail::callbacks_gate> gate;
  {
    std::lock_guard lock(state->callbacks_mutex);
    state->on_lost_callbacks.clear();
    gate = state->callbacks_open;
  }
  if (gate) {
    // Callbacks already posted to the executor are dropped too.
    std::lock_guard lock(gate->mutex);
    gate->open = false;
  }
  if (state->limit) {
    std::lock_guard lock(state->limit->mutex);
    state->limit->timer.cancel();
    if (state->limit->claimed) return;  // the hold limit released it already
    state->limit->claimed = true;
  }
  state->granted->release();
}

}  // namespace

lock_handle::lock_handle() noexcept = default;
lock_handle::lock_handle(std::unique_ptr<detail::held_lock> state) noexcept
    : state_(std::move(state)) {}
lock_handle::lock_handle(lock_handle&& other) noexcept = default;

lock_handle& lock_handle::operator=(lock_handle&& other) noexcept {
  if (this != &other) {
    release_reporting_errors();
    state_ = std::move(other.state_);
  }
  return *this;
}

lock_handle::~lock_handle() { release_reporting_errors(); }

void lock_handle::release() {
  if (!state_) return;
  std::unique_ptr<detail::held_lock> state = std::move(state_);
  auto& stats = state->service->stats();
  const bool was_lost = state->granted->lost();
  if (was_lost) detail::provider_stats::add(stats.lost);
  state->lost_reporter.reset();  // a loss found by the release itself is not news
  auto tell_sink = [&](bool failed) {
    if (!state->sink) return;
    state->sink->released(state->labels(), std::chrono::steady_clock::now() - state->granted_at,
                          was_lost, failed);
  };
  try {
    release_lease(*state);
  } catch (...) {
    detail::provider_stats::add(stats.release_errors);
    tell_sink(true);
    throw;
  }
  tell_sink(false);
}

void lock_handle::release_reporting_errors() noexcept {
  if (!state_) return;
  std::shared_ptr<detail::lock_service> service = state_->service;
  try {
    release();
  } catch (...) {
    service->report(std::current_exception());
  }
}

bool lock_handle::lost() const noexcept { return !state_ || state_->granted->lost(); }

std::stop_token lock_handle::lost_token() const noexcept {
  return state_ ? state_->granted->lost_token() : stopped_token();
}

void lock_handle::on_lost(std::function<void()> callback) {
  if (!state_) {
    throw std::logic_error("dlock: on_lost() on an empty handle (released, moved from or "
                           "default): it holds no lock to lose");
  }
  std::lock_guard lock(state_->callbacks_mutex);
  if (!state_->callbacks_open) state_->callbacks_open = std::make_shared<detail::callbacks_gate>();
  // The executor is asked for only when the loss is found: asking starts the provider's
  // thread, which a holder whose losses are checked on its own thread (the dlock command,
  // check_held_by_caller, held_check.hpp) would otherwise start for nothing. A loss found by
  // core's clock runs the callback on the clock thread: the provider's threads may be the
  // ones that are blocked, and the callback must not wait for them.
  std::function<void()> post_callback = [service = state_->service, callback = std::move(callback),
                                         gate = state_->callbacks_open] {
    auto run_unless_released = [callback, gate] {
      std::lock_guard lock(gate->mutex);
      if (gate->open) callback();
    };
    if (detail::on_validity_clock_thread()) {
      run_unless_released();
    } else {
      boost::asio::post(service->backend().executor(), std::move(run_unless_released));
    }
  };
  state_->on_lost_callbacks.push_back(std::make_unique<detail::held_lock::lost_callback>(
      state_->granted->lost_token(), std::move(post_callback)));
}

void lock_handle::throw_if_lost() const {
  if (!state_) throw lock_lost_error("dlock: the handle holds no lock (released, moved from or empty)");
  if (state_->granted->lost()) {
    throw lock_lost_error("dlock: " + state_->service->describe() + ": lock '" +
                          naming::quote_for_message(state_->name) + "' was lost");
  }
}

std::uint64_t lock_handle::fencing_token() const noexcept {
  return state_ ? state_->granted->fencing_token() : 0;
}

const std::string& lock_handle::name() const noexcept {
  return state_ ? state_->name : empty_name();
}

}  // namespace dlock
