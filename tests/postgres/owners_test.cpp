// What the PostgreSQL backend keeps beside its advisory locks for the inspector and elections
// (docs/postgres.md, "What inspect can see", "Leader elections"): the owners' table, written with
// each grant and emptied by its release, and what happens without it.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include <pqxx/pqxx>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_POSTGRES"); }

}  // namespace

TEST_CASE("each grant has a row in an unlogged owners' table the provider creates, gone at release",
          "[postgres][inspect]") {
  const std::string table = "dlock_owners_test_" + std::to_string(::getpid());
  pqxx::connection connection(server_url());
  pqxx::nontransaction query(connection);
  query.exec("DROP TABLE IF EXISTS " + table);
  auto pg = dlock::make_provider(server_url() + "?owners_table=" + table);
  const auto name = unique_name("owned");
  auto held = pg->create_lock(name).with_owner("owner's row").acquire(10s);
  CHECK(query.exec1("SELECT count(*) FROM " + table)[0].as<int>() == 1);
  CHECK(query.exec1("SELECT convert_from(owner, 'UTF8') FROM " + table)[0].as<std::string>() ==
        "owner's row");
  CHECK(query.exec1("SELECT relpersistence FROM pg_class WHERE relname = '" + table + "'")[0]
            .as<std::string>() == "u");
  held.release();
  CHECK(query.exec1("SELECT count(*) FROM " + table)[0].as<int>() == 0);
  // Slots' keys from hashed names, of either sign (pg_locks shows their halves unsigned).
  for (int i = 0; i < 8; ++i) {
    auto slot = pg->create_semaphore(unique_name("owned-slot"), 2).acquire(10s);
    CHECK(query.exec1("SELECT count(*) FROM " + table + " AS g JOIN pg_locks AS l ON "
                      "l.locktype = 'advisory' AND l.granted AND l.pid = g.pid AND "
                      "l.classid::bigint = g.classid AND l.objid::bigint = g.objid AND "
                      "l.objsubid = g.objsubid")[0]
              .as<int>() == 1);
    slot.release();
    CHECK(query.exec1("SELECT count(*) FROM " + table)[0].as<int>() == 0);
  }
  query.exec("DROP TABLE " + table);
}

TEST_CASE("by default nothing is recorded, and inspect shows holders by their session's pid",
          "[postgres][inspect]") {
  auto pg = dlock::make_provider(server_url());
  auto observer = dlock::make_provider(server_url());
  const auto name = unique_name("unrecorded");
  auto held = pg->create_lock(name).with_owner("not stored").acquire(10s);
  const auto found = observer->inspect(name);
  REQUIRE(found.holders.size() == 1);
  CHECK(found.holders.front().owner.rfind("pid ", 0) == 0);
  CHECK_FALSE(found.holders.front().fencing_token);
  CHECK_THROWS_WITH(observer->list_locks(name), Catch::Matchers::Contains("owners_table"));
  // Nor can the server tell which grant a token was: asking is an error, never "false".
  CHECK_THROWS_AS(observer->create_lock(name).is_current(held.fencing_token()),
                  std::invalid_argument);
  CHECK_THROWS_WITH(observer->create_lock(name).is_current(held.fencing_token()),
                    Catch::Matchers::Contains("owners_table"));
}

TEST_CASE("an acquire whose owner's row cannot be written fails and leaves the lock free",
          "[postgres][inspect]") {
  std::atomic<int> background_errors{0};
  dlock::postgres::options opts{.connection_string = server_url(),
                                .owners_table = "dlock_no_such_schema.owners",
                                .on_error = [&](std::exception_ptr) { ++background_errors; }};
  auto pg = std::make_shared<dlock::postgres::provider>(opts);
  const auto name = unique_name("unwritable");
  CHECK_THROWS_AS(pg->create_lock(name).try_acquire(), dlock::error);
  CHECK(background_errors >= 1);  // the table could not be created
  auto other = dlock::make_provider(server_url());
  CHECK(wait_until([&] { return other->create_lock(name).try_acquire().has_value(); }, 10s));
}

TEST_CASE("elections need the fencing sequence, whose tokens are their terms",
          "[postgres][election]") {
  auto unfenced = dlock::make_provider(server_url() + "?fencing_sequence=");
  CHECK_THROWS_AS(unfenced->create_election(unique_name("unfenced")), dlock::error);
}
