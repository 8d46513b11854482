// The contract suite against dlock::redis over TLS with mutual authentication (a client
// certificate from the test CA, the server's host name checked), or, built with
// DLOCK_CONTRACT_REDIS_UNIX, over a Unix socket: the servers of the redis-tls group.
#include "redis_fixture.hpp"

namespace contract {

backend_fixture& backend() {
#ifdef DLOCK_CONTRACT_REDIS_UNIX
  static redis_fixture fixture(support::require_test_server_endpoint("DLOCK_TEST_REDIS_UNIX"),
                               support::require_test_server_endpoint("DLOCK_TEST_REDIS_UNIX_PLAIN"));
#else
  static const std::string tls = support::require_test_server_endpoint("DLOCK_TEST_TLS_DIR");
  static redis_fixture fixture(
      support::require_test_server_endpoint("DLOCK_TEST_REDIS_TLS") + "?tls_ca=" + tls +
          "/ca.crt&tls_cert=" + tls + "/client.crt&tls_key=" + tls + "/client.key",
      support::require_test_server_endpoint("DLOCK_TEST_REDIS_TLS_PLAIN"));
#endif
  return fixture;
}

}  // namespace contract
