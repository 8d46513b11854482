// dlock::mysql against the MariaDB test server: what only this backend has (its URL, its name
// mapping seen by plain SQL clients, its fencing sequence). The shared semantics are in the
// contract suite.
#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <set>
#include <string>
#include <thread>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "mariadb_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_MARIADB"); }

std::string with(const std::string& options) { return server_url() + "?" + options; }

// The `mariadb` command-line client as another service would run it: one session, statements
// on its stdin, one answer line each.
class mariadb_cli {
 public:
  mariadb_cli()
      : process_({"/usr/bin/mariadb", "--no-defaults", "--unbuffered", "-N", "-B",
                  "-h", host().host, "-P", std::to_string(host().port), "-u", "dlock",
                  "-pdlock", "dlock_test"}) {}
  ~mariadb_cli() { process_.close_stdin(); }
  std::string run(const std::string& sql) {
    process_.write_stdin(sql + ";\n");
    return process_.read_line(30s).value_or("<no answer>");
  }

 private:
  static support::host_port host() { return support::endpoint_hosts(server_url()).at(0); }
  support::child_process process_;
};

// A table name of this process's own that does not exist yet, for a provider to create.
std::string missing_table(support::mariadb_client& sql, const std::string& prefix) {
  const std::string table = prefix + "_" + std::to_string(::getpid());
  sql.query("DROP TABLE IF EXISTS " + table);
  return table;
}

// Ends the connection recorded as holder in `table`'s one row, as an operator's KILL would, and
// waits until the server's thread for it is gone: the server frees the connection's named locks
// as that thread ends, which the killed client may notice first (CI's ASan run once saw an
// inspect right after the client's loss still list the killed holder, and keep its row).
void kill_recorded_holder(support::mariadb_client& sql, const std::string& table) {
  const std::string id = sql.value("SELECT holder FROM " + table);
  sql.query("KILL CONNECTION " + id);
  REQUIRE(wait_until([&] {
    return sql.value("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = " + id) == "0";
  }));
}

}  // namespace

TEST_CASE("a mariadb client holding the mapped name excludes dlock, and dlock excludes it",
          "[mysql][interop]") {
  const auto name = unique_name("interop");
  const auto mapped = dlock::mysql::server_lock_name(name);
  auto db = dlock::make_provider(server_url());

  mariadb_cli cli;
  REQUIRE(cli.run("SELECT GET_LOCK('" + mapped + "', 0)") == "1");
  CHECK_FALSE(db->create_lock(name).try_acquire());
  CHECK_THROWS_AS(db->create_lock(name).acquire(100ms), dlock::timeout_error);
  auto waiting = db->create_lock(name).async_acquire(30s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return db->metrics().waits == 2; }));
  REQUIRE(cli.run("SELECT RELEASE_LOCK('" + mapped + "')") == "1");
  REQUIRE(waiting.wait_for(30s) == std::future_status::ready);
  auto held = waiting.get();
  CHECK(cli.run("SELECT GET_LOCK('" + mapped + "', 0)") == "0");
  CHECK(cli.run("SELECT IS_USED_LOCK('" + mapped + "') IS NOT NULL") == "1");
  held.release();
  CHECK(cli.run("SELECT GET_LOCK('" + mapped + "', 0)") == "1");
}

TEST_CASE("names that differ only in case do not exclude each other", "[mysql][naming]") {
  const auto base = unique_name("case");
  auto db = dlock::make_provider(server_url());
  auto other = dlock::make_provider(server_url());
  auto upper = db->create_lock(base + "-A").acquire(5s);
  CHECK(other->create_lock(base + "-a").try_acquire());
  CHECK_FALSE(other->create_lock(base + "-A").try_acquire());
}

TEST_CASE("bad URLs and options are invalid_argument naming the field", "[mysql]") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(dlock::make_provider(with("bogus=1")), Contains("bogus"));
  REQUIRE_THROWS_WITH(dlock::make_provider(with("keepalive=10")), Contains("keepalive"));
  REQUIRE_THROWS_WITH(dlock::make_provider(with("keepalive=10s&server_lease=11s")),
                      Contains("server_lease"));
  REQUIRE_THROWS_WITH(dlock::make_provider(with("ssl-mode=sometimes")), Contains("ssl_mode"));
  REQUIRE_THROWS_WITH(dlock::make_provider(with("ssl=maybe")), Contains("ssl"));
  REQUIRE_THROWS_WITH(dlock::make_provider(with("fencing_sequence=a;b")),
                      Contains("fencing_sequence"));
  REQUIRE_THROWS_WITH(dlock::make_provider(with("semaphore_table=a-b")),
                      Contains("semaphore_table"));
  REQUIRE_THROWS_WITH(dlock::make_provider("mysql://h1:3306,h2:3306/db"), Contains("one host"));
  REQUIRE_THROWS_WITH(dlock::make_provider("mysql://127.0.0.1:3306"), Contains("database"));
  REQUIRE_THROWS_WITH(dlock::make_provider(with("ssl-ca=/x&ssl_ca=/y")), Contains("twice"));
  // The TLS and timing options of docs/mysql.md, spelled either way, are taken.
  CHECK(dlock::make_provider(with("ssl-ca=/etc/ssl/ca.pem&ssl_cert=/c&ssl-key=/k&"
                                  "ssl-verify-server-cert=false&connect_timeout=2s&"
                                  "keepalive=5s&server_lease=10s&semaphore_retry=100ms&"
                                  "release_timeout=3s&fencing_sequence=dlock_fencing")));
  CHECK(dlock::make_provider("mariadb://dlock:dlock@127.0.0.1:1/dlock_test"));
  CHECK(dlock::make_provider("mysql://dlock@127.0.0.1:1/?fencing_sequence=&semaphore_table=&"
                             "election_table=&grant_table="));
  REQUIRE_THROWS_WITH(dlock::make_provider("mysql://dlock@127.0.0.1:1/?fencing_sequence="),
                      Contains("semaphore table needs a database"));
  REQUIRE_THROWS_WITH(
      dlock::make_provider("mysql://dlock@127.0.0.1:1/?fencing_sequence=&semaphore_table="),
      Contains("election table needs a database"));
  REQUIRE_THROWS_WITH(dlock::make_provider(with("election_table=x.y.z")),
                      Contains("election_table"));
  REQUIRE_THROWS_WITH(dlock::make_provider("mysql://dlock@127.0.0.1:1/?fencing_sequence=&"
                                           "semaphore_table=&election_table=&"
                                           "grant_table=dlock_grants"),
                      Contains("grant table needs a database"));
  CHECK(dlock::make_provider("mysql://dlock@127.0.0.1:1/?fencing_sequence=&semaphore_table=&"
                             "election_table="));  // no grant table by default
}

TEST_CASE("an unreachable server, a wrong password or an unknown database is a connection_error "
          "naming the endpoint",
          "[mysql]") {
  using Catch::Contains;
  const auto at = support::endpoint_hosts(server_url()).at(0);
  const std::string endpoint = at.host + ":" + std::to_string(at.port);
  for (const std::string& url :
       {"mysql://dlock:wrong@" + endpoint + "/dlock_test",
        "mysql://dlock:dlock@" + endpoint + "/no_such_database",
        std::string("mysql://dlock:dlock@127.0.0.1:1/dlock_test?connect_timeout=2s")}) {
    INFO(url);
    auto db = dlock::make_provider(url);
    CHECK_THROWS_AS((void)db->create_lock("x").try_acquire(), dlock::connection_error);
    CHECK_THROWS_WITH((void)db->create_lock("x").try_acquire(), Contains("127.0.0.1:"));
  }
}

TEST_CASE("TLS required against a server without TLS is a connection_error", "[mysql][tls]") {
  auto db = dlock::make_provider(with("ssl=true&connect_timeout=2s"));
  CHECK_THROWS_AS((void)db->create_lock("tls").try_acquire(), dlock::connection_error);
}

TEST_CASE("a Unix socket is a host starting with '/' (URL option socket)", "[mysql]") {
  const auto socket = support::test_server_endpoint("DLOCK_TEST_MARIADB_SOCKET");
  if (!socket) {
    WARN("no socket path in the endpoints file");
    return;
  }
  auto db = dlock::make_provider("mysql://dlock:dlock@localhost/dlock_test?socket=" + *socket);
  auto held = db->create_lock(unique_name("socket")).try_acquire();
  CHECK(held);
}

TEST_CASE("fencing tokens come from a sequence the provider creates on first use",
          "[mysql][fencing]") {
  const std::string sequence = "dlock_fencing_" + std::to_string(::getpid());
  support::mariadb_client sql(server_url());
  sql.query("DROP SEQUENCE IF EXISTS " + sequence);
  auto db = dlock::make_provider(with("fencing_sequence=" + sequence));
  const auto name = unique_name("fencing");
  std::uint64_t first = 0;
  {
    auto held = db->create_lock(name).acquire(5s);
    first = held.fencing_token();
    CHECK(first > 0);
  }
  CHECK(sql.value("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
                  "DATABASE() AND TABLE_NAME = '" + sequence + "' AND TABLE_TYPE = 'SEQUENCE'") ==
        "1");
  // Another provider, the same sequence: later grants of the name get higher tokens.
  auto other = dlock::make_provider(with("fencing_sequence=" + sequence));
  CHECK(other->create_lock(name).acquire(5s).fencing_token() > first);
  sql.query("DROP SEQUENCE " + sequence);

  // Without a sequence every token is 0 (for MySQL, which has none).
  auto unfenced = dlock::make_provider(with("fencing_sequence="));
  CHECK(unfenced->create_lock(name).acquire(5s).fencing_token() == 0);
}

TEST_CASE("a semaphore's max_count is checked against the rows of live holders only, in a "
          "table the provider creates",
          "[mysql][semaphore]") {
  support::mariadb_client sql(server_url());
  const std::string table = missing_table(sql, "dlock_semaphore_slots");
  const auto url = with("semaphore_table=" + table);
  auto holders = dlock::make_provider(url);
  auto others = dlock::make_provider(url);
  const auto name = unique_name("counted");
  auto held = holders->create_semaphore(name, 3).acquire(5s);
  REQUIRE(sql.value("SELECT CONCAT(COUNT(*), ' ', MAX(max_count)) FROM " + table) == "1 3");
  CHECK_THROWS_AS(others->create_semaphore(name, 4).try_acquire(), std::invalid_argument);

  // A holder that is gone leaves its row, which no longer refuses another count, and goes
  // with the next attempt.
  kill_recorded_holder(sql, table);
  REQUIRE(wait_until([&] { return held.lost(); }));
  auto recounted = others->create_semaphore(name, 4).try_acquire();
  CHECK(recounted);
  CHECK(sql.value("SELECT CONCAT(COUNT(*), ' ', MAX(max_count)) FROM " + table) == "1 4");
  recounted.reset();
  CHECK(sql.value("SELECT COUNT(*) FROM " + table) == "0");

  // First holders of two counts at once: never both admitted (each looks again after it
  // wrote its row).
  int both = 0;
  for (int round = 0; round < 20; ++round) {
    const auto raced = name + "-race" + std::to_string(round);
    std::optional<dlock::lock_handle> two, three;
    std::thread other([&] {
      try {
        two = others->create_semaphore(raced, 2).try_acquire();
      } catch (const std::invalid_argument&) {
      }
    });
    try {
      three = holders->create_semaphore(raced, 3).try_acquire();
    } catch (const std::invalid_argument&) {
    }
    other.join();
    if (two && *two && three && *three) ++both;
  }
  CHECK(both == 0);
  sql.query("DROP TABLE " + table);

  // Without a table, counts are not checked.
  auto unchecked = dlock::make_provider(with("semaphore_table="));
  auto first = unchecked->create_semaphore(name, 2).try_acquire();
  CHECK(first);
  CHECK(unchecked->create_semaphore(name, 5).try_acquire());
}

TEST_CASE("an election's record is a row of the election table, shown only while its holder's "
          "connection holds the election's lock",
          "[mysql][election]") {
  support::mariadb_client sql(server_url());
  const std::string table = missing_table(sql, "dlock_elections");
  auto db = dlock::make_provider(with("election_table=" + table));
  dlock::election e = db->create_election(unique_name("recorded"));
  CHECK_FALSE(e.leader());  // the board creates the table before its first read
  auto lead = e.campaign("first", 5s);
  const std::string row = "SELECT CONCAT(term, ' ', value, ' ', holder = "
                          "IS_USED_LOCK(election_lock)) FROM " + table;
  CHECK(sql.value(row) == std::to_string(lead.term()) + " first 1");

  // The leader's connection ends: its row stays, and shows nobody.
  kill_recorded_holder(sql, table);
  REQUIRE(wait_until([&] { return lead.lost(); }));
  CHECK(sql.value("SELECT COUNT(*) FROM " + table) == "1");
  CHECK_FALSE(e.leader());
  CHECK_THROWS_AS(lead.proclaim("stale"), dlock::lock_lost_error);
  // The next leader's grant replaces it, and its release deletes it.
  auto next = e.campaign("second", 5s);
  CHECK(next.term() > lead.term());
  CHECK(e.leader() == dlock::leader_info{"second", next.term()});
  next.resign();
  CHECK(sql.value("SELECT COUNT(*) FROM " + table) == "0");
  sql.query("DROP TABLE " + table);

  // Without an election table the provider has no elections.
  CHECK_THROWS_AS(dlock::make_provider(with("election_table="))->create_election("x"),
                  dlock::error);
}

TEST_CASE("inspect ignores and deletes the grant rows of holders that are gone, and a break "
          "ends every lock of the killed connection",
          "[mysql][inspect]") {
  support::mariadb_client sql(server_url());
  const std::string table = missing_table(sql, "dlock_grants");
  auto holder = dlock::make_provider(with("grant_table=" + table));
  auto admin = dlock::make_provider(with("grant_table=" + table));
  const auto name = unique_name("gone");
  auto held = holder->create_lock(name).with_owner("gone soon").acquire(5s);
  REQUIRE(admin->inspect(name).holders.size() == 1);
  kill_recorded_holder(sql, table);
  REQUIRE(wait_until([&] { return held.lost(); }));
  CHECK(sql.value("SELECT COUNT(*) FROM " + table) == "1");
  CHECK(admin->inspect(name).holders.empty());
  CHECK(sql.value("SELECT COUNT(*) FROM " + table) == "0");

  // Locks taken at once share a connection: breaking one ends the other too, as lost.
  auto first = holder->create_lock(name).acquire(5s);
  auto second = holder->create_lock(name + "-beside").acquire(5s);
  admin->break_lock(name);
  REQUIRE(wait_until([&] { return first.lost() && second.lost(); }));
  // The server ends a killed connection's named locks as its thread ends, which the client
  // may notice first (CI's ASan run saw the holder still listed once).
  CHECK(wait_until([&] { return admin->inspect(name + "-beside").holders.empty(); }));
  sql.query("DROP TABLE " + table);
}

TEST_CASE("by default no grant is recorded, and inspect shows the connections that hold the "
          "name's locks",
          "[mysql][inspect]") {
  auto holder = dlock::make_provider(server_url());
  auto other = dlock::make_provider(server_url());
  auto observer = dlock::make_provider(server_url());
  const auto name = unique_name("unrecorded");
  const auto kinds_of = [&](const std::string& of) {
    std::multiset<dlock::party_kind> kinds;
    for (const auto& party : observer->inspect(of).holders) {
      CHECK(party.owner.rfind("connection ", 0) == 0);
      CHECK_FALSE(party.fencing_token);
      kinds.insert(party.kind);
    }
    return kinds;
  };
  {
    auto held = holder->create_lock(name).with_owner("not stored").acquire(5s);
    CHECK(kinds_of(name) == std::multiset{dlock::party_kind::exclusive});
  }
  CHECK(kinds_of(name).empty());
  {
    auto rw = holder->create_reader_writer_lock(name);
    auto first = rw.acquire_read(5s);
    auto second = other->create_reader_writer_lock(name).acquire_read(5s);
    CHECK(kinds_of(name) == std::multiset{dlock::party_kind::read, dlock::party_kind::read});
  }
  {
    auto written = holder->create_reader_writer_lock(name).acquire_write(5s);
    CHECK(kinds_of(name) == std::multiset{dlock::party_kind::write});
  }
  {
    auto slot = holder->create_semaphore(name, 3).acquire(5s);
    auto another = other->create_semaphore(name, 3).acquire(5s);
    CHECK(kinds_of(name) == std::multiset{dlock::party_kind::semaphore_slot,
                                          dlock::party_kind::semaphore_slot});
  }
  CHECK_THROWS_WITH(observer->list_locks(name), Catch::Matchers::Contains("grant_table"));
  // Nor can the server tell which grant a token was: asking is an error, never "false".
  CHECK_THROWS_AS(observer->create_lock(name).is_current(1), std::invalid_argument);
  CHECK_THROWS_WITH(observer->create_lock(name).is_current(1),
                    Catch::Matchers::Contains("grant_table"));
}

TEST_CASE("locks held at once share one connection",
          "[mysql]") {
  auto db = dlock::make_provider(server_url());
  const auto base = unique_name("shared");
  std::vector<dlock::lock_handle> held;
  for (int i = 0; i < 50; ++i) held.push_back(db->create_lock(base + std::to_string(i)).acquire(5s));
  // Every held lock is one IS_USED_LOCK of one connection.
  support::mariadb_client sql(server_url());
  std::string holders = "SELECT COUNT(DISTINCT h) FROM (";
  for (int i = 0; i < 50; ++i) {
    holders += (i ? " UNION ALL SELECT IS_USED_LOCK('" : "SELECT IS_USED_LOCK('") +
               dlock::mysql::server_lock_name(base + std::to_string(i)) + "') AS h";
  }
  CHECK(sql.value(holders + ") AS t") == "1");
}
