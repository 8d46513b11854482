// dlock::postgres against the real server: bad input, unreachable endpoints, sessions shared by
// many locks, the re-entrancy trap, and a real psql session on the same key. What a withdrawn
// wait leaves and writer preference are in the contract suite (contract/cancel_test.cpp,
// reader_writer_test.cpp).
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using dlock::postgres::advisory_key;
using support::unique_name;
using support::wait_until;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_POSTGRES"); }

std::shared_ptr<dlock::postgres::provider> provider_named(const std::string& application,
                                                          std::uint32_t locks_per_session = 0) {
  return std::make_shared<dlock::postgres::provider>(dlock::postgres::options{
      .connection_string = server_url() + "?application_name=" + application,
      .locks_per_session = locks_per_session});
}

// Sessions the server has for clients that connected as `application`.
int sessions_of(const std::string& application) {
  pqxx::connection connection(server_url());
  pqxx::nontransaction query(connection);
  return query.exec1("SELECT count(*) FROM pg_stat_activity WHERE application_name = " +
                     query.quote(application))[0]
      .as<int>();
}

// A psql process reading statements from its stdin, one answer line per statement.
class psql_session {
 public:
  psql_session() : psql_({"/usr/bin/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                          server_url()}) {}
  std::optional<std::string> run(const std::string& statement) {
    psql_.write_stdin(statement + ";\n");
    return psql_.read_line(30s);
  }

 private:
  support::child_process psql_;
};

}  // namespace

TEST_CASE("bad URLs and options are invalid_argument naming the field", "[postgres]") {
  const std::string base = server_url();
  auto rejects = [](const std::string& url, const std::string& field) {
    INFO(url);
    CHECK_THROWS_WITH(dlock::make_provider(url), Catch::Contains(field));
    CHECK_THROWS_AS(dlock::make_provider(url), std::invalid_argument);
  };
  rejects(base + "?keepalive=banana", "keepalive");
  rejects(base + "?keepalive=0s", "keepalive");
  rejects(base + "?connect_timeout=0", "connect_timeout");
  rejects(base + "?semaphore_retry=-1s", "semaphore_retry");
  rejects(base + "?release_timeout=5", "release_timeout");
  rejects(base + "?fencing_sequence=x;drop", "fencing_sequence");
  rejects(base + "?owners_table=x;drop", "owners_table");
  rejects(base + "?locks_per_session=-1", "locks_per_session");
  rejects(base + "?no_such_option=1", "no_such_option");
  rejects("postgres://dlock:pw@127.0.0.1:99999/db", "port");
  // Values libpq would reject only when connecting.
  rejects(base + "?sslmode=bogus", "sslmode");
  rejects(base + "?target_session_attrs=whichever", "target_session_attrs");
  rejects(base + "?keepalives_idle=soon", "keepalives_idle");
  // The server's side of the lease never ends before the client's lost bound (1.5 periods).
  rejects(base + "?keepalive=2s&server_lease=2s", "server_lease");
  rejects(base + "?keepalive=2s&server_tcp_user_timeout=2999ms", "server_tcp_user_timeout");
  rejects(base + "?keepalive=10s&server_keepalives_idle=1s&server_keepalives_interval=1s",
          "server_keepalives_interval");
  rejects(base + "?server_keepalives_count=many", "server_keepalives_count");
  CHECK_NOTHROW(
      dlock::make_provider(base + "?keepalive=2s&server_lease=3s&server_keepalives_count=9"));
  CHECK_THROWS_AS(dlock::postgres::provider({.connection_string = ""}), std::invalid_argument);
  CHECK_THROWS_WITH(dlock::postgres::provider({.connection_string = "host=x password='hunter2"}),
                    Catch::Contains("connection_string") && !Catch::Contains("hunter2"));
  auto pg = dlock::make_provider(base + "?keepalive=2s&sslmode=disable&application_name=t");
  CHECK(pg->scheme() == "postgres");
  CHECK_THROWS_AS(pg->create_semaphore(unique_name("big"), 1001).try_acquire(),
                  std::invalid_argument);
}

namespace {

// A message repeats itself when some 24 characters of it come twice (libpq writes one reason
// per address and per TLS try).
bool says_something_twice(const std::string& message) {
  constexpr std::size_t span = 24;
  for (std::size_t at = 0; at + span <= message.size(); ++at) {
    if (message.find(message.substr(at, span), at + 1) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("an unreachable server, an unknown user or database is a connection_error naming "
          "the endpoint once, saying why once and never the password, within the connect "
          "timeout",
          "[postgres]") {
  const auto server = support::endpoint_hosts(server_url()).front();
  const std::string at = "127.0.0.1:" + std::to_string(server.port);
  struct endpoint_case {
    std::string url, fragment;
  };
  for (const auto& [url, fragment] : std::vector<endpoint_case>{
           {"postgres://dlock:s3cret-pw@127.0.0.1:1/dlock_test", "127.0.0.1:1"},
           // Two servers, one reason (libpq writes it for each, as for each address of a name
           // and each TLS try).
           {"postgres://dlock:s3cret-pw@127.0.0.1:1,127.0.0.1:2/dlock_test",
            "127.0.0.1,127.0.0.1:1,2"},
           {"postgres://nobody:s3cret-pw@" + at + "/dlock_test", at},
           {"postgres://dlock:s3cret-pw@" + at + "/no_such_database", "no_such_database"},
           // A TEST-NET-1 address (RFC 5737): never answers, so only the timeout ends it.
           {"postgres://dlock:s3cret-pw@192.0.2.1:5432/dlock_test", "192.0.2.1:5432"}}) {
    INFO(url);
    auto pg = dlock::make_provider(url + "?connect_timeout=1s");
    const auto started = std::chrono::steady_clock::now();
    std::string message;
    try {
      (void)pg->create_lock("x").try_acquire();
      FAIL("no connection_error");
    } catch (const dlock::connection_error& e) {
      message = e.what();
    }
    CHECK(std::chrono::steady_clock::now() - started < 3s);
    CHECK_THAT(message, Catch::Contains(fragment) && !Catch::Contains("s3cret-pw"));
    CHECK_FALSE(says_something_twice(message));
  }
}

TEST_CASE("locks obtained at once share one session, and a thousand held locks need one",
          "[postgres][multiplexing]") {
  const auto application = unique_name("many");
  auto pg = provider_named(application);
  std::vector<dlock::lock_handle> held;
  for (int i = 0; i < 1000; ++i) {
    auto handle = pg->create_lock(application + "-" + std::to_string(i)).try_acquire();
    REQUIRE(handle);
    held.push_back(std::move(*handle));
  }
  CHECK(sessions_of(application) == 1);
  held.clear();
  auto one_per_lock = provider_named(application + "-single", 1);
  auto a = one_per_lock->create_lock(unique_name("a")).acquire();
  auto b = one_per_lock->create_lock(unique_name("b")).acquire();
  CHECK(sessions_of(application + "-single") == 2);
}

TEST_CASE("a session never grants a name it holds to a second local contender",
          "[postgres][multiplexing]") {
  // Advisory locks are re-entrant per session: asking the holder's session again would
  // succeed. Every primitive must send the second request elsewhere and see it taken.
  auto pg = provider_named(unique_name("reentry"));
  const auto name = unique_name("reentry");
  auto held = pg->create_lock(name).acquire();
  CHECK_FALSE(pg->create_lock(name).try_acquire());
  CHECK_FALSE(pg->create_lock(name).try_acquire(50ms));
  CHECK_FALSE(pg->create_reader_writer_lock(name).try_acquire_read());
  auto slot = pg->create_semaphore(name, 1).acquire();
  CHECK_FALSE(pg->create_semaphore(name, 1).try_acquire());
  CHECK_FALSE(pg->create_semaphore(name, 1).try_acquire(50ms));
  auto write = pg->create_reader_writer_lock(name + "-rw").acquire_write();
  CHECK_FALSE(pg->create_reader_writer_lock(name + "-rw").try_acquire_write());
  held.release();
  CHECK(pg->create_lock(name).try_acquire());
}

namespace {

// Runs `attempt` from several threads at once, many times each; returns the most handles of one
// name held at the same moment. Attempts on one provider share its sessions, where advisory
// locks are re-entrant.
int most_holders_at_once(const std::vector<std::function<std::optional<dlock::lock_handle>()>>&
                             attempts) {
  std::atomic<int> holding{0}, most{0};
  std::vector<std::thread> threads;
  for (const auto& attempt : attempts) {
    threads.emplace_back([&] {
      for (int round = 0; round < 100; ++round) {
        auto handle = attempt();
        if (!handle) continue;
        const int now = ++holding;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::yield();
        --holding;
        handle->release();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return most.load();
}

}  // namespace

TEST_CASE("concurrent local attempts of one name never both get it from one session",
          "[postgres][multiplexing]") {
  auto pg = provider_named(unique_name("inflight"));
  const auto name = unique_name("inflight");
  SECTION("try_acquire of one lock from four threads") {
    std::vector<std::function<std::optional<dlock::lock_handle>()>> attempts(
        4, [&] { return pg->create_lock(name).try_acquire(); });
    CHECK(most_holders_at_once(attempts) == 1);
  }
  SECTION("a lock and the reader-writer lock of the same name, which share the advisory key") {
    std::vector<std::function<std::optional<dlock::lock_handle>()>> attempts{
        [&] { return pg->create_lock(name).try_acquire(); },
        [&] { return pg->create_reader_writer_lock(name).try_acquire_write(); },
        [&] { return pg->create_lock(name).try_acquire(); },
        [&] { return pg->create_reader_writer_lock(name).try_acquire_write(); }};
    CHECK(most_holders_at_once(attempts) == 1);
  }
}

TEST_CASE("a wait longer than lock_timeout can hold waits and gets the lock",
          "[postgres][wait]") {
  // 30 days of milliseconds is past the INT_MAX the server takes for lock_timeout.
  const auto name = unique_name("days");
  auto waiter = provider_named(name + "-waiter");
  std::optional held{provider_named(name + "-holder")->create_lock(name).acquire()};
  auto waiting = waiter->create_lock(name).async_try_acquire(std::chrono::days(30), {},
                                                             boost::asio::use_future);
  REQUIRE(wait_until([&] { return waiter->metrics().waits == 1; }, 10s));
  held.reset();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  CHECK(waiting.get());
}

TEST_CASE("a psql session holding the advisory key excludes dlock, and dlock excludes psql",
          "[postgres][interop]") {
  const auto name = unique_name("psql");  // hashed: a bigint key
  const auto key = advisory_key::from_name(name);
  auto pg = provider_named(unique_name("interop"));

  psql_session psql;
  REQUIRE(psql.run("SELECT pg_advisory_lock(" + std::to_string(key.key()) + "), 'held'") ==
          "|held");
  CHECK_FALSE(pg->create_lock(name).try_acquire());
  CHECK_THROWS_AS(pg->create_lock(name).acquire(100ms), dlock::timeout_error);
  auto waiting = pg->create_lock(name).async_acquire(30s, {}, boost::asio::use_future);
  REQUIRE(psql.run("SELECT pg_advisory_unlock(" + std::to_string(key.key()) + ")") == "t");
  REQUIRE(waiting.wait_for(30s) == std::future_status::ready);
  auto held = waiting.get();
  CHECK(psql.run("SELECT pg_try_advisory_lock(" + std::to_string(key.key()) + ")") == "f");
  held.release();
  CHECK(psql.run("SELECT pg_try_advisory_lock(" + std::to_string(key.key()) + ")") == "t");

  // A short ASCII name is the int4 pair of the .NET packing; psql sees the same pair.
  const std::string pair_name = "job" + std::to_string(::getpid() % 1000);
  const auto pair = advisory_key::from_name(pair_name);
  REQUIRE(pair.is_pair());
  auto job = pg->create_lock(pair_name).acquire();
  CHECK(psql.run("SELECT pg_try_advisory_lock(" + std::to_string(pair.high()) + ", " +
                 std::to_string(pair.low()) + ")") == "f");
  auto explicit_key = pg->create_lock(advisory_key(pair.high(), pair.low()));
  CHECK_FALSE(explicit_key.try_acquire());
}

TEST_CASE("fencing tokens come from a sequence the provider creates on first use",
          "[postgres][fencing]") {
  const std::string sequence = "dlock_fencing_test_" + std::to_string(::getpid());
  pqxx::connection connection(server_url());
  pqxx::nontransaction query(connection);
  query.exec("DROP SEQUENCE IF EXISTS " + sequence);
  auto pg = dlock::make_provider(server_url() + "?fencing_sequence=" + sequence);
  const auto name = unique_name("fenced");
  std::uint64_t previous = 0;
  for (int i = 0; i < 3; ++i) {
    auto held = pg->create_lock(name).acquire();
    CHECK(held.fencing_token() > previous);
    previous = held.fencing_token();
  }
  CHECK(query.exec1("SELECT last_value FROM " + sequence)[0].as<std::uint64_t>() == previous);
  query.exec("DROP SEQUENCE " + sequence);

  auto unfenced = dlock::make_provider(server_url() + "?fencing_sequence=");
  CHECK(unfenced->create_lock(name).acquire().fencing_token() == 0);
}

TEST_CASE("a statement_timeout from the connection string does not cut a wait short",
          "[postgres]") {
  const auto name = unique_name("statement-timeout");
  auto holder = provider_named(unique_name("st-holder"));
  auto held = holder->create_lock(name).acquire();
  auto waiter = dlock::make_provider(server_url() + "?options=-c%20statement_timeout%3D50");
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(waiter->create_lock(name).acquire(600ms), dlock::timeout_error);
  CHECK(std::chrono::steady_clock::now() - started >= 600ms);
}

TEST_CASE("a healthy holder keeps its lock past the server_lease: its keepalive resets it",
          "[postgres][lease]") {
  // keepalive 1 s: the server ends a session idle for 2 s (idle_session_timeout), which the
  // keepalive's round trip every half period never lets happen.
  auto pg = dlock::make_provider(server_url() + "?application_name=" + unique_name("lease") +
                                 "&keepalive=1s");
  const auto name = unique_name("lease");
  auto held = pg->create_lock(name).acquire();
  CHECK_FALSE(wait_until([&] { return held.lost(); }, 3s));
  CHECK_FALSE(provider_named(unique_name("lease-other"))->create_lock(name).try_acquire());
}
