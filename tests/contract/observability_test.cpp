// What a service can observe: free semaphore slots and the provider's counters.
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

TEST_CASE("current_count reports a semaphore's free slots", "[contract][semaphore][metrics]") {
  auto provider = backend().make_provider();
  auto other = backend().make_provider();
  const auto name = unique_name("count");
  auto encoders = provider->create_semaphore(name, 3);
  // Every backend can tell: a backend returning nothing fails here rather than passing unseen.
  const auto count = encoders.current_count();
  REQUIRE(count.has_value());
  CHECK(*count == 3);
  auto first = encoders.acquire(10s);
  auto second = other->create_semaphore(name, 3).acquire(10s);
  CHECK(encoders.current_count() == 1u);
  first.release();
  CHECK(encoders.current_count() == 2u);
  CHECK_THROWS_AS((void)provider->create_semaphore(name, 4).current_count(),
                  std::invalid_argument);
}

TEST_CASE("a provider whose backend answers is healthy, holding or not",
          "[contract][deployment][health]") {
  auto provider = backend().make_provider();
  CHECK(provider->health().ok());
  auto held = provider->create_lock(unique_name("healthy")).acquire(10s);
  const auto health = provider->health();
  CHECK(health.ok());
  CHECK(health.connected);
  CHECK(health.overdue_leases == 0);
  CHECK(health.problems.empty());
}

TEST_CASE("provider metrics count grants, waits, misses, cancellations and losses",
          "[contract][metrics]") {
  auto provider = backend().make_provider();
  auto holder = backend().make_provider();
  const auto name = unique_name("metrics");
  auto lock = provider->create_lock(name);
  CHECK(provider->metrics().acquired == 0);

  lock.acquire(10s).release();
  CHECK(provider->metrics().acquired == 1);

  auto held = holder->create_lock(name).acquire(10s);
  CHECK_FALSE(lock.try_acquire());
  CHECK_FALSE(lock.try_acquire(300ms));  // long enough to wait at any server under load
  auto metrics = provider->metrics();
  CHECK(metrics.not_acquired == 2);
  CHECK(metrics.waits >= 1);

  std::stop_source stop;
  stop.request_stop();
  CHECK_FALSE(lock.try_acquire(10s, stop.get_token()));
  CHECK(provider->metrics().cancelled == 1);
  held.release();

  auto doomed = lock.acquire(10s);
  backend().break_lock(name);
  REQUIRE(wait_until([&] { return doomed.lost(); }, 30s));
  doomed.release();
  metrics = provider->metrics();
  CHECK(metrics.lost == 1);
  CHECK(metrics.acquired == 2);
  CHECK(metrics.failed == 0);
  CHECK(metrics.release_errors == 0);
}

namespace {

/// The lock's name, after what it is unless it is a lock: "write N", "election N".
std::string subject(const dlock::lock_labels& lock) {
  std::string kind;
  if (lock.election) {
    kind = "election ";
  } else if (lock.kind == dlock::primitive::reader_writer_lock) {
    kind = lock.mode == dlock::lock_mode::shared ? "read " : "write ";
  } else if (lock.kind == dlock::primitive::semaphore) {
    kind = "semaphore ";
  }
  return kind + std::string(lock.name);
}

/// A metrics sink that writes every event down, one line each.
class recording_sink final : public dlock::metrics_sink {
 public:
  void acquire_ended(const dlock::lock_labels& lock, dlock::acquire_outcome outcome,
                     std::chrono::nanoseconds waited) noexcept override {
    static constexpr const char* names[] = {"granted", "not_acquired", "timed_out", "cancelled",
                                            "failed"};
    add("acquire " + subject(lock) + " " + names[static_cast<int>(outcome)], waited);
    std::lock_guard guard(mutex_);
    backend_ = lock.backend;
  }
  void released(const dlock::lock_labels& lock, std::chrono::nanoseconds held, bool lost,
                bool failed) noexcept override {
    add("release " + subject(lock) + (lost ? " lost" : "") + (failed ? " failed" : ""), held);
  }
  void lost(const dlock::lock_labels& lock) noexcept override {
    add("lost " + subject(lock), {});
  }
  void extension_failed(std::string_view) noexcept override {}
  void reconnected(std::string_view) noexcept override {}

  std::vector<std::string> events() const {
    std::lock_guard guard(mutex_);
    return events_;
  }
  std::chrono::nanoseconds duration(std::size_t i) const {
    std::lock_guard guard(mutex_);
    return durations_.at(i);
  }
  std::string backend_seen() const {
    std::lock_guard guard(mutex_);
    return backend_;
  }

 private:
  void add(std::string event, std::chrono::nanoseconds duration) {
    std::lock_guard guard(mutex_);
    events_.push_back(std::move(event));
    durations_.push_back(duration);
  }
  mutable std::mutex mutex_;
  std::vector<std::string> events_;
  std::vector<std::chrono::nanoseconds> durations_;
  std::string backend_;
};

}  // namespace

TEST_CASE("a metrics sink hears every acquire's outcome and wait, every release's hold time, "
          "and a loss when it is found",
          "[contract][metrics]") {
  auto provider = backend().make_provider();
  auto holder = backend().make_provider();
  auto sink = std::make_shared<recording_sink>();
  provider->set_metrics_sink(sink);
  const auto name = unique_name("sink");
  auto lock = provider->create_lock(name);

  auto first = lock.acquire(10s);
  std::this_thread::sleep_for(20ms);  // a hold time the sink must see, not a wait for anything
  first.release();

  auto held = holder->create_lock(name).acquire(10s);
  CHECK_FALSE(lock.try_acquire());
  CHECK_FALSE(lock.try_acquire(30ms));
  std::stop_source stop;
  stop.request_stop();
  CHECK_FALSE(lock.try_acquire(10s, stop.get_token()));
  held.release();

  auto doomed = lock.acquire(10s);
  backend().break_lock(name);
  REQUIRE(wait_until([&] { return doomed.lost(); }, 30s));
  REQUIRE(wait_until([&] { return sink->events().size() == 7; }, 10s));  // the loss report
  doomed.release();

  const std::vector<std::string> expected{
      "acquire " + name + " granted",      "release " + name,
      "acquire " + name + " not_acquired", "acquire " + name + " timed_out",
      "acquire " + name + " cancelled",    "acquire " + name + " granted",
      "lost " + name,                      "release " + name + " lost"};
  CHECK(sink->events() == expected);
  CHECK(sink->duration(1) >= 20ms);  // the first hold
  CHECK(sink->duration(3) >= 30ms);  // the wait that timed out
  CHECK(sink->backend_seen() == provider->scheme());

  // Another provider's events and a provider without a sink reach it not.
  holder->create_lock(name).acquire(10s).release();
  provider->set_metrics_sink(nullptr);
  lock.acquire(10s).release();
  CHECK(sink->events().size() == expected.size());
}

TEST_CASE("a metrics sink hears a write that took the upgrade gate but not the lock as one "
          "acquire of the reader-writer lock, and nothing of the gate",
          "[contract][metrics][reader_writer]") {
  auto provider = backend().make_provider();
  auto reader = backend().make_provider();
  auto sink = std::make_shared<recording_sink>();
  provider->set_metrics_sink(sink);
  const auto name = unique_name("gated-sink");
  auto read = reader->create_reader_writer_lock(name).acquire_read(10s);
  auto lock = provider->create_reader_writer_lock(name);

  CHECK_FALSE(lock.try_acquire_write());
  CHECK_FALSE(lock.try_acquire_write(30ms));
  read.release();
  lock.acquire_write(10s).release();

  const std::vector<std::string> expected{"acquire write " + name + " not_acquired",
                                          "acquire write " + name + " timed_out",
                                          "acquire write " + name + " granted",
                                          "release write " + name};
  CHECK(sink->events() == expected);
}

TEST_CASE("a metrics sink hears a leader's campaign and resignation as an election's, apart "
          "from the lock of the same name",
          "[contract][metrics][election]") {
  auto provider = backend().make_provider();
  auto sink = std::make_shared<recording_sink>();
  provider->set_metrics_sink(sink);
  const auto name = unique_name("election-sink");
  dlock::leadership lead = provider->create_election(name).campaign("node-a", 10s);
  provider->create_lock(name).acquire(10s).release();
  lead.resign();

  const std::vector<std::string> expected{"acquire election " + name + " granted",
                                          "acquire " + name + " granted", "release " + name,
                                          "release election " + name};
  CHECK(sink->events() == expected);
}
