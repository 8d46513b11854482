// Private to core: a provider's counters and error hook, and the sink through which its
// backend reports into them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/metrics_sink.hpp>
#include <dlock/core/provider.hpp>

namespace dlock::detail {

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

  /// The metrics sink, or null. One relaxed load when none is set, so that a provider without
  /// a sink pays nothing on its acquires.
  std::shared_ptr<metrics_sink> sink() const noexcept {
    if (!has_sink_.load(std::memory_order_acquire)) return nullptr;
    std::lock_guard guard(sink_mutex_);
    return sink_;
  }
  void set_sink(std::shared_ptr<metrics_sink> sink) noexcept;

  /// Counts an ended acquire and tells the sink, if any. `started` is only read with a sink
  /// (time_point{} is fine without one).
  void acquire_ended(const lock_labels& lock, acquire_outcome outcome,
                     std::chrono::steady_clock::time_point started) noexcept;

  /// The backend's scheme, for the sink's labels (set once, before the first event).
  std::string_view backend_label;

 private:
  std::atomic<bool> has_sink_{false};
  mutable std::mutex sink_mutex_;
  std::shared_ptr<metrics_sink> sink_;
};

/// The backend's reports, into the provider's counters and error hook. It shares the
/// counters, not the provider: the backend may outlive the provider's service for a moment.
std::shared_ptr<backend_events> events_into(std::shared_ptr<provider_stats> stats);

}  // namespace dlock::detail
