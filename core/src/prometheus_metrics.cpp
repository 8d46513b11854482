// Prometheus' text exposition format, written by hand: it is a few lines of escaping and
// formatting, and the C++ Prometheus client (prometheus-cpp) is not packaged in Debian 12.
#include <dlock/core/prometheus_metrics.hpp>

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace dlock {

namespace {

std::string_view primitive_label(const lock_labels& lock) {
  if (lock.election) return "election";
  switch (lock.kind) {
    case primitive::lock: return "lock";
    case primitive::reader_writer_lock: return "reader_writer_lock";
    case primitive::semaphore: return "semaphore";
  }
  return "unknown";
}

std::string_view mode_label(lock_mode mode) {
  return mode == lock_mode::shared ? "shared" : "exclusive";
}

std::string_view outcome_label(acquire_outcome outcome) {
  switch (outcome) {
    case acquire_outcome::granted: return "granted";
    case acquire_outcome::not_acquired: return "not_acquired";
    case acquire_outcome::timed_out: return "timed_out";
    case acquire_outcome::cancelled: return "cancelled";
    case acquire_outcome::failed: return "failed";
  }
  return "unknown";
}

/// A label value as the format wants it: backslash, double quote and newline escaped.
std::string escaped(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string label(std::string_view key, std::string_view value) {
  return std::string(key) + "=\"" + escaped(value) + "\"";
}

std::string with(const std::string& series, std::string_view key, std::string_view value) {
  return series + "," + label(key, value);
}

std::string number(double value) {
  if (std::isinf(value)) return "+Inf";
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

double seconds(std::chrono::nanoseconds duration) {
  return std::chrono::duration<double>(duration).count();
}

/// Runs `record` and drops what it throws (only std::bad_alloc can): a sink must not throw
/// into an acquire, and one lost sample is better than a terminated service.
template <typename Record>
void recording(std::mutex& mutex, Record record) noexcept {
  try {
    std::lock_guard guard(mutex);
    record();
  } catch (...) {
  }
}

template <typename Value>
void render_family(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help, const std::map<std::string, Value>& values) {
  out += "# HELP " + std::string(name) + " " + std::string(help) + "\n";
  out += "# TYPE " + std::string(name) + " " + std::string(type) + "\n";
  for (const auto& [series, value] : values) {
    out += std::string(name) + "{" + series + "} " + std::to_string(value) + "\n";
  }
}

}  // namespace

prometheus_metrics::prometheus_metrics() : prometheus_metrics(options{}) {}

prometheus_metrics::prometheus_metrics(options opts) : options_(std::move(opts)) {
  if (options_.buckets.empty()) {
    throw std::invalid_argument("dlock: prometheus_metrics: buckets must not be empty");
  }
  for (std::size_t i = 0; i < options_.buckets.size(); ++i) {
    const double bound = options_.buckets[i];
    if (!(bound >= 0) || std::isinf(bound) || (i > 0 && bound <= options_.buckets[i - 1])) {
      throw std::invalid_argument("dlock: prometheus_metrics: bucket bound " + number(bound) +
                                  " must be finite, not negative and above the one before");
    }
  }
}

prometheus_metrics::series prometheus_metrics::lock_series(const lock_labels& lock) const {
  series out = label("backend", lock.backend) + "," + label("primitive", primitive_label(lock)) +
               "," + label("mode", mode_label(lock.mode));
  if (options_.label_names) out = with(out, "name", lock.name);
  return out;
}

void prometheus_metrics::observe(histogram& into, std::chrono::nanoseconds duration) {
  if (into.counts.empty()) into.counts.assign(options_.buckets.size(), 0);
  const double value = seconds(duration);
  for (std::size_t i = 0; i < options_.buckets.size(); ++i) {
    if (value <= options_.buckets[i]) {
      ++into.counts[i];
      break;
    }
  }
  ++into.count;
  into.sum += value;
}

void prometheus_metrics::acquire_ended(const lock_labels& lock, acquire_outcome outcome,
                                       std::chrono::nanoseconds waited) noexcept {
  recording(mutex_, [&] {
    const series labels = with(lock_series(lock), "outcome", outcome_label(outcome));
    ++acquires_[labels];
    observe(waits_[labels], waited);
    if (outcome == acquire_outcome::granted) ++held_[lock_series(lock)];
  });
}

void prometheus_metrics::released(const lock_labels& lock, std::chrono::nanoseconds held,
                                  bool lost, bool failed) noexcept {
  recording(mutex_, [&] {
    const series labels = lock_series(lock);
    ++releases_[with(labels, "result", failed ? "failed" : lost ? "lost" : "ok")];
    observe(holds_[labels], held);
    --held_[labels];
  });
}

void prometheus_metrics::lost(const lock_labels& lock) noexcept {
  recording(mutex_, [&] { ++lost_[lock_series(lock)]; });
}

void prometheus_metrics::extension_failed(std::string_view backend) noexcept {
  recording(mutex_, [&] { ++extension_failures_[label("backend", backend)]; });
}

void prometheus_metrics::reconnected(std::string_view backend) noexcept {
  recording(mutex_, [&] { ++reconnects_[label("backend", backend)]; });
}

std::string prometheus_metrics::render() const {
  std::string out;
  auto render_histograms = [&](std::string_view name, std::string_view help,
                               const std::map<series, histogram>& values) {
    out += "# HELP " + std::string(name) + " " + std::string(help) + "\n";
    out += "# TYPE " + std::string(name) + " histogram\n";
    for (const auto& [labels, h] : values) {
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i <= options_.buckets.size(); ++i) {
        cumulative += i < h.counts.size() ? h.counts[i] : 0;
        const double bound = i < options_.buckets.size() ? options_.buckets[i] : INFINITY;
        const std::uint64_t in_bucket = i < options_.buckets.size() ? cumulative : h.count;
        out += std::string(name) + "_bucket{" + with(labels, "le", number(bound)) + "} " +
               std::to_string(in_bucket) + "\n";
      }
      out += std::string(name) + "_sum{" + labels + "} " + number(h.sum) + "\n";
      out += std::string(name) + "_count{" + labels + "} " + std::to_string(h.count) + "\n";
    }
  };
  std::lock_guard guard(mutex_);
  render_family(out, "dlock_acquires_total", "counter", "Acquires by how they ended.", acquires_);
  render_histograms("dlock_acquire_wait_seconds",
                    "Time from an acquire's call to its end, by how it ended.", waits_);
  render_family(out, "dlock_releases_total", "counter",
                "Releases: ok, lost (the lock had been lost before) or failed (not confirmed).",
                releases_);
  render_histograms("dlock_hold_seconds", "Time from a grant to its release.", holds_);
  render_family(out, "dlock_held", "gauge", "Locks granted and not released yet.", held_);
  render_family(out, "dlock_lost_total", "counter", "Held locks found lost.", lost_);
  render_family(out, "dlock_lease_extension_failures_total", "counter",
                "Lease extensions that failed (the lease may still be valid).",
                extension_failures_);
  render_family(out, "dlock_reconnects_total", "counter",
                "Connections or sessions established again after being lost.", reconnects_);
  return out;
}

}  // namespace dlock
