// Acquires through a reader-writer lock's upgrade gate (see gated_acquire.hpp).
#include "gated_acquire.hpp"

#include <memory>
#include <tuple>
#include <utility>

#include "acquire_op.hpp"
#include "gated_lease.hpp"
#include "held_lock.hpp"
#include "shared_deadline.hpp"

namespace dlock::detail {

namespace {

lock_target gate_of(const lock_target& target) {
  lock_target gate = step_of(target);
  gate.kind = resource_kind::upgrade_gate;
  return gate;
}

/// The end of a gated acquire, counted once: the handle of both grants, or not obtained (the
/// gate, if taken, is released), as an error when `fail_with_error`.
std::pair<std::exception_ptr, std::optional<lock_handle>> settle(
    const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
    const std::stop_token& stop, bool fail_with_error, std::optional<lock_handle> gate,
    std::optional<lock_handle> grant, std::chrono::steady_clock::time_point started) {
  if (gate && grant) {
    count_outcome(target, mode, acquire_outcome::granted, started);
    auto both = std::make_unique<gated_lease>(step_of(target), handle_access::take_lease(*gate),
                                              handle_access::take_lease(*grant), mode);
    return {nullptr, handle_for(target, mode, std::move(both))};
  }
  gate.reset();
  const bool stopped = stop.stop_requested();
  count_outcome(target, mode,
                stopped                                     ? acquire_outcome::cancelled
                : timeout > std::chrono::nanoseconds::zero() ? acquire_outcome::timed_out
                                                             : acquire_outcome::not_acquired,
                started);
  if (!fail_with_error) return {};
  return {not_obtained_error(target, stopped ? ending::stopped : ending::timed_out, timeout),
          std::nullopt};
}

/// The async chain: the gate, then the lock, each from the previous completion.
struct gated_acquire_op : std::enable_shared_from_this<gated_acquire_op> {
  gated_acquire_op(const lock_target& target, lock_mode mode, std::chrono::nanoseconds timeout,
                   std::stop_token stop, bool fail_with_error, try_acquire_completion done)
      : target(target), mode(mode), timeout(timeout), deadline(timeout), stop(std::move(stop)),
        fail_with_error(fail_with_error), done(std::move(done)) {}

  void start() {
    start_chained_acquire(gate_of(target), lock_mode::exclusive, deadline.remaining(), stop, false,
                          [self = shared_from_this()](std::exception_ptr error,
                                                      std::optional<lock_handle> gate) {
                            if (error || !gate) {
                              return self->finish(std::move(error), std::move(gate), {});
                            }
                            self->take_lock(std::move(gate));
                          });
  }

  void take_lock(std::optional<lock_handle> gate) {
    start_chained_acquire(step_of(target), mode, deadline.remaining(), stop, false,
                          [self = shared_from_this(), gate = std::move(gate)](
                              std::exception_ptr error, std::optional<lock_handle> grant) mutable {
                            self->finish(std::move(error), std::move(gate), std::move(grant));
                          });
  }

  void finish(std::exception_ptr error, std::optional<lock_handle> gate,
              std::optional<lock_handle> grant) {
    auto complete = std::move(done);
    std::optional<lock_handle> handle;
    if (error) {
      gate.reset();
      count_outcome(target, mode, acquire_outcome::failed, started);
    } else {
      std::tie(error, handle) = settle(target, mode, timeout, stop, fail_with_error,
                                       std::move(gate), std::move(grant), started);
    }
    // As acquire_op::finish: the caller, not this thread, must be the one to drop the last
    // reference to the provider (a thread cannot join itself).
    target.service.reset();
    complete(std::move(error), std::move(handle));
  }

  lock_target target;
  lock_mode mode;
  std::chrono::nanoseconds timeout;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  shared_deadline deadline;
  std::stop_token stop;
  bool fail_with_error;
  try_acquire_completion done;
};

}  // namespace

bool gated(const lock_target& target, lock_mode mode) noexcept {
  return !target.step && target.kind == resource_kind::reader_writer_lock &&
         mode == lock_mode::exclusive;
}

lock_target step_of(const lock_target& target) {
  lock_target step = target;
  step.step = true;
  step.max_hold = std::chrono::nanoseconds::zero();
  return step;
}

void start_gated_acquire(const lock_target& target, lock_mode mode,
                         std::chrono::nanoseconds timeout, std::stop_token stop,
                         bool fail_with_error, try_acquire_completion done) {
  check_timeout(target, timeout);
  std::make_shared<gated_acquire_op>(target, mode, timeout, std::move(stop), fail_with_error,
                                     std::move(done))
      ->start();
}

std::optional<lock_handle> gated_acquire_blocking(const lock_target& target, lock_mode mode,
                                                  std::chrono::nanoseconds timeout,
                                                  std::stop_token stop, bool fail_with_error) {
  check_timeout(target, timeout);
  const auto started = std::chrono::steady_clock::now();
  const shared_deadline deadline(timeout);
  std::optional<lock_handle> gate;
  std::optional<lock_handle> grant;
  try {
    gate = acquire_blocking(gate_of(target), lock_mode::exclusive, deadline.remaining(), stop,
                            false);
    if (gate) grant = acquire_blocking(step_of(target), mode, deadline.remaining(), stop, false);
  } catch (...) {
    gate.reset();
    count_outcome(target, mode, acquire_outcome::failed, started);
    throw;
  }
  auto [failure, handle] =
      settle(target, mode, timeout, stop, fail_with_error, std::move(gate), std::move(grant),
             started);
  if (failure) std::rethrow_exception(failure);
  return std::move(handle);
}

}  // namespace dlock::detail
