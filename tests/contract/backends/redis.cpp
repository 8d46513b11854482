// The contract suite against dlock::redis over plain TCP, with a short expiry so that losses
// show within a second: on the single test server (DLOCK_TEST_REDIS), or, built with
// DLOCK_CONTRACT_REDLOCK, RedLock over the three redlock servers (DLOCK_TEST_REDLOCK).
#include "redis_fixture.hpp"

#ifdef DLOCK_CONTRACT_REDLOCK
constexpr const char* endpoint_variable = "DLOCK_TEST_REDLOCK";
#else
constexpr const char* endpoint_variable = "DLOCK_TEST_REDIS";
#endif

namespace contract {

backend_fixture& backend() {
  static const std::string endpoint = support::require_test_server_endpoint(endpoint_variable);
  static redis_fixture fixture(endpoint, endpoint);
  return fixture;
}

}  // namespace contract
