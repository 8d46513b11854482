// dlock/core/prometheus_metrics.hpp: a metrics sink that keeps counters and histograms and
// renders them in Prometheus' text exposition format, with no dependency.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <dlock/core/metrics_sink.hpp>

namespace dlock {

/// Counts what one or more providers report and renders it for a Prometheus scrape:
///
///   dlock_acquires_total{backend,primitive,mode,outcome}           counter
///   dlock_acquire_wait_seconds{backend,primitive,mode,outcome}     histogram
///   dlock_releases_total{backend,primitive,mode,result}            counter (ok, lost, failed)
///   dlock_hold_seconds{backend,primitive,mode}                     histogram
///   dlock_held{backend,primitive,mode}                             gauge: granted, not released
///   dlock_lost_total{backend,primitive,mode}                       counter, when found
///   dlock_lease_extension_failures_total{backend}                  counter
///   dlock_reconnects_total{backend}                                counter
///
/// `primitive` is lock, reader_writer_lock, semaphore, or election for an election's
/// leadership (lock_labels::election).
///
/// Lock names are not labels unless `label_names` is set: each name would be a time series
/// of its own, and a service that locks per order id would swamp its Prometheus.
///
///     auto metrics = std::make_shared<dlock::prometheus_metrics>();
///     provider->set_metrics_sink(metrics);
///     ...  serve metrics->render() at /metrics (docs/observability.md)
///
/// Thread safety: every member may be called concurrently. Each event takes a mutex.
class prometheus_metrics final : public metrics_sink {
 public:
  struct options {
    /// Adds a `name` label to every per-lock series. Only for a small, fixed set of names.
    bool label_names = false;
    /// Upper bounds of the histograms' buckets, in seconds, ascending (+Inf is implied).
    std::vector<double> buckets = {0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                   1,      5,     10,    30,   60,   300};
  };

  prometheus_metrics();
  /// Throws std::invalid_argument when the buckets are empty, negative or not ascending.
  explicit prometheus_metrics(options opts);

  /// The text exposition format (version 0.0.4), one family after another, series sorted.
  std::string render() const;

  void acquire_ended(const lock_labels& lock, acquire_outcome outcome,
                     std::chrono::nanoseconds waited) noexcept override;
  void released(const lock_labels& lock, std::chrono::nanoseconds held, bool lost,
                bool failed) noexcept override;
  void lost(const lock_labels& lock) noexcept override;
  void extension_failed(std::string_view backend) noexcept override;
  void reconnected(std::string_view backend) noexcept override;

 private:
  struct histogram {
    std::vector<std::uint64_t> counts;  // one per bucket, not cumulative
    std::uint64_t count = 0;
    double sum = 0;
  };
  /// A series' labels, already rendered: `backend="redis",primitive="lock",...`.
  using series = std::string;

  series lock_series(const lock_labels& lock) const;
  void observe(histogram& into, std::chrono::nanoseconds duration);

  options options_;
  mutable std::mutex mutex_;
  std::map<series, std::uint64_t> acquires_, releases_, lost_, extension_failures_,
      reconnects_;
  std::map<series, std::int64_t> held_;
  std::map<series, histogram> waits_, holds_;
};

}  // namespace dlock
