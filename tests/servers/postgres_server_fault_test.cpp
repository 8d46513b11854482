// The fault helpers of scripts/test-servers.sh against PostgreSQL: kill-connections, restart,
// pause/resume.
#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;

namespace {

std::string postgres_url(const std::string& parameters = "") {
  return support::require_test_server_endpoint("DLOCK_TEST_POSTGRES") +
         (parameters.empty() ? "" : "?" + parameters);
}

bool answers_select_1(pqxx::connection& connection) {
  pqxx::nontransaction query(connection);
  return query.exec1("select 1")[0].as<int>() == 1;
}

bool new_connection_answers() {
  try {
    pqxx::connection connection(postgres_url("connect_timeout=2"));
    return answers_select_1(connection);
  } catch (const pqxx::broken_connection&) {
    return false;
  }
}

}  // namespace

TEST_CASE("kill-connections terminates the named client's PostgreSQL connections only",
          "[postgres][servers][fault]") {
  const std::string name = support::unique_name("victim");
  pqxx::connection victim(postgres_url("application_name=" + name));
  pqxx::connection bystander(postgres_url("application_name=bystander"));
  REQUIRE(answers_select_1(victim));

  support::test_servers({"kill-connections", "postgres", name});

  CHECK_THROWS_AS(answers_select_1(victim), pqxx::broken_connection);
  CHECK(answers_select_1(bystander));
}

TEST_CASE("after restart, PostgreSQL answers a new connection and the old one is broken",
          "[postgres][servers][fault]") {
  pqxx::connection before(postgres_url());
  REQUIRE(answers_select_1(before));
  support::undo_test_servers_fault restart({"restart", "postgres"});
  restart.now();
  CHECK_THROWS_AS(answers_select_1(before), pqxx::broken_connection);
  CHECK(new_connection_answers());
}

TEST_CASE("connecting to a paused PostgreSQL times out, and it answers after resume",
          "[postgres][servers][fault]") {
  support::undo_test_servers_fault resume({"resume", "postgres"});
  support::test_servers({"pause", "postgres"});
  const auto tried = std::chrono::steady_clock::now();
  CHECK_FALSE(new_connection_answers());
  CHECK(std::chrono::steady_clock::now() - tried < 10s);
  resume.now();
  CHECK(support::wait_until(new_connection_answers, 10s));
}
