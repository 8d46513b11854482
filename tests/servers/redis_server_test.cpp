// The Redis test servers are real, separate Redis servers.
#include <catch2/catch.hpp>
#include <set>

#include "redis_client.hpp"
#include "test_servers.hpp"

namespace {

support::host_port redis_server() {
  return support::endpoint_hosts(support::require_test_server_endpoint("DLOCK_TEST_REDIS")).at(0);
}

}  // namespace

TEST_CASE("the Redis test server is a real Redis server on loopback", "[redis][servers]") {
  const auto at = redis_server();
  CHECK(at.host == "127.0.0.1");
  support::redis_connection redis(at);
  const auto info = redis.command({"INFO", "server"});
  REQUIRE(info);
  CHECK_THAT(*info, Catch::Contains("redis_version:"));
  CHECK(support::redis_info_field(*info, "tcp_port") == std::to_string(at.port));
}

TEST_CASE("the three RedLock servers are distinct Redis servers", "[redis][servers]") {
  const auto redlock =
      support::endpoint_hosts(support::require_test_server_endpoint("DLOCK_TEST_REDLOCK"));
  REQUIRE(redlock.size() == 3);
  std::set<std::string> run_ids;
  for (const auto& at : std::vector{redlock[0], redlock[1], redlock[2], redis_server()}) {
    support::redis_connection redis(at);
    const auto info = redis.command({"INFO", "server"});
    REQUIRE(info);
    run_ids.insert(support::redis_info_field(*info, "run_id"));
  }
  CHECK(run_ids.size() == 4);
  CHECK_FALSE(run_ids.contains(""));
}
