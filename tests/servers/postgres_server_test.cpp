// The PostgreSQL test server is a real PostgreSQL 15 with the test role and database.
#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include "test_servers.hpp"

TEST_CASE("the PostgreSQL test server is a real PostgreSQL 15 on loopback", "[postgres][servers]") {
  const auto url = support::require_test_server_endpoint("DLOCK_TEST_POSTGRES");
  CHECK(support::endpoint_hosts(url).at(0).host == "127.0.0.1");
  pqxx::connection connection(url);
  pqxx::nontransaction query(connection);
  CHECK_THAT(query.exec1("select version()")[0].as<std::string>(),
             Catch::StartsWith("PostgreSQL 15"));
}

TEST_CASE("the tests connect as the unprivileged role dlock that owns dlock_test",
          "[postgres][servers]") {
  pqxx::connection connection(support::require_test_server_endpoint("DLOCK_TEST_POSTGRES"));
  pqxx::nontransaction query(connection);
  const auto row = query.exec1(
      "select current_user, current_database(), rolsuper, pg_get_userbyid(datdba) "
      "from pg_roles, pg_database where rolname = current_user and datname = current_database()");
  CHECK(row[0].as<std::string>() == "dlock");
  CHECK(row[1].as<std::string>() == "dlock_test");
  CHECK_FALSE(row[2].as<bool>());
  CHECK(row[3].as<std::string>() == "dlock");
}
