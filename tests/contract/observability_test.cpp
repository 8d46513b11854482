// What a service can observe: free semaphore slots and the provider's counters.
#include <catch2/catch.hpp>
#include <thread>

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
  auto count = encoders.current_count();
  if (!count) {
    WARN(backend().label() << " cannot tell a semaphore's free slots");
    return;
  }
  CHECK(*count == 3);
  auto first = encoders.acquire(10s);
  auto second = other->create_semaphore(name, 3).acquire(10s);
  CHECK(encoders.current_count() == 1u);
  first.release();
  CHECK(encoders.current_count() == 2u);
  CHECK_THROWS_AS((void)provider->create_semaphore(name, 4).current_count(),
                  std::invalid_argument);
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
