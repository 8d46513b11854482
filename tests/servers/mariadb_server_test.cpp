// The MariaDB test server is a real MariaDB on loopback, and the fault helpers of
// scripts/test-servers.sh (kill-connections, restart, pause/resume) do what they say to it.
// The fault cases share the server with every other MariaDB test, so they run alone
// (mariadb_server_fault_test.cpp, registered RUN_SERIAL).
#include <catch2/catch.hpp>

#include "mariadb_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

namespace {

std::string mariadb_url() { return support::require_test_server_endpoint("DLOCK_TEST_MARIADB"); }

}  // namespace

TEST_CASE("the MariaDB test server is a real MariaDB on loopback", "[mariadb][servers]") {
  CHECK(support::endpoint_hosts(mariadb_url()).at(0).host == "127.0.0.1");
  support::mariadb_client client(mariadb_url());
  CHECK_THAT(client.value("SELECT VERSION()"), Catch::Contains("MariaDB"));
  CHECK(client.value("SELECT DATABASE()") == "dlock_test");
  CHECK_THAT(client.value("SELECT CURRENT_USER()"), Catch::StartsWith("dlock@"));
}

TEST_CASE("two clients of the MariaDB test server see each other's named locks",
          "[mariadb][servers]") {
  const std::string name = support::unique_name("servers-named-lock");
  support::mariadb_client holder(mariadb_url());
  support::mariadb_client other(mariadb_url());
  REQUIRE(holder.value("SELECT GET_LOCK('" + name + "', 0)") == "1");
  CHECK(other.value("SELECT IS_USED_LOCK('" + name + "')") == std::to_string(holder.id()));
  CHECK(other.value("SELECT GET_LOCK('" + name + "', 0)") == "0");
  CHECK(holder.value("SELECT RELEASE_LOCK('" + name + "')") == "1");
}
