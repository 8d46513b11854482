// Private to core: what a non-empty lock_handle owns, and the maximum-hold timer of a grant.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <chrono>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/lease.hpp>
#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/lock_handle.hpp>
#include <dlock/core/metrics_sink.hpp>

#include "lock_service.hpp"

namespace dlock::detail {

/// The timer of a grant with a maximum hold time, and who releases the lease: the handle or
/// the timer, whichever claims it first (under the mutex; the release itself runs outside it,
/// since a networked lease may wait on the provider's thread).
struct hold_limit {
  explicit hold_limit(const boost::asio::any_io_executor& executor) : timer(executor) {}
  std::mutex mutex;
  bool claimed = false;
  std::weak_ptr<lease> granted;
  boost::asio::steady_timer timer;
};

/// Whether on_lost callbacks may still run: cleared by release, checked by each posted
/// callback under the mutex (recursive: a callback may release its own handle).
struct callbacks_gate {
  std::recursive_mutex mutex;
  bool open = true;
};

/// The labels of an event about `kind` for a metrics sink, which knows only the primitives
/// and the election. An upgrade gate is taken only as an uncounted step (gated_acquire.hpp),
/// whose handle tells no sink; it would be labelled as its reader-writer lock's write.
inline lock_labels labels_for(std::string_view backend, resource_kind kind, lock_mode mode,
                              std::string_view name) {
  switch (kind) {
    case resource_kind::lock: return {backend, primitive::lock, mode, name};
    case resource_kind::reader_writer_lock:
      return {backend, primitive::reader_writer_lock, mode, name};
    case resource_kind::semaphore: return {backend, primitive::semaphore, mode, name};
    case resource_kind::upgrade_gate:
      return {backend, primitive::reader_writer_lock, lock_mode::exclusive, name};
    case resource_kind::election: return {backend, primitive::lock, mode, name, true};
  }
  return {backend, primitive::lock, mode, name};
}

/// What a non-empty lock_handle owns.
struct held_lock {
  using lost_callback = std::stop_callback<std::function<void()>>;

  /// The labels of this grant's events for a metrics sink.
  lock_labels labels() const {
    return labels_for(service->stats().backend_label, kind, mode, name);
  }

  std::shared_ptr<lock_service> service;
  std::shared_ptr<lease> granted;     // shared with a hold limit's timer while it releases
  std::shared_ptr<hold_limit> limit;  // null without a maximum hold time
  /// Made by the first on_lost (under callbacks_mutex): most handles never have one.
  std::shared_ptr<callbacks_gate> callbacks_open;
  std::string name;
  resource_kind kind = resource_kind::lock;
  lock_mode mode = lock_mode::exclusive;
  /// The metrics sink that saw the grant (null: none was set): it alone hears of its loss and
  /// release, so that its count of held locks stays true when the sink changes.
  std::shared_ptr<metrics_sink> sink;
  std::chrono::steady_clock::time_point granted_at;  ///< with a sink only
  std::unique_ptr<lost_callback> lost_reporter;      ///< tells the sink of a loss when found
  std::mutex callbacks_mutex;
  std::vector<std::unique_ptr<lost_callback>> on_lost_callbacks;
};

/// The handle of a grant of `target` in `mode`, with its maximum-hold timer started when the
/// target has a limit (at the limit the lease is marked lost, then released).
lock_handle handle_for(const lock_target& target, lock_mode mode, std::unique_ptr<lease> granted);

/// The labels of an acquire of `target` in `mode` for a metrics sink.
inline lock_labels labels_of(const lock_target& target, lock_mode mode) {
  return labels_for(target.service->stats().backend_label, target.kind, mode, target.name);
}

/// Core's way into a handle's state.
struct handle_access {
  static lock_handle make(std::unique_ptr<held_lock> state) noexcept {
    return lock_handle(std::move(state));
  }
  /// The lease of a non-empty handle (nullptr for an empty one).
  static std::shared_ptr<lease> lease_of(const lock_handle& handle) noexcept {
    return handle.state_ ? handle.state_->granted : nullptr;
  }
  /// Empties `handle` without releasing its lease, and returns the lease. Requires: a
  /// non-empty handle without a maximum hold time (a step of a gated acquire).
  static std::shared_ptr<lease> take_lease(lock_handle& handle) noexcept {
    auto state = std::move(handle.state_);
    return std::move(state->granted);
  }
};

}  // namespace dlock::detail
