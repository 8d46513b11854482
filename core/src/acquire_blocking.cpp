// The sync API: an uncontended acquire (and, where the backend offers it, its wait) settled on
// the caller's thread, otherwise the queued acquire_op with the caller blocked on its result.
#include <stdexcept>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/detail/acquire.hpp>

#include "acquire_op.hpp"
#include "grace_after_stop.hpp"
#include "gated_acquire.hpp"
#include "held_lock.hpp"
#include "lock_service.hpp"

namespace dlock::detail {

namespace {

/// When a wait of `timeout` from now ends (time_point::max() for none), as acquire_op reckons.
std::chrono::steady_clock::time_point deadline_after(std::chrono::nanoseconds timeout) {
  const auto now = std::chrono::steady_clock::now();
  if (timeout < std::chrono::steady_clock::time_point::max() - now) return now + timeout;
  return std::chrono::steady_clock::time_point::max();
}

/// The fast path of a blocking acquire: the attempt on the caller's thread through the
/// backend's inline_acquirer, when no local contender is ahead (a waiting acquire takes the
/// gate for its attempt, so it never overtakes the queue), and the wait too where the backend
/// offers that (inline_acquirer::waits_inline) and the caller blocks anyway (`blocking`):
/// `stop` then ends it, and `ended` says how it ended without a grant. Returns true when that
/// settled the acquire, with the handle (or nullopt) in `result`; false to go the queued way.
bool settled_inline(const lock_target& target, inline_acquirer& inline_path, lock_mode mode,
                    std::chrono::nanoseconds timeout, bool blocking, const std::stop_token& stop,
                    std::optional<lock_handle>& result, ending& ended) {
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
  acquire_request request = request_for(target, mode);
  const bool wait_here = blocking && waits && inline_path.waits_inline(request);
  try {
    if (wait_here) {
      request.wait = true;
      request.deadline = deadline_after(timeout);
      const grace_after_stop grace(stop, service.backend().executor());
      granted = inline_path.acquire_waiting_inline(request, stop, grace.give_up());
    } else {
      granted = inline_path.try_acquire_inline(request);
    }
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
  if (waits && !wait_here) return false;
  // A zero timeout had its one attempt; a wait here ended by its stop or its deadline.
  ended = !waits                   ? ending::none
          : stop.stop_requested() ? ending::stopped
                                  : ending::timed_out;
  count_outcome(target, mode,
                ended == ending::none      ? acquire_outcome::not_acquired
                : ended == ending::stopped ? acquire_outcome::cancelled
                                           : acquire_outcome::timed_out,
                started);
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
  inline_acquirer* inline_path = target.service->backend().as_inline_acquirer();
  if (gated(target, mode) || !inline_path || !inline_path->acquires_inline_locally() ||
      stop.stop_requested()) {
    return std::nullopt;
  }
  settled_acquire settled;
  ending ended = ending::none;
  try {
    if (!settled_inline(target, *inline_path, mode, timeout, false, {}, settled.handle, ended)) {
      return std::nullopt;
    }
  } catch (...) {
    settled.error = std::current_exception();
    return settled;
  }
  if (!settled.handle && fail_with_error) {
    settled.error = not_obtained_error(target, ended, timeout);
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
  inline_acquirer* inline_path = target.service->backend().as_inline_acquirer();
  if (inline_path && !stop.stop_requested()) {
    std::optional<lock_handle> result;
    ending ended = ending::none;
    if (settled_inline(target, *inline_path, mode, timeout, true, stop, result, ended)) {
      if (!result && fail_with_error) {
        std::rethrow_exception(not_obtained_error(target, ended, timeout));
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
