// The Cluster test deployment is a real Redis Cluster: three masters that serve every slot
// between them, each with a replica, and a key answered by its slot's master only.
#include <catch2/catch.hpp>

#include <set>

#include "redis_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

namespace {

std::vector<support::host_port> hosts_of(const char* variable) {
  return support::endpoint_hosts(support::require_test_server_endpoint(variable));
}

}  // namespace

TEST_CASE("the Redis Cluster serves all 16384 slots on three masters, each with a replica",
          "[redis_cluster][servers]") {
  const auto masters = hosts_of("DLOCK_TEST_REDIS_CLUSTER_PLAIN");
  const auto replicas = hosts_of("DLOCK_TEST_REDIS_CLUSTER_REPLICAS");
  REQUIRE(masters.size() == 3);
  REQUIRE(replicas.size() == 3);
  std::set<std::string> ids;
  for (const auto& at : masters) {
    CHECK(at.host == "127.0.0.1");
    support::redis_connection node(at);
    const auto info = node.command({"CLUSTER", "INFO"});
    REQUIRE(info);
    CHECK(support::redis_info_field(*info, "cluster_state") == "ok");
    CHECK(support::redis_info_field(*info, "cluster_slots_assigned") == "16384");
    CHECK(support::redis_info_field(*info, "cluster_known_nodes") == "6");
    CHECK(support::redis_info_field(*info, "cluster_size") == "3");
    const auto id = node.command({"CLUSTER", "MYID"});
    REQUIRE(id);
    ids.insert(*id);
  }
  CHECK(ids.size() == 3);
  for (const auto& at : replicas) {
    support::redis_connection node(at);
    const auto info = node.command({"INFO", "replication"});
    REQUIRE(info);
    CHECK(support::redis_info_field(*info, "role") == "slave");
    CHECK(support::redis_info_field(*info, "master_link_status") == "up");
  }
}

TEST_CASE("a Cluster key is answered by its slot's master and redirected by the others",
          "[redis_cluster][servers]") {
  const auto masters = hosts_of("DLOCK_TEST_REDIS_CLUSTER_PLAIN");
  const std::string key = support::unique_name("servers-cluster-key");
  int answered = 0, moved = 0;
  for (const auto& at : masters) {
    support::redis_connection node(at);
    const auto reply = node.command({"SET", key, "1", "PX", "60000"});
    REQUIRE(reply);
    if (*reply == "OK") {
      ++answered;
      node.command({"DEL", key});
    } else if (reply->rfind("MOVED ", 0) == 0) {
      ++moved;
    }
  }
  CHECK(answered == 1);
  CHECK(moved == 2);
}
