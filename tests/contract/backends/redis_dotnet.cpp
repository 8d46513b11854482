// The contract suite's [deployment] cases against dlock::redis in .NET DistributedLock's key
// layout (layout=dotnet), on the single test server. The cases that inspect are left out by the
// test spec: the layout has no owner records to show (tests/redis/dotnet_layout_test.cpp tests
// the refusal).
#include "redis_fixture.hpp"

constexpr const char* endpoint_variable = "DLOCK_TEST_REDIS";

namespace contract {

backend_fixture& backend() {
  static const std::string endpoint = support::require_test_server_endpoint(endpoint_variable);
  static redis_fixture fixture(endpoint + "?layout=dotnet", endpoint, false,
                               dlock::redis::key_layout::dotnet);
  return fixture;
}

}  // namespace contract
