// dlock/core/metrics_sink.hpp: what a provider tells a metrics system, event by event.
//
// provider::metrics() gives totals; a sink gets every event with its labels and durations,
// so a service can feed the metrics system it already has. dlock::prometheus_metrics
// (prometheus_metrics.hpp) is a ready sink that renders Prometheus' text format;
// docs/observability.md shows both.
#pragma once

#include <chrono>
#include <string_view>

#include <dlock/core/lock_kind.hpp>

namespace dlock {

/// How an acquire ended.
enum class acquire_outcome {
  granted,
  not_acquired,  ///< a single attempt (zero timeout) found the lock taken
  timed_out,     ///< a wait ran out (an empty try_acquire, or timeout_error)
  cancelled,     ///< a stop request ended it
  failed,        ///< an error (connection_error, std::invalid_argument, ...)
};

/// The lock an event is about. The views are valid only during the call.
///
/// An election's leadership (dlock/core/election.hpp) is an exclusive lock under the
/// election's name, kept apart from the lock of that name: its events come with `election`
/// set, `kind` lock and `mode` exclusive. prometheus_metrics labels them primitive="election".
struct lock_labels {
  std::string_view backend;  ///< "file", "redis", ...
  primitive kind = primitive::lock;
  lock_mode mode = lock_mode::exclusive;
  std::string_view name;
  bool election = false;  ///< the lock of the election `name`, not the lock `name`
};

/// Receives a provider's events (provider::set_metrics_sink). Called on whichever thread the
/// event happens (the caller's or the backend's), concurrently: implementations must be
/// thread-safe, quick (they run inside acquires and releases) and must not throw or call back
/// into dlock.
class metrics_sink {
 public:
  virtual ~metrics_sink() = default;
  /// An acquire ended; `waited` runs from the call to its end.
  virtual void acquire_ended(const lock_labels& lock, acquire_outcome outcome,
                             std::chrono::nanoseconds waited) noexcept = 0;
  /// A handle was released after holding its lock for `held`. `lost`: the lock had been lost
  /// before; `failed`: the backend could not confirm the release.
  virtual void released(const lock_labels& lock, std::chrono::nanoseconds held, bool lost,
                        bool failed) noexcept = 0;
  /// A held lock was lost (when the backend noticed, not when the handle is released).
  virtual void lost(const lock_labels& lock) noexcept = 0;
  /// A lease extension failed (leased backends); the lease may still be valid.
  virtual void extension_failed(std::string_view backend) noexcept = 0;
  /// The backend re-established a connection or session after losing it.
  virtual void reconnected(std::string_view backend) noexcept = 0;
};

}  // namespace dlock
