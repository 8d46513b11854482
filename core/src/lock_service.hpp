// Private to core: the per-provider state that every lock, operation and handle shares.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend.hpp>
#include <dlock/core/lease.hpp>
#include <dlock/core/lock_handle.hpp>
#include <dlock/core/provider.hpp>

namespace dlock::detail {

class acquire_op;

/// A provider's counters and error hook, shared with its backend's event sink.
struct provider_stats {
  error_handler on_error;
  std::atomic<std::uint64_t> acquired{0}, waits{0}, not_acquired{0}, cancelled{0}, failed{0},
      lost{0}, release_errors{0}, extension_failures{0}, background_errors{0};

  static void add(std::atomic<std::uint64_t>& counter) noexcept {
    counter.fetch_add(1, std::memory_order_relaxed);
  }
  /// Counts `error` and hands it to the hook (or stderr); never throws.
  void report(std::exception_ptr error) noexcept;
  provider_metrics snapshot() const noexcept;
};

/// Owns the backend, the error hook and the in-process first level: for each (primitive,
/// name) a gate that one acquire at a time holds while it talks to the backend, with a FIFO
/// of the acquires waiting for it.
class lock_service {
 public:
  lock_service(std::shared_ptr<dlock::backend> backend, error_handler on_error);

  dlock::backend& backend() noexcept { return *backend_; }
  const dlock::backend& backend() const noexcept { return *backend_; }

  /// Reports an error that has no caller; never throws.
  void report(std::exception_ptr error) noexcept;
  provider_stats& stats() noexcept { return *stats_; }

  std::chrono::nanoseconds default_max_hold() const noexcept {
    return std::chrono::nanoseconds(default_max_hold_.load(std::memory_order_relaxed));
  }
  void set_default_max_hold(std::chrono::nanoseconds limit) noexcept {
    default_max_hold_.store(limit.count(), std::memory_order_relaxed);
  }

  /// "file /var/lock/app": the backend and endpoint for messages.
  std::string describe() const;

  /// Enters the gate of `key` if nobody holds it (true); never queues.
  bool try_enter_gate(const std::string& key);
  /// Enters the gate of `key` now (true) or queues `op` behind its holder (false).
  bool enter_gate(const std::string& key, const std::shared_ptr<acquire_op>& op);
  /// Leaves the gate of `key`; returns the next queued op, which now holds it, or nullptr.
  std::shared_ptr<acquire_op> leave_gate(const std::string& key);
  /// Removes a queued `op` from the gate of `key`; false when it was not queued (it is being
  /// handed the gate).
  bool withdraw_from_gate(const std::string& key, const acquire_op* op);

 private:
  std::shared_ptr<dlock::backend> backend_;
  std::shared_ptr<provider_stats> stats_;
  std::atomic<std::int64_t> default_max_hold_{0};
  std::mutex gates_mutex_;
  // A key is present while its gate is held; the deque holds the ops waiting for it.
  std::unordered_map<std::string, std::deque<std::shared_ptr<acquire_op>>> gates_;
};

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

/// What a non-empty lock_handle owns.
struct held_lock {
  using lost_callback = std::stop_callback<std::function<void()>>;

  std::shared_ptr<lock_service> service;
  std::shared_ptr<lease> granted;     // shared with a hold limit's timer while it releases
  std::shared_ptr<hold_limit> limit;  // null without a maximum hold time
  std::shared_ptr<callbacks_gate> callbacks_open = std::make_shared<callbacks_gate>();
  std::string name;
  std::mutex callbacks_mutex;
  std::vector<std::unique_ptr<lost_callback>> on_lost_callbacks;
};

struct handle_access {
  static lock_handle make(std::unique_ptr<held_lock> state) noexcept {
    return lock_handle(std::move(state));
  }
};

}  // namespace dlock::detail
