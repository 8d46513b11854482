// The checks and lookups the primitives' inline templates call (detail/acquire.hpp).
#include <stdexcept>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/detail/acquire.hpp>

#include "acquire_op.hpp"
#include "gated_acquire.hpp"
#include "lock_service.hpp"

namespace dlock::detail {

lock_target with_max_hold(lock_target target, std::chrono::nanoseconds max_hold) {
  if (max_hold < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: negative max_hold for lock '" +
                                naming::quote_for_message(target.name) + "'");
  }
  target.max_hold = max_hold;
  return target;
}

void check_min_hold(const lock_service& service, std::chrono::nanoseconds min_hold,
                    const std::string& what) {
  if (min_hold < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: negative min_hold for " + what);
  }
  if (min_hold == std::chrono::nanoseconds::zero()) return;
  if (auto why = service.backend().min_hold_refusal(); !why.empty()) {
    throw std::invalid_argument("dlock: " + service.describe() + ": min_hold for " + what +
                                " is not kept by this backend: " + why);
  }
}

lock_target with_min_hold(lock_target target, std::chrono::nanoseconds min_hold) {
  check_min_hold(*target.service, min_hold,
                 "lock '" + naming::quote_for_message(target.name) + "'");
  target.min_hold = min_hold;
  return target;
}

lock_target with_owner(lock_target target, std::string owner) {
  validate_owner(owner);
  target.owner = std::move(owner);
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
  if (gated(target, mode)) {
    start_gated_acquire(target, mode, timeout, std::move(stop), fail_with_error, std::move(done));
    return;
  }
  std::make_shared<acquire_op>(target, mode, timeout, std::move(stop), fail_with_error,
                               std::move(done))
      ->start();
}

void start_chained_acquire(const lock_target& target, lock_mode mode,
                           std::chrono::nanoseconds timeout, std::stop_token stop,
                           bool fail_with_error, try_acquire_completion done) {
  const dlock::backend& backend = target.service->backend();
  if (backend.acquire_executor() == backend.executor()) {
    start_acquire(target, mode, timeout, std::move(stop), fail_with_error, std::move(done));
    return;
  }
  start_acquire(target, mode, timeout, std::move(stop), fail_with_error,
                [done = std::move(done), executor = backend.executor()](
                    std::exception_ptr error, std::optional<lock_handle> handle) mutable {
                  boost::asio::post(executor, [done = std::move(done), error = std::move(error),
                                               handle = std::move(handle)]() mutable {
                    done(std::move(error), std::move(handle));
                  });
                });
}

bool is_current(const lock_target& target, std::uint64_t fencing_token) {
  return target.service->backend().is_current(request_for(target, lock_mode::exclusive),
                                              fencing_token);
}

std::optional<std::uint32_t> current_count(const lock_target& target) {
  return target.service->backend().current_count(request_for(target, lock_mode::exclusive));
}

}  // namespace dlock::detail
