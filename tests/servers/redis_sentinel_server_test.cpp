// The Sentinel test deployment is real: three sentinels that agree on the master "mymaster",
// which is the first data node as started, with the two others as its replicas. (The failover
// group is the same deployment; tests/redis/sentinel_failover_test.cpp moves its master.)
#include <catch2/catch.hpp>

#include "redis_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;

namespace {

std::vector<support::host_port> hosts_of(const char* variable) {
  return support::endpoint_hosts(support::require_test_server_endpoint(variable));
}

}  // namespace

TEST_CASE("three sentinels name the first data node as mymaster's master",
          "[redis_sentinel][servers]") {
  const auto sentinels = hosts_of("DLOCK_TEST_REDIS_SENTINEL");
  const auto nodes = hosts_of("DLOCK_TEST_REDIS_SENTINEL_NODES");
  REQUIRE(sentinels.size() == 3);
  REQUIRE(nodes.size() == 3);
  for (const auto& at : sentinels) {
    CHECK(at.host == "127.0.0.1");
    support::redis_connection sentinel(at);
    const auto master =
        sentinel.command_elements({"SENTINEL", "get-master-addr-by-name", "mymaster"});
    REQUIRE(master);
    CHECK(*master == std::vector<std::string>{nodes[0].host, std::to_string(nodes[0].port)});
  }
}

TEST_CASE("the Sentinel deployment's replicas follow its master", "[redis_sentinel][servers]") {
  const auto nodes = hosts_of("DLOCK_TEST_REDIS_SENTINEL_NODES");
  support::redis_connection master(nodes.at(0));
  const auto info = master.command({"INFO", "replication"});
  REQUIRE(info);
  CHECK(support::redis_info_field(*info, "role") == "master");
  CHECK(support::redis_info_field(*info, "connected_slaves") == "2");
  const std::string key = support::unique_name("servers-sentinel-replicated");
  REQUIRE(master.command({"SET", key, "1", "PX", "60000"}) == std::optional<std::string>("OK"));
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    support::redis_connection replica(nodes[i]);
    const auto role = replica.command({"INFO", "replication"});
    REQUIRE(role);
    CHECK(support::redis_info_field(*role, "role") == "slave");
    CHECK(support::wait_until([&] { return replica.command({"GET", key}) == "1"; }, 10s));
  }
  master.command({"DEL", key});
}
