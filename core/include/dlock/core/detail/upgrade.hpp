// dlock/core/detail/upgrade.hpp: the plumbing behind upgradeable_lock_handle and
// distributed_reader_writer_lock's upgradeable reads (implemented in core/src/upgrade.cpp).
// Not an API: upgradeable_lock_handle.hpp is.
#pragma once

#include <chrono>
#include <exception>
#include <optional>
#include <stop_token>
#include <utility>

#include <boost/asio/any_io_executor.hpp>

#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/detail/unique_function.hpp>
#include <dlock/core/lock_handle.hpp>

namespace dlock {

class upgradeable_lock_handle;

namespace detail {

struct upgradeable_access;

using upgrade_completion = unique_function<void(std::exception_ptr, bool)>;
using acquire_upgradeable_completion =
    unique_function<void(std::exception_ptr, std::optional<upgradeable_lock_handle>)>;

/// Starts an upgrade of `handle`; `done` runs once, never inside this call, with whether it
/// upgraded (with `fail_with_error`, not upgrading completes with timeout_error or
/// cancelled_error instead). Throws std::logic_error for an empty handle, one upgraded
/// already or being upgraded, std::invalid_argument for a negative timeout.
void start_upgrade(const lock_handle& handle, std::chrono::nanoseconds timeout,
                   std::stop_token stop, bool fail_with_error, upgrade_completion done);
/// The blocking upgrade. Throws as upgradeable_lock_handle::try_upgrade.
bool upgrade_blocking(const lock_handle& handle, std::chrono::nanoseconds timeout,
                      std::stop_token stop, bool fail_with_error);
/// Whether `handle` (an upgradeable read's) holds the write lock.
bool upgraded(const lock_handle& handle) noexcept;
/// Throws what an upgrade of `handle` would throw at its call: std::logic_error (empty,
/// upgraded, being upgraded) and std::invalid_argument (negative timeout).
void check_upgrade(const lock_handle& handle, std::chrono::nanoseconds timeout);
/// The executor of the handle's provider. Throws std::logic_error for an empty handle.
boost::asio::any_io_executor executor_of_upgrade(const lock_handle& handle);

/// Starts an upgradeable read of the reader-writer lock `target`; as start_acquire.
void start_acquire_upgradeable(const lock_target& target, std::chrono::nanoseconds timeout,
                               std::stop_token stop, bool fail_with_error,
                               acquire_upgradeable_completion done);
/// The blocking twin of start_acquire_upgradeable.
std::optional<upgradeable_lock_handle> acquire_upgradeable_blocking(
    const lock_target& target, std::chrono::nanoseconds timeout, std::stop_token stop,
    bool fail_with_error);

template <bool Throwing>
struct initiate_upgrade {
  const lock_handle* handle;

  template <typename Handler>
  void operator()(Handler&& handler, std::chrono::nanoseconds timeout,
                  std::stop_token stop) const {
    start_upgrade(*handle, timeout, std::move(stop), Throwing,
                  posted_completion(std::forward<Handler>(handler),
                                    executor_of_upgrade(*handle),
                                    [](auto&& handler, std::exception_ptr error, bool upgraded) {
                                      if constexpr (Throwing) {
                                        std::move(handler)(std::move(error));
                                      } else {
                                        std::move(handler)(std::move(error), upgraded);
                                      }
                                    }));
  }
};

template <bool Throwing>
struct initiate_acquire_upgradeable {
  lock_target target;

  template <typename Handler>
  void operator()(Handler&& handler, std::chrono::nanoseconds timeout,
                  std::stop_token stop) const {
    start_acquire_upgradeable(target, timeout, std::move(stop), Throwing,
                              completion_posting_to<Throwing, upgradeable_lock_handle>(
                                  std::forward<Handler>(handler), executor_of(target)));
  }
};

}  // namespace detail

}  // namespace dlock
