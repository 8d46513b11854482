// The fault helpers of scripts/test-servers.sh against Redis: restart, pause/resume, kill,
// kill-connections.
#include <catch2/catch.hpp>

#include "redis_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;

namespace {

support::host_port endpoint(const char* variable, std::size_t index = 0) {
  return support::endpoint_hosts(support::require_test_server_endpoint(variable)).at(index);
}

}  // namespace

TEST_CASE("after restart, Redis answers a new connection on the same port",
          "[redis][servers][fault]") {
  const auto at = endpoint("DLOCK_TEST_REDIS");
  support::redis_connection before(at);
  REQUIRE(before.command({"PING"}) == "PONG");
  support::undo_test_servers_fault restart({"restart", "redis"});
  restart.now();
  CHECK_FALSE(before.command({"PING"}));
  CHECK(support::redis_answers_ping(at));
}

TEST_CASE("a request to a paused Redis times out, and it answers after resume",
          "[redis][servers][fault]") {
  const auto at = endpoint("DLOCK_TEST_REDIS");
  support::redis_connection redis(at, 200ms);
  REQUIRE(redis.command({"PING"}) == "PONG");

  support::undo_test_servers_fault resume({"resume", "redis"});
  support::test_servers({"pause", "redis"});
  const auto sent = std::chrono::steady_clock::now();
  CHECK_FALSE(redis.command({"PING"}));
  CHECK(std::chrono::steady_clock::now() - sent < 2s);
  INFO("hiredis error: " << redis.error());

  resume.now();
  CHECK(support::wait_until([&] { return support::redis_answers_ping(at, 200ms); }, 10s));
}

TEST_CASE("a killed RedLock server refuses connections until it is restarted",
          "[redis][servers][fault]") {
  const auto at = endpoint("DLOCK_TEST_REDLOCK", 2);
  support::undo_test_servers_fault restart({"restart", "redlock3"});
  support::test_servers({"kill", "redlock3"});
  CHECK_THROWS_WITH(support::redis_connection(at), Catch::Contains("connect failed"));
  restart.now();
  CHECK(support::redis_answers_ping(at));
}

TEST_CASE("kill-connections ends the named Redis client's connections and no other",
          "[redis][servers][fault]") {
  const auto at = endpoint("DLOCK_TEST_REDIS");
  const std::string name = support::unique_name("victim");
  support::redis_connection victim(at);
  support::redis_connection bystander(at);
  REQUIRE(victim.command({"CLIENT", "SETNAME", name}) == "OK");

  support::test_servers({"kill-connections", "redis", name});

  CHECK_FALSE(victim.command({"PING"}));
  CHECK(bystander.command({"PING"}) == "PONG");
}
