// Transaction-scoped advisory locks on the caller's own libpqxx transaction.
#include <future>
#include <thread>

#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using dlock::postgres::advisory_key;
using support::unique_name;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_POSTGRES"); }

std::string setting(pqxx::dbtransaction& transaction, const std::string& name) {
  return transaction.exec1("SELECT current_setting('" + name + "')")[0].as<std::string>();
}

}  // namespace

TEST_CASE("a transaction lock excludes sessions and dlock until commit or rollback",
          "[postgres][transaction]") {
  const auto name = unique_name("xact");
  auto pg = dlock::make_provider(server_url());
  pqxx::connection connection(server_url());
  {
    pqxx::work transaction(connection);
    dlock::postgres::lock_in_transaction(transaction, name);
    CHECK_FALSE(pg->create_lock(name).try_acquire());
    transaction.commit();
  }
  CHECK(pg->create_lock(name).try_acquire());
  {
    pqxx::work transaction(connection);
    REQUIRE(dlock::postgres::try_lock_in_transaction(transaction, advisory_key::from_name(name)));
    CHECK_FALSE(pg->create_lock(name).try_acquire());
  }  // rolled back
  CHECK(pg->create_lock(name).try_acquire());
}

TEST_CASE("a transaction lock wait that times out restores lock_timeout and statement_timeout "
          "and leaves the transaction usable",
          "[postgres][transaction]") {
  const auto name = unique_name("xact-timeout");
  auto pg = dlock::make_provider(server_url());
  auto held = pg->create_lock(name).acquire();
  pqxx::connection connection(server_url());
  pqxx::work transaction(connection);
  transaction.exec("SET LOCAL lock_timeout = '7s'; SET LOCAL statement_timeout = '9s'");
  CHECK_FALSE(
      dlock::postgres::try_lock_in_transaction(transaction, advisory_key::from_name(name), 100ms));
  CHECK_THROWS_AS(dlock::postgres::lock_in_transaction(transaction, name, 50ms),
                  dlock::timeout_error);
  CHECK(setting(transaction, "lock_timeout") == "7s");
  CHECK(setting(transaction, "statement_timeout") == "9s");
  held.release();
  dlock::postgres::lock_in_transaction(transaction, name, 10s);
  CHECK(setting(transaction, "lock_timeout") == "7s");
  CHECK(setting(transaction, "statement_timeout") == "9s");
  CHECK_FALSE(pg->create_lock(name).try_acquire());
  CHECK_THROWS_AS(dlock::postgres::lock_in_transaction(transaction, name, -1s),
                  std::invalid_argument);
}

TEST_CASE("a deadlock between two transactions is deadlock_error, not a timeout",
          "[postgres][transaction]") {
  const auto a = unique_name("deadlock-a");
  const auto b = unique_name("deadlock-b");
  pqxx::connection first_connection(server_url()), second_connection(server_url());
  pqxx::work first(first_connection), second(second_connection);
  dlock::postgres::lock_in_transaction(first, a);
  dlock::postgres::lock_in_transaction(second, b);
  // Each waits for the other's lock: the server's deadlock detector (deadlock_timeout, 1 s by
  // default) fails one of the two waits with 40P01; the other is granted once that one ends.
  auto wait_in = [](pqxx::work& transaction, const std::string& name) {
    return std::async(std::launch::async, [&transaction, name]() -> std::string {
      try {
        dlock::postgres::lock_in_transaction(transaction, name, 30s);
        return "granted";
      } catch (const dlock::deadlock_error&) {
        transaction.abort();  // ends the holder, so the other wait is granted
        return "deadlock";
      } catch (const std::exception& e) {
        transaction.abort();
        return e.what();
      }
    });
  };
  auto first_wait = wait_in(first, b);
  auto second_wait = wait_in(second, a);
  REQUIRE(first_wait.wait_for(30s) == std::future_status::ready);
  REQUIRE(second_wait.wait_for(30s) == std::future_status::ready);
  std::vector<std::string> outcomes{first_wait.get(), second_wait.get()};
  std::sort(outcomes.begin(), outcomes.end());
  INFO(outcomes[0] << " / " << outcomes[1]);
  CHECK(outcomes == std::vector<std::string>{"deadlock", "granted"});
}

TEST_CASE("a transaction lock wait longer than lock_timeout can hold is accepted",
          "[postgres][transaction]") {
  pqxx::connection connection(server_url());
  pqxx::work transaction(connection);
  CHECK(dlock::postgres::try_lock_in_transaction(
      transaction, advisory_key::from_name(unique_name("xact-days")), std::chrono::days(30)));
}
