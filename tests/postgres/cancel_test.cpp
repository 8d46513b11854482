// How a stop request reaches a PostgreSQL wait (postgres/src/cancel_request.hpp): as
// pg_cancel_backend over the provider's control session, and as PQcancel when that session
// cannot be used; and, end to end, a stopped blocking acquire (which waits on the caller's
// thread) sends its cancel over the control session.
#include <poll.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <catch2/catch.hpp>
#include <libpq-fe.h>
#include <pqxx/pqxx>

#include <dlock/dlock.hpp>

#include "blocking_libpq.hpp"
#include "cancel_request.hpp"
#include "connection_string.hpp"
#include "sql.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using namespace dlock::postgres::detail;
using support::unique_name;
using support::wait_until;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_POSTGRES"); }

// One libpq connection driven by this thread (blocking_libpq.hpp).
class connection {
 public:
  explicit connection(const dlock::postgres::options& opts) {
    std::string why;
    conn_ = connect_blocking(connection_parameters(opts), "the test server",
                             std::chrono::steady_clock::now() + 10s, why);
    REQUIRE(conn_ != nullptr);
  }
  ~connection() { PQfinish(conn_); }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  PGconn* get() const { return conn_; }
  query_result run(const std::string& sql) {
    return send_blocking(conn_, "the test server", sql, {},
                         std::chrono::steady_clock::now() + 10s);
  }

  // The answer to a statement sent with PQsendQuery, within 10 s.
  query_result answer() {
    query_result r;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (true) {
      while (!PQisBusy(conn_)) {
        PGresult* result = PQgetResult(conn_);
        if (!result) return r;
        add_result(r, result);
      }
      pollfd fd{PQsocket(conn_), POLLIN, 0};
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      if (::poll(&fd, 1, 100) > 0) REQUIRE(PQconsumeInput(conn_) == 1);
    }
  }

 private:
  PGconn* conn_ = nullptr;
};

dlock::postgres::options test_server() { return {.connection_string = server_url()}; }

// A waiter blocked in pg_advisory_lock behind a holder of the same key at the server.
struct blocked_wait {
  connection holder{test_server()};
  connection waiter{test_server()};
  std::string backend_start;

  blocked_wait() {
    const std::string key = std::to_string(std::hash<std::string>{}(unique_name("cancel")) >> 2);
    REQUIRE(holder.run("SELECT pg_advisory_lock(" + key + ")").ok());
    const query_result started = waiter.run(own_backend_start_sql());
    REQUIRE(started.value());
    backend_start = *started.value();
    REQUIRE(PQsendQuery(waiter.get(), ("SELECT pg_advisory_lock(" + key + ")").c_str()) == 1);
    REQUIRE(PQflush(waiter.get()) == 0);
    const std::string blocked =
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " +
        std::to_string(PQbackendPID(waiter.get()));
    REQUIRE(wait_until([&] { return holder.run(blocked).value() == "1"; }, 10s));
  }
};

// Sends the cancel and waits for its thread's report of the route it took.
cancel_route cancel_through(blocked_wait& wait, const canceller& by) {
  auto route = std::make_shared<std::promise<cancel_route>>();
  auto routed = route->get_future();
  REQUIRE(send_cancel(wait.waiter.get(), by, wait.backend_start,
                      std::make_shared<std::atomic<bool>>(false),
                      [route](cancel_route taken) { route->set_value(taken); }));
  REQUIRE(routed.wait_for(10s) == std::future_status::ready);
  return routed.get();
}

}  // namespace

TEST_CASE("a stop's cancel goes as pg_cancel_backend over the control session",
          "[postgres][cancel]") {
  blocked_wait wait;
  CHECK(cancel_through(wait, control_canceller(test_server(), "the test server")) ==
        cancel_route::canceller);
  CHECK(wait.waiter.answer().sqlstate == "57014");  // canceling statement due to user request
}

TEST_CASE("a stop's cancel falls back to PQcancel when the control session cannot be used",
          "[postgres][cancel]") {
  blocked_wait wait;
  SECTION("the control session cannot connect") {
    // Port 1 refuses at once: the control session is never opened.
    const auto unreachable = control_canceller(
        {.connection_string = "postgresql://127.0.0.1:1/nothing?connect_timeout=5"},
        "a closed port");
    CHECK(cancel_through(wait, unreachable) == cancel_route::pq_cancel);
  }
  SECTION("the session's backend_start does not match (the pid went to another session)") {
    wait.backend_start = "1999-01-01 00:00:00+00";
    CHECK(cancel_through(wait, control_canceller(test_server(), "the test server")) ==
          cancel_route::pq_cancel);
  }
  CHECK(wait.waiter.answer().sqlstate == "57014");
}

TEST_CASE("a stopped blocking acquire cancels its wait over the provider's control session",
          "[postgres][cancel]") {
  const auto application = unique_name("stop-route");
  auto waiter = dlock::make_provider(server_url() + "?application_name=" + application);
  auto holder = dlock::make_provider(server_url());
  const auto name = unique_name("stopped");
  auto held = holder->create_lock(name).acquire(10s);
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] {
    return waiter->create_lock(name).try_acquire(60s, stop.get_token());
  });
  pqxx::connection observer(server_url());
  auto count_of = [&](const std::string& condition) {
    pqxx::nontransaction query(observer);
    return query
        .exec1("SELECT count(*) FROM pg_stat_activity WHERE application_name = " +
               query.quote(application) + " AND " + condition)[0]
        .as<int>();
  };
  // Blocked at the server in the wait (on the caller's thread: the acquire has not returned).
  REQUIRE(wait_until([&] { return count_of("wait_event_type = 'Lock'") == 1; }, 10s));
  stop.request_stop();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(waiting.get().has_value());
  // The control session is kept open, its last statement the cancel. The stop may have been
  // answered at stop_grace, before the control session (opened at this first stop) was up.
  CHECK(wait_until([&] { return count_of("query LIKE 'SELECT pg_cancel_backend(pid)%'") == 1; },
                   10s));
  // Nothing is left waiting at the server, and the name is free once its holder lets go.
  CHECK(wait_until([&] { return count_of("wait_event_type = 'Lock'") == 0; }, 10s));
  held.release();
  CHECK(holder->create_lock(name).try_acquire(10s).has_value());
}
