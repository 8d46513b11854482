#include "provider_stats.hpp"

namespace dlock::detail {

void provider_stats::report(std::exception_ptr error) noexcept {
  background_errors.fetch_add(1, std::memory_order_relaxed);
  report_background_error(on_error, std::move(error));
}

provider_metrics provider_stats::snapshot() const noexcept {
  auto read = [](const std::atomic<std::uint64_t>& counter) {
    return counter.load(std::memory_order_relaxed);
  };
  return {.acquired = read(acquired),
          .waits = read(waits),
          .not_acquired = read(not_acquired),
          .cancelled = read(cancelled),
          .failed = read(failed),
          .lost = read(lost),
          .release_errors = read(release_errors),
          .extension_failures = read(extension_failures),
          .background_errors = read(background_errors)};
}

void provider_stats::set_sink(std::shared_ptr<metrics_sink> sink) noexcept {
  std::lock_guard guard(sink_mutex_);
  has_sink_.store(sink != nullptr, std::memory_order_release);
  sink_ = std::move(sink);
}

void provider_stats::acquire_ended(const lock_labels& lock, acquire_outcome outcome,
                                   std::chrono::steady_clock::time_point started) noexcept {
  switch (outcome) {
    case acquire_outcome::granted: add(acquired); break;
    case acquire_outcome::not_acquired:
    case acquire_outcome::timed_out: add(not_acquired); break;
    case acquire_outcome::cancelled: add(cancelled); break;
    case acquire_outcome::failed: add(failed); break;
  }
  if (auto listener = sink()) {
    listener->acquire_ended(lock, outcome, std::chrono::steady_clock::now() - started);
  }
}

namespace {

class stats_events final : public backend_events {
 public:
  explicit stats_events(std::shared_ptr<provider_stats> stats) : stats_(std::move(stats)) {}
  void acquire_waiting() noexcept override { provider_stats::add(stats_->waits); }
  void extension_failed() noexcept override {
    provider_stats::add(stats_->extension_failures);
    if (auto sink = stats_->sink()) sink->extension_failed(stats_->backend_label);
  }
  void reconnected() noexcept override {
    if (auto sink = stats_->sink()) sink->reconnected(stats_->backend_label);
  }
  void background_error(std::exception_ptr error) noexcept override {
    stats_->report(std::move(error));
  }

 private:
  std::shared_ptr<provider_stats> stats_;
};

}  // namespace

std::shared_ptr<backend_events> events_into(std::shared_ptr<provider_stats> stats) {
  return std::make_shared<stats_events>(std::move(stats));
}

}  // namespace dlock::detail
