// The fault helpers of scripts/test-servers.sh against MariaDB: kill-connections, restart,
// pause/resume.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "mariadb_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;

namespace {

std::string mariadb_url() { return support::require_test_server_endpoint("DLOCK_TEST_MARIADB"); }

bool answers_select_1(support::mariadb_client& client) {
  try {
    return client.value("SELECT 1") == "1";
  } catch (const std::runtime_error&) {
    return false;
  }
}

bool new_connection_answers() {
  try {
    support::mariadb_client client(mariadb_url(), 2s);
    return answers_select_1(client);
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace

TEST_CASE("kill-connections ends the named MariaDB user's connections, and new ones work",
          "[mariadb][servers][fault]") {
  support::mariadb_client victim(mariadb_url());
  REQUIRE(answers_select_1(victim));
  support::test_servers({"kill-connections", "mariadb", "dlock"});
  CHECK_FALSE(answers_select_1(victim));
  CHECK(new_connection_answers());
}

TEST_CASE("kill-connections of a user with no connection ends none", "[mariadb][servers][fault]") {
  support::mariadb_client bystander(mariadb_url());
  support::test_servers({"kill-connections", "mariadb", "nobody-connects-as-this"});
  CHECK(answers_select_1(bystander));
}

TEST_CASE("after restart, MariaDB answers a new connection and the old one is broken",
          "[mariadb][servers][fault]") {
  support::mariadb_client before(mariadb_url());
  REQUIRE(answers_select_1(before));
  support::undo_test_servers_fault restart({"restart", "mariadb"});
  restart.now();
  CHECK_FALSE(answers_select_1(before));
  CHECK(support::wait_until(new_connection_answers, 10s));
}

TEST_CASE("connecting to a paused MariaDB times out, and it answers after resume",
          "[mariadb][servers][fault]") {
  support::undo_test_servers_fault resume({"resume", "mariadb"});
  support::test_servers({"pause", "mariadb"});
  const auto tried = std::chrono::steady_clock::now();
  CHECK_FALSE(new_connection_answers());
  CHECK(std::chrono::steady_clock::now() - tried < 10s);
  resume.now();
  CHECK(support::wait_until(new_connection_answers, 10s));
}
