// Private to core: the per-provider state that every lock, operation and handle shares.
// docs/architecture.md walks through how the pieces beside this file fit together.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/provider.hpp>

#include "local_gates.hpp"
#include "provider_stats.hpp"

namespace dlock::detail {

/// Owns the backend, the provider's counters and error hook, its default maximum hold time
/// and the local gates.
class lock_service {
 public:
  /// Takes `backend` over: attaches the counters and error hook, then starts it.
  lock_service(std::shared_ptr<dlock::backend> backend, error_handler on_error);

  dlock::backend& backend() noexcept { return *backend_; }
  const dlock::backend& backend() const noexcept { return *backend_; }

  /// Reports an error that has no caller; never throws.
  void report(std::exception_ptr error) noexcept { stats_->report(std::move(error)); }
  provider_stats& stats() noexcept { return *stats_; }
  local_gates& gates() noexcept { return gates_; }

  std::chrono::nanoseconds default_max_hold() const noexcept {
    return std::chrono::nanoseconds(default_max_hold_.load(std::memory_order_relaxed));
  }
  void set_default_max_hold(std::chrono::nanoseconds limit) noexcept {
    default_max_hold_.store(limit.count(), std::memory_order_relaxed);
  }

  std::chrono::nanoseconds default_min_hold() const noexcept {
    return std::chrono::nanoseconds(default_min_hold_.load(std::memory_order_relaxed));
  }
  void set_default_min_hold(std::chrono::nanoseconds min_hold) noexcept {
    default_min_hold_.store(min_hold.count(), std::memory_order_relaxed);
  }

  /// The owner stamped on grants whose lock names none (provider::set_owner).
  std::string owner() const {
    std::lock_guard lock(owner_mutex_);
    return owner_;
  }
  void set_owner(std::string owner) {
    std::lock_guard lock(owner_mutex_);
    owner_ = std::move(owner);
  }

  /// "file /var/lock/app": the backend and endpoint for messages.
  std::string describe() const;

 private:
  std::shared_ptr<dlock::backend> backend_;
  std::shared_ptr<provider_stats> stats_;
  std::atomic<std::int64_t> default_max_hold_{0};
  std::atomic<std::int64_t> default_min_hold_{0};
  local_gates gates_;
  mutable std::mutex owner_mutex_;
  std::string owner_;
};

}  // namespace dlock::detail
