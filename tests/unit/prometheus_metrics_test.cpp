// dlock::prometheus_metrics: the text exposition format of what a sink was told.
#include <catch2/catch.hpp>

#include <dlock/core/prometheus_metrics.hpp>
#include <dlock/memory.hpp>

using namespace std::chrono_literals;

namespace {

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

const dlock::lock_labels job{"redis", dlock::primitive::lock, dlock::lock_mode::exclusive,
                             "nightly \"job\""};

}  // namespace

TEST_CASE("prometheus_metrics renders counters, a gauge and cumulative histograms",
          "[core][metrics]") {
  dlock::prometheus_metrics metrics({.buckets = {0.01, 0.1, 1}});
  metrics.acquire_ended(job, dlock::acquire_outcome::granted, 5ms);
  metrics.acquire_ended(job, dlock::acquire_outcome::granted, 50ms);
  metrics.acquire_ended(job, dlock::acquire_outcome::timed_out, 2s);
  metrics.released(job, 500ms, false, false);
  metrics.lost(job);
  metrics.extension_failed("redis");
  metrics.reconnected("redis");
  const std::string text = metrics.render();
  INFO(text);
  const std::string lock = R"(backend="redis",primitive="lock",mode="exclusive")";
  CHECK(has_line(text, "# TYPE dlock_acquires_total counter"));
  CHECK(has_line(text, "dlock_acquires_total{" + lock + R"(,outcome="granted"} 2)"));
  CHECK(has_line(text, "dlock_acquires_total{" + lock + R"(,outcome="timed_out"} 1)"));
  CHECK(has_line(text, "# TYPE dlock_acquire_wait_seconds histogram"));
  CHECK(has_line(text, "dlock_acquire_wait_seconds_bucket{" + lock +
                           R"(,outcome="granted",le="0.01"} 1)"));
  CHECK(has_line(text, "dlock_acquire_wait_seconds_bucket{" + lock +
                           R"(,outcome="granted",le="0.10000000000000001"} 2)"));
  CHECK(has_line(text, "dlock_acquire_wait_seconds_bucket{" + lock +
                           R"(,outcome="timed_out",le="1"} 0)"));
  CHECK(has_line(text, "dlock_acquire_wait_seconds_bucket{" + lock +
                           R"(,outcome="timed_out",le="+Inf"} 1)"));
  CHECK(has_line(text, "dlock_acquire_wait_seconds_count{" + lock + R"(,outcome="granted"} 2)"));
  CHECK(has_line(text, "dlock_releases_total{" + lock + R"(,result="ok"} 1)"));
  CHECK(has_line(text, "dlock_hold_seconds_sum{" + lock + "} 0.5"));
  CHECK(has_line(text, "dlock_held{" + lock + "} 1"));
  CHECK(has_line(text, "dlock_lost_total{" + lock + "} 1"));
  CHECK(has_line(text, R"(dlock_lease_extension_failures_total{backend="redis"} 1)"));
  CHECK(has_line(text, R"(dlock_reconnects_total{backend="redis"} 1)"));
  CHECK(text.find("nightly") == std::string::npos);  // names are not labels by default
}

TEST_CASE("prometheus_metrics labels names only when asked, escaped", "[core][metrics]") {
  dlock::prometheus_metrics metrics({.label_names = true});
  metrics.lost(job);
  CHECK(has_line(metrics.render(),
                 R"(dlock_lost_total{backend="redis",primitive="lock",mode="exclusive",)"
                 R"(name="nightly \"job\""} 1)"));
}

TEST_CASE("prometheus_metrics refuses buckets that are empty, negative or out of order",
          "[core][metrics]") {
  CHECK_THROWS_AS(dlock::prometheus_metrics({.buckets = {}}), std::invalid_argument);
  CHECK_THROWS_AS(dlock::prometheus_metrics({.buckets = {-1}}), std::invalid_argument);
  CHECK_THROWS_WITH(dlock::prometheus_metrics({.buckets = {1, 0.5}}),
                    Catch::Contains("0.5") && Catch::Contains("above the one before"));
}

TEST_CASE("prometheus_metrics counts a provider's grants and releases", "[core][metrics]") {
  auto provider = std::make_shared<dlock::memory::provider>();
  auto metrics = std::make_shared<dlock::prometheus_metrics>();
  provider->set_metrics_sink(metrics);
  auto held = provider->create_reader_writer_lock("catalog").acquire_read();
  std::string text = metrics->render();
  const std::string read = R"(backend="memory",primitive="reader_writer_lock",mode="shared")";
  CHECK(has_line(text, "dlock_held{" + read + "} 1"));
  held.release();
  text = metrics->render();
  CHECK(has_line(text, "dlock_held{" + read + "} 0"));
  CHECK(has_line(text, "dlock_releases_total{" + read + R"(,result="ok"} 1)"));
}

TEST_CASE("prometheus_metrics labels each primitive by name and an election's lock election",
          "[core][metrics]") {
  dlock::prometheus_metrics metrics;
  const auto granted = dlock::acquire_outcome::granted;
  metrics.acquire_ended({"file", dlock::primitive::lock, dlock::lock_mode::exclusive, "a"},
                        granted, 1ms);
  metrics.acquire_ended(
      {"file", dlock::primitive::reader_writer_lock, dlock::lock_mode::shared, "a"}, granted,
      1ms);
  metrics.acquire_ended({"file", dlock::primitive::semaphore, dlock::lock_mode::exclusive, "a"},
                        granted, 1ms);
  metrics.acquire_ended(
      {"file", dlock::primitive::lock, dlock::lock_mode::exclusive, "a", /*election=*/true},
      granted, 1ms);
  const std::string text = metrics.render();
  INFO(text);
  for (const std::string series : {R"(primitive="lock",mode="exclusive")",
                                   R"(primitive="reader_writer_lock",mode="shared")",
                                   R"(primitive="semaphore",mode="exclusive")",
                                   R"(primitive="election",mode="exclusive")"}) {
    CHECK(has_line(text, R"(dlock_held{backend="file",)" + series + "} 1"));
  }
}

TEST_CASE("prometheus_metrics counts a campaign as an election and a gated write once",
          "[core][metrics]") {
  auto provider = std::make_shared<dlock::memory::provider>(
      dlock::memory::options{.domain = "prometheus-kinds"});
  auto reader = std::make_shared<dlock::memory::provider>(
      dlock::memory::options{.domain = "prometheus-kinds"});
  auto metrics = std::make_shared<dlock::prometheus_metrics>();
  provider->set_metrics_sink(metrics);
  dlock::leadership lead = provider->create_election("scheduler").campaign("node-a", 1s);
  auto read = reader->create_reader_writer_lock("catalog").acquire_read();
  CHECK_FALSE(provider->create_reader_writer_lock("catalog").try_acquire_write(10ms));
  std::string text = metrics->render();
  INFO(text);
  const std::string election = R"(backend="memory",primitive="election",mode="exclusive")";
  const std::string write = R"(backend="memory",primitive="reader_writer_lock",mode="exclusive")";
  CHECK(has_line(text, "dlock_held{" + election + "} 1"));
  CHECK(has_line(text, "dlock_acquires_total{" + write + R"(,outcome="timed_out"} 1)"));
  // The gate the write took and let go is a step of that acquire: no series of its own.
  CHECK(text.find("dlock_releases_total{") == std::string::npos);
  CHECK(text.find("unknown") == std::string::npos);
  lead.resign();
  CHECK(has_line(metrics->render(), "dlock_held{" + election + "} 0"));
}
