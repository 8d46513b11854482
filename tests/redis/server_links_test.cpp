// What dlock::redis's health() and metrics sink say of its servers' connections: a server
// that goes away and comes back with no command sent meanwhile, and RedLock's nodes, which
// may be down up to a minority while locks work on. These tests stop and start servers that
// other tests share, so they run alone (RUN_SERIAL) and leave them healthy.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>

#include <dlock/dlock.hpp>

#include "fault_support.hpp"

namespace redis_test {

using support::unique_name;
using support::wait_until;

namespace {

bool counted_reconnections(dlock::prometheus_metrics& metrics, int count) {
  return metrics.render().find("dlock_reconnects_total{backend=\"redis\"} " +
                               std::to_string(count) + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("a server that goes away is unhealthy without a command sent, and healthy again with "
          "the reconnection counted once it is back",
          "[redis][fault][health]") {
  auto provider = dlock::make_provider(url());
  auto metrics = std::make_shared<dlock::prometheus_metrics>();
  provider->set_metrics_sink(metrics);
  provider->create_lock(unique_name("links")).acquire(5s).release();
  REQUIRE(provider->health().ok());

  support::undo_test_servers_fault restart({"restart", "redis"});
  support::test_servers({"shutdown", "redis"});
  // Nothing is held and nothing is sent: the closed connection alone tells.
  REQUIRE(wait_until([&] { return !provider->health().connected; }, 10s));
  const auto down = provider->health();
  REQUIRE(down.problems.size() == 1);
  CHECK_THAT(down.problems[0], Catch::Contains("cannot reach 127.0.0.1:"));
  CHECK_FALSE(counted_reconnections(*metrics, 1));

  restart.now();
  // Nor is anything sent to find it back: the provider keeps connecting while it is down.
  CHECK(wait_until([&] { return provider->health().ok(); }, 10s));
  CHECK(provider->health().connected);
  CHECK(counted_reconnections(*metrics, 1));
  CHECK(provider->create_lock(unique_name("links")).acquire(5s));
}

TEST_CASE("a RedLock provider with a node down names it in health() and stays connected; with "
          "a majority down it is not connected",
          "[redis][redlock][fault][health]") {
  const std::string nodes = redis_test::redlock_endpoint();
  auto locks = dlock::make_provider(url("dlock", nodes));
  locks->create_lock(unique_name("redlock-links")).acquire(5s).release();
  REQUIRE(locks->health().ok());

  support::undo_test_servers_fault restart_first({"restart", "redlock1"});
  support::test_servers({"kill", "redlock1"});
  REQUIRE(wait_until([&] { return !locks->health().ok(); }, 10s));
  auto health = locks->health();
  CHECK(health.connected);
  REQUIRE(health.problems.size() == 1);
  CHECK_THAT(health.problems[0], Catch::Contains(endpoint_of(nodes, 0)));

  support::undo_test_servers_fault restart_second({"restart", "redlock2"});
  support::test_servers({"kill", "redlock2"});
  REQUIRE(wait_until([&] { return !locks->health().connected; }, 10s));
  CHECK(locks->health().problems.size() == 2);

  restart_second.now();
  restart_first.now();
  CHECK(wait_until([&] { return locks->health().ok(); }, 10s));
}

}  // namespace redis_test
