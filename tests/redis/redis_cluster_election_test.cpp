// The board's watch in a Redis Cluster: shard channels on the election's slot
// (leader_watch_check.hpp).
#include "leader_watch_check.hpp"
#include "redis_cluster_support.hpp"

TEST_CASE("an election's watch hears a proclaim and a resignation from the cluster, and a "
          "destroyed watch unsubscribes", "[redis-cluster][election]") {
  dlock::redis::options opts{.cluster = true, .key_prefix = redis_cluster_test::prefix()};
  for (const auto& master : redis_cluster_test::masters()) {
    opts.servers.push_back({.host = master.host, .port = static_cast<std::uint16_t>(master.port)});
  }
  redis_test::check_leader_watch_pushed(opts, redis_cluster_test::masters());
}
