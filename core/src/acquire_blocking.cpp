// The sync API: an uncontended acquire settled on the caller's thread when the backend
// offers it, otherwise the queued acquire_op with the caller blocked on its result.
#include <stdexcept>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/detail/acquire.hpp>

#include "acquire_op.hpp"
#include "gated_acquire.hpp"
#include "held_lock.hpp"
#include "lock_service.hpp"

namespace dlock::detail {

namespace {

/// The uncontended fast path of a blocking acquire: one attempt on the caller's thread,
/// when the backend offers it and no local contender is ahead (a waiting acquire takes the
/// gate for its attempt, so it never overtakes the queue). Returns true when that settled
/// the acquire, with the handle (or nullopt) in `result`; false to go the queued way.
bool settled_inline(const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
                    std::optional<lock_handle>& result) {
  lock_service& service = *target.service;
  const bool waits = timeout > std::chrono::nanoseconds::zero();
  const std::string key = local_gates::key_of(target);
  if (waits && !service.gates().try_enter(key)) return false;
  auto leave_gate = [&] {
    if (!waits) return;
    if (auto next = service.gates().leave(key)) next->gate_granted_from_queue();
  };
  provider_stats& stats = service.stats();
  // The clock is read only for a metrics sink: this is the path the benchmarks count.
  const auto started =
      stats.sink() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  std::unique_ptr<lease> granted;
  try {
    granted = service.backend().try_acquire_inline(request_for(target, mode));
  } catch (...) {
    leave_gate();
    count_outcome(target, mode, acquire_outcome::failed, started);
    throw;
  }
  leave_gate();
  if (granted) {
    count_outcome(target, mode, acquire_outcome::granted, started);
    result.emplace(handle_for(target, mode, std::move(granted)));
    return true;
  }
  if (waits) return false;
  // A zero timeout had its one attempt.
  count_outcome(target, mode, acquire_outcome::not_acquired, started);
  return true;
}

}  // namespace

void refuse_own_thread(const lock_target& target, std::string_view what,
                       std::string_view instead) {
  if (target.service->backend().running_in_this_thread()) {
    throw std::logic_error("dlock: blocking " + std::string(what) + " of '" +
                           naming::quote_for_message(target.name) +
                           "' on the provider's own thread would deadlock; use " +
                           std::string(instead));
  }
}

std::optional<settled_acquire> settle_async_acquire_inline(const lock_target& target,
                                                           lock_mode mode,
                                                           std::chrono::nanoseconds timeout,
                                                           const std::stop_token& stop,
                                                           bool fail_with_error) {
  check_timeout(target, timeout);
  const dlock::backend& owner = target.service->backend();
  if (gated(target, mode) || !owner.acquires_inline() || !owner.acquires_inline_locally() ||
      stop.stop_requested()) {
    return std::nullopt;
  }
  settled_acquire settled;
  try {
    if (!settled_inline(target, mode, timeout, settled.handle)) return std::nullopt;
  } catch (...) {
    settled.error = std::current_exception();
    return settled;
  }
  if (!settled.handle && fail_with_error) {
    settled.error = not_obtained_error(target, ending::none, timeout);
  }
  return settled;
}

std::optional<lock_handle> acquire_blocking(const lock_target& target, lock_mode mode,
                                            std::chrono::nanoseconds timeout,
                                            std::stop_token stop, bool fail_with_error) {
  check_timeout(target, timeout);
  refuse_own_thread(target, "acquire", "async_acquire");
  if (gated(target, mode)) {
    return gated_acquire_blocking(target, mode, timeout, std::move(stop), fail_with_error);
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
  blocking_reply<std::optional<lock_handle>> reply;
  start_acquire(target, mode, timeout, std::move(stop), fail_with_error,
                [reply](std::exception_ptr error, std::optional<lock_handle> handle) {
                  if (error) {
                    reply.set_error(std::move(error));
                  } else {
                    reply.set_value(std::move(handle));
                  }
                });
  return reply.get();
}

}  // namespace dlock::detail
