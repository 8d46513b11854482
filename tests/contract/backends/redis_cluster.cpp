// The contract suite against dlock::redis over a Redis Cluster of three masters (the
// redis-cluster group): every name on the master of its hash slot.
#include "redis_fixture.hpp"

namespace contract {

backend_fixture& backend() {
  static redis_fixture fixture(support::require_test_server_endpoint("DLOCK_TEST_REDIS_CLUSTER"),
                               support::require_test_server_endpoint("DLOCK_TEST_REDIS_CLUSTER_PLAIN"),
                               /*cluster=*/true);
  return fixture;
}

}  // namespace contract
