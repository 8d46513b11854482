// docs/fencing.md's PostgreSQL recipes: a row that keeps the highest fencing token refuses a
// paused holder's stale write after a newer holder wrote, in the write's own statement.
#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <dlock/dlock.hpp>

#include "paused_holder.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_POSTGRES"); }

std::string with_options(const std::string& url, const std::string& options) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + options;
}

/// The tables of the recipe, under names of this test's own, dropped at the end.
struct recipe_tables {
  explicit recipe_tables(pqxx::connection& connection)
      : connection(connection),
        fence(connection.quote_name(support::unique_name("dlock_fence"))),
        orders(connection.quote_name(support::unique_name("orders"))) {
    pqxx::work work(connection);
    work.exec0("CREATE TABLE " + fence + " (resource text PRIMARY KEY, token bigint NOT NULL)");
    work.exec0("CREATE TABLE " + orders + " (id text PRIMARY KEY, status text NOT NULL)");
    work.commit();
  }
  ~recipe_tables() {
    try {
      pqxx::work work(connection);
      work.exec0("DROP TABLE " + fence + ", " + orders);
      work.commit();
    } catch (...) {
    }
  }

  /// The fenced write of docs/fencing.md: one statement raises the fence row of the resource
  /// to `token` unless a newer token is there, and writes the order only if it did.
  /// Returns whether it wrote.
  bool set_status(const std::string& id, std::uint64_t token, const std::string& status) {
    pqxx::work work(connection);
    const pqxx::result written = work.exec_params(
        "WITH fence AS ("
        "  INSERT INTO " + fence + " AS f (resource, token) VALUES ($1, $2)"
        "  ON CONFLICT (resource) DO UPDATE SET token = excluded.token"
        "    WHERE f.token <= excluded.token"
        "  RETURNING token)"
        " INSERT INTO " + orders + " (id, status) SELECT $1, $3 FROM fence"
        " ON CONFLICT (id) DO UPDATE SET status = excluded.status",
        id, static_cast<std::int64_t>(token), status);
    work.commit();
    return written.affected_rows() == 1;
  }

  std::string status(const std::string& id) {
    pqxx::work work(connection);
    return work.exec_params1("SELECT status FROM " + orders + " WHERE id = $1", id)[0]
        .as<std::string>();
  }

  pqxx::connection& connection;
  std::string fence;
  std::string orders;
};

}  // namespace

TEST_CASE("the fence-table statement writes for the highest token or a newer one, and no older",
          "[postgres][fencing]") {
  pqxx::connection connection(server_url());
  recipe_tables tables(connection);
  CHECK(tables.set_status("order-1", 7, "paid"));
  CHECK(tables.set_status("order-1", 7, "packed"));
  CHECK(tables.set_status("order-1", 8, "shipped"));
  CHECK_FALSE(tables.set_status("order-1", 7, "cancelled"));
  CHECK(tables.status("order-1") == "shipped");
}

TEST_CASE("a row that carries its own token refuses an older token in the write's statement",
          "[postgres][fencing]") {
  pqxx::connection connection(server_url());
  const std::string table = connection.quote_name(support::unique_name("stock"));
  pqxx::work work(connection);
  work.exec0("CREATE TEMPORARY TABLE " + table +
             " (item text PRIMARY KEY, count integer NOT NULL, token bigint NOT NULL)");
  const std::string upsert =
      "INSERT INTO " + table + " AS s (item, count, token) VALUES ($1, $2, $3)"
      " ON CONFLICT (item) DO UPDATE SET count = excluded.count, token = excluded.token"
      "  WHERE s.token <= excluded.token";
  CHECK(work.exec_params(upsert, "bolt", 10, 4).affected_rows() == 1);
  CHECK(work.exec_params(upsert, "bolt", 9, 5).affected_rows() == 1);
  CHECK(work.exec_params(upsert, "bolt", 100, 4).affected_rows() == 0);
  CHECK(work.exec_params1("SELECT count FROM " + table + " WHERE item = 'bolt'")[0].as<int>() == 9);
}

TEST_CASE("a holder paused past its server lease has its stale write refused by the fence row",
          "[postgres][fencing][multiprocess]") {
  // The server ends the stopped holder's idle session after server_lease, which frees its lock.
  const std::string url = with_options(server_url(), "keepalive=250ms&server_lease=500ms");
  const std::string name = support::unique_name("paused-writer");
  pqxx::connection connection(server_url());
  recipe_tables tables(connection);
  auto successor = dlock::make_provider(url);

  support::run_paused_holder(url, name, *successor, 15s, {
    .newer_writes = [&](const dlock::lock_handle& newer) {
      CHECK(tables.set_status(name, newer.fencing_token(), "newer"));
    },
    .stale_writes = [&](std::uint64_t stale_token) {
      CHECK_FALSE(tables.set_status(name, stale_token, "stale"));
    },
  });
  CHECK(tables.status(name) == "newer");
}
