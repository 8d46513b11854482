// A grant becomes a handle here, and a maximum hold time is enforced.
#include "held_lock.hpp"

namespace dlock::detail {

namespace {

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

}  // namespace

lock_handle handle_for(const lock_target& target, lock_mode mode, std::unique_ptr<lease> granted) {
  auto state = std::make_unique<held_lock>();
  state->service = target.service;
  state->granted = std::move(granted);
  state->name = target.name;
  state->kind = target.kind;
  state->mode = mode;
  // A step's grant is its gated acquire's to report, as the step's acquire was (detail::
  // lock_target::step): a sink told of its release would count a lock never counted held.
  if (auto sink = target.step ? nullptr : target.service->stats().sink()) {
    state->sink = sink;
    state->granted_at = std::chrono::steady_clock::now();
    state->lost_reporter = std::make_unique<held_lock::lost_callback>(
        state->granted->lost_token(),
        [sink, backend = state->labels().backend, kind = target.kind, mode,
         name = target.name] { sink->lost(labels_for(backend, kind, mode, name)); });
  }
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

}  // namespace dlock::detail

namespace dlock {

const lease* granted_lease(const lock_handle& handle) noexcept {
  return detail::handle_access::lease_of(handle).get();
}

}  // namespace dlock
