// Upgradeable reads: taking one (the gate, then a read) and upgrading it (the read released,
// the write taken, the gate held throughout; see gated_lease.hpp for the lease's phases).
#include <dlock/core/upgradeable_lock_handle.hpp>

#include <memory>
#include <stdexcept>
#include <utility>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "acquire_op.hpp"
#include "gated_acquire.hpp"
#include "gated_lease.hpp"
#include "held_lock.hpp"
#include "lock_service.hpp"

namespace dlock::detail {

struct upgradeable_access {
  static upgradeable_lock_handle make(lock_handle handle) noexcept {
    return upgradeable_lock_handle(std::move(handle));
  }
};

namespace {

/// How long an upgrade that did not get the write waits to take its read back. Only a
/// withdrawn write request still on its way out (a Redis queue entry) or an exclusive lock
/// that bypasses the gate (the lock of the same name where it is one resource, flock(1)) can
/// be in the way, since the gate keeps every writer out.
constexpr std::chrono::seconds read_back_limit{5};

/// The gated lease of an upgradeable read's handle. Throws std::logic_error for an empty one.
std::shared_ptr<gated_lease> upgradeable_lease(const lock_handle& handle) {
  auto granted = handle_access::lease_of(handle);
  if (!granted) {
    throw std::logic_error(
        "dlock: upgrade of an empty upgradeable_lock_handle (released, moved from or default)");
  }
  return std::static_pointer_cast<gated_lease>(granted);
}

std::exception_ptr lost_while_upgrading(const gated_lease& held, const char* what) {
  return std::make_exception_ptr(lock_lost_error(
      "dlock: " + held.lock().service->describe() + ": reader-writer lock '" +
      naming::quote_for_message(held.lock().name) + "' " + what));
}

/// Where an upgrade that did not get the write ends: with the read taken back (the handle is
/// an upgradeable read again), or lost. Returns the error to report, if any.
std::exception_ptr after_write_not_obtained(gated_lease& held, std::exception_ptr error,
                                            std::optional<lock_handle> read,
                                            std::chrono::nanoseconds timeout,
                                            const std::stop_token& stop, bool fail_with_error) {
  if (error) {
    held.abandon_upgrade();
    return error;
  }
  if (!read) {
    held.abandon_upgrade();
    return lost_while_upgrading(held, "could not be read-locked again after its upgrade gave up");
  }
  if (!held.end_upgrade(handle_access::take_lease(*read), lock_mode::shared)) {
    return lost_while_upgrading(held, "was released or lost while upgrading");
  }
  if (!fail_with_error) return nullptr;
  return not_obtained_error(held.lock(), stop.stop_requested() ? ending::stopped : ending::timed_out,
                            timeout);
}

/// Where an upgrade that got the write ends. Returns the error to report, if any.
std::exception_ptr after_write_obtained(gated_lease& held, lock_handle& write) {
  if (held.end_upgrade(handle_access::take_lease(write), lock_mode::exclusive)) return nullptr;
  return lost_while_upgrading(held, "was released or lost while upgrading");
}

/// The async upgrade: the read goes, then the write is waited for (on the provider's thread),
/// and if it does not come the read is taken back.
struct upgrade_op : std::enable_shared_from_this<upgrade_op> {
  upgrade_op(std::shared_ptr<gated_lease> held, std::chrono::nanoseconds timeout,
             std::stop_token stop, bool fail_with_error, upgrade_completion done)
      : held(std::move(held)), timeout(timeout), stop(std::move(stop)),
        fail_with_error(fail_with_error), done(std::move(done)) {}

  // The read is released on the caller's thread, as lock_handle::release() would be, so that
  // the server has seen it go before the write's first attempt (a zero timeout makes only
  // that one). On the provider's own thread a backend releases in the background instead.
  void start(std::shared_ptr<lease> read) { release_read(std::move(read)); }

  void release_read(std::shared_ptr<lease> read) {
    try {
      read->release();
    } catch (...) {
      held->abandon_upgrade();
      return complete(std::current_exception(), false);
    }
    start_chained_acquire(held->lock(), lock_mode::exclusive, timeout, stop, false,
                          [self = shared_from_this()](std::exception_ptr error,
                                                      std::optional<lock_handle> write) {
                            if (write) {
                              return self->complete(after_write_obtained(*self->held, *write),
                                                    true);
                            }
                            if (!error) return self->take_read_back();
                            self->complete(
                                after_write_not_obtained(*self->held, std::move(error), {},
                                                         self->timeout, self->stop,
                                                         self->fail_with_error),
                                false);
                          });
  }

  void take_read_back() {
    start_chained_acquire(held->lock(), lock_mode::shared, read_back_limit, {}, false,
                          [self = shared_from_this()](std::exception_ptr error,
                                                      std::optional<lock_handle> read) {
                            self->complete(
                                after_write_not_obtained(*self->held, std::move(error),
                                                         std::move(read), self->timeout,
                                                         self->stop, self->fail_with_error),
                                false);
                          });
  }

  void complete(std::exception_ptr error, bool upgraded) {
    auto finish = std::move(done);
    // The handle's owner, not this thread, must drop the last reference to the provider (a
    // thread cannot join itself), as in acquire_op::finish.
    held.reset();
    finish(std::move(error), upgraded && !error);
  }

  std::shared_ptr<gated_lease> held;
  std::chrono::nanoseconds timeout;
  std::stop_token stop;
  bool fail_with_error;
  upgrade_completion done;
};

}  // namespace

bool upgraded(const lock_handle& handle) noexcept {
  auto granted = handle_access::lease_of(handle);
  return granted && std::static_pointer_cast<gated_lease>(granted)->writes();
}

void check_upgrade(const lock_handle& handle, std::chrono::nanoseconds timeout) {
  auto held = upgradeable_lease(handle);
  check_timeout(held->lock(), timeout);
  held->check_upgradeable();
}

boost::asio::any_io_executor executor_of_upgrade(const lock_handle& handle) {
  return upgradeable_lease(handle)->lock().service->backend().executor();
}

void start_upgrade(const lock_handle& handle, std::chrono::nanoseconds timeout,
                   std::stop_token stop, bool fail_with_error, upgrade_completion done) {
  auto held = upgradeable_lease(handle);
  check_timeout(held->lock(), timeout);
  std::shared_ptr<lease> read;
  try {
    read = held->begin_upgrade();
  } catch (const lock_lost_error&) {
    boost::asio::post(held->lock().service->backend().executor(),
                      [done = std::move(done), error = std::current_exception()]() mutable {
                        done(std::move(error), false);
                      });
    return;
  }
  std::make_shared<upgrade_op>(std::move(held), timeout, std::move(stop), fail_with_error,
                               std::move(done))
      ->start(std::move(read));
}

bool upgrade_blocking(const lock_handle& handle, std::chrono::nanoseconds timeout,
                      std::stop_token stop, bool fail_with_error) {
  auto held = upgradeable_lease(handle);
  const lock_target& lock = held->lock();
  check_timeout(lock, timeout);
  refuse_own_thread(lock, "upgrade", "async_upgrade");
  std::shared_ptr<lease> read = held->begin_upgrade();
  std::optional<lock_handle> write;
  std::exception_ptr error;
  try {
    read->release();
    read.reset();
    write = acquire_blocking(lock, lock_mode::exclusive, timeout, stop, false);
  } catch (...) {
    error = std::current_exception();
  }
  if (write) {
    if (auto failure = after_write_obtained(*held, *write)) std::rethrow_exception(failure);
    return true;
  }
  std::optional<lock_handle> read_again;
  if (!error) {
    try {
      read_again = acquire_blocking(lock, lock_mode::shared, read_back_limit, {}, false);
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (auto failure = after_write_not_obtained(*held, std::move(error), std::move(read_again),
                                              timeout, stop, fail_with_error)) {
    std::rethrow_exception(failure);
  }
  return false;
}

void start_acquire_upgradeable(const lock_target& target, std::chrono::nanoseconds timeout,
                               std::stop_token stop, bool fail_with_error,
                               acquire_upgradeable_completion done) {
  start_gated_acquire(target, lock_mode::shared, timeout, std::move(stop), fail_with_error,
                      [done = std::move(done)](std::exception_ptr error,
                                               std::optional<lock_handle> handle) mutable {
                        std::optional<upgradeable_lock_handle> upgradeable;
                        if (handle) upgradeable = upgradeable_access::make(std::move(*handle));
                        done(std::move(error), std::move(upgradeable));
                      });
}

std::optional<upgradeable_lock_handle> acquire_upgradeable_blocking(
    const lock_target& target, std::chrono::nanoseconds timeout, std::stop_token stop,
    bool fail_with_error) {
  auto handle = gated_acquire_blocking(target, lock_mode::shared, timeout, std::move(stop),
                                       fail_with_error);
  if (!handle) return std::nullopt;
  return upgradeable_access::make(std::move(*handle));
}

}  // namespace dlock::detail
