// The contract suite against dlock::redis through Redis Sentinel: the master of the
// redis-sentinel group, found by asking its three sentinels. Nothing fails this group over
// (tests/redis/sentinel_failover_test.cpp has a group of its own), so the probes look at the
// master as started, the first of its data nodes.
#include "redis_fixture.hpp"

namespace contract {

backend_fixture& backend() {
  static const std::string nodes =
      support::require_test_server_endpoint("DLOCK_TEST_REDIS_SENTINEL_NODES");
  static redis_fixture fixture(support::require_test_server_endpoint("DLOCK_TEST_REDIS_SENTINEL"),
                               nodes.substr(0, nodes.find(',')));
  return fixture;
}

}  // namespace contract
