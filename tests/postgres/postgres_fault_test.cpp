// dlock::postgres when the server ends, restarts or stops answering while locks are held, and
// when a client goes silent (a stopped process: the server's TCP sees nothing wrong).
// These pause and restart the shared server, so they run alone (RUN_SERIAL) and leave it up.
#include <signal.h>

#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it
#include <vector>

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "server_faults.hpp"
#include "support.hpp"
#include "test_servers.hpp"
#include "timing.hpp"

using namespace std::chrono_literals;
using support::acquires_again;
using support::seconds_since;
using support::unique_name;
using support::wait_until;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_POSTGRES"); }

std::string url_named(const std::string& application, const std::string& options = "") {
  return server_url() + "?application_name=" + application + options;
}

std::shared_ptr<dlock::provider> provider_named(const std::string& application,
                                                const std::string& options = "") {
  return dlock::make_provider(url_named(application, options));
}

// The one line psql prints for `query`, or nothing when it printed none in time.
std::optional<std::string> psql_line(const std::string& query) {
  support::child_process psql({"/usr/bin/psql", "-X", "-q", "-A", "-t", "-c", query, server_url()});
  auto answer = psql.read_line(10s);
  psql.wait(10s);
  return answer;
}

// How many sessions of `application` wait for a lock at the server.
int sessions_waiting_for_a_lock(const std::string& application) {
  const auto answer = psql_line(
      "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
      "application_name = '" + application + "'");
  return answer ? std::stoi(*answer) : -1;
}

// The pids of `application`'s sessions at the server whose last statement was a LISTEN,
// separated by commas; empty when there is none.
std::string listening_pids(const std::string& application) {
  return psql_line(
             "SELECT coalesce(string_agg(pid::text, ',' ORDER BY pid), '') FROM pg_stat_activity "
             "WHERE query ILIKE 'LISTEN%' AND application_name = '" + application + "'")
      .value_or("");
}

// Requests a stop when destroyed: ends the waits of a failing test before their futures join.
struct stop_when_done {
  std::stop_source& source;
  ~stop_when_done() { source.request_stop(); }
};


}  // namespace

TEST_CASE("pg_terminate_backend of the holder's session marks every handle on it lost",
          "[postgres][fault]") {
  const auto application = unique_name("terminated");
  // keepalive 30 s: its probe comes every 15 s, so the loss is heard from the socket at once,
  // on the caller-driven sessions (where these uncontended acquires are) as on the pool's.
  auto pg = provider_named(application, "&keepalive=30s");
  const auto name = unique_name("terminated");
  auto held = pg->create_lock(name).acquire();
  auto neighbour = pg->create_lock(name + "-2").acquire();
  auto read = pg->create_reader_writer_lock(name + "-rw").acquire_read();
  auto slot = pg->create_semaphore(name, 2).acquire();

  support::test_servers({"kill-connections", "postgres", application});

  CHECK(wait_until([&] { return held.lost() && neighbour.lost() && read.lost() && slot.lost(); },
                   5s));
  auto other = provider_named(unique_name("other"));
  CHECK(other->create_lock(name).try_acquire());  // the server freed it with the session
  held.release();                                 // a no-op on a dead session, no throw
  CHECK(acquires_again(*pg, name + "-again"));
}

TEST_CASE("a server restart while held is a loss; acquires work once it is back",
          "[postgres][fault]") {
  auto pg = provider_named(unique_name("restart"));
  const auto name = unique_name("restart");
  auto held = pg->create_lock(name).acquire();
  auto waiter_provider = provider_named(unique_name("restart-waiter"));
  auto waiting = waiter_provider->create_lock(name).async_acquire(60s, {},
                                                                  boost::asio::use_future);
  support::undo_test_servers_fault restart({"restart", "postgres"});
  restart.now();

  CHECK(wait_until([&] { return held.lost(); }, 10s));
  // The waiter's session died too: its acquire fails as a connection error, never hangs.
  REQUIRE(waiting.wait_for(30s) == std::future_status::ready);
  CHECK_THROWS_AS(waiting.get(), dlock::connection_error);
  CHECK(acquires_again(*pg, name));
}

TEST_CASE("a server that stops answering marks held locks lost once a keepalive goes a period "
          "unanswered",
          "[postgres][fault][timing]") {
  auto pg = provider_named(unique_name("paused"), "&keepalive=1s");
  const auto name = unique_name("paused");
  auto held = pg->create_lock(name).acquire();
  support::undo_test_servers_fault resume({"resume", "postgres"});
  support::test_servers({"pause", "postgres"});
  const auto paused = std::chrono::steady_clock::now();
  REQUIRE(wait_until([&] { return held.lost(); }, 10s));
  // A probe unanswered for one period (1 s), judged at a tick every half period, plus
  // scheduling slack on a loaded machine.
  CHECK(std::chrono::steady_clock::now() - paused < support::latency_bound(2500ms));
  resume.now();
  CHECK(acquires_again(*pg, unique_name("resumed")));
  // The given-up session was closed, so the server freed the lock although `held` still
  // exists: nothing stays locked on the server that our books call lost.
  auto other = provider_named(unique_name("paused-other"));
  CHECK(acquires_again(*other, name));
}

TEST_CASE("a stop request ends a wait even when the server does not answer the cancel",
          "[postgres][fault]") {
  const auto name = unique_name("paused-wait");
  auto holder = provider_named(unique_name("paused-holder"));
  auto held = holder->create_lock(name).acquire();
  auto waiter = provider_named(unique_name("paused-waiter"), "&connect_timeout=1s");
  std::stop_source stop;
  auto waiting = waiter->create_lock(name).async_try_acquire(std::chrono::hours(1),
                                                             stop.get_token(),
                                                             boost::asio::use_future);
  REQUIRE(wait_until([&] { return waiter->metrics().waits == 1; }, 10s));
  support::undo_test_servers_fault resume({"resume", "postgres"});
  support::test_servers({"pause", "postgres"});
  stop.request_stop();
  // The cancel request cannot be served; the session is given up after connect_timeout.
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  CHECK_FALSE(waiting.get());
  resume.now();
  CHECK(acquires_again(*waiter, unique_name("after-pause")));
}

TEST_CASE("a timeout ends an acquire whose attempt the server never answers",
          "[postgres][fault]") {
  auto pg = provider_named(unique_name("paused-attempt"), "&connect_timeout=1s");
  auto held = pg->create_lock(unique_name("paused-attempt-held")).acquire();  // a session is up
  support::undo_test_servers_fault resume({"resume", "postgres"});
  support::test_servers({"pause", "postgres"});
  auto attempt = std::async(std::launch::async, [&] {
    return pg->create_lock(unique_name("paused-attempt")).try_acquire(200ms).has_value();
  });
  // The attempt is a connection_error (never "not acquired") within connect_timeout.
  REQUIRE(attempt.wait_for(5s) == std::future_status::ready);
  CHECK_THROWS_AS(attempt.get(), dlock::connection_error);
  CHECK(held.lost());  // its session did not answer either
  resume.now();
  CHECK(acquires_again(*pg, unique_name("after-paused-attempt")));
}

TEST_CASE("a try_acquire without timeout that the server never answers fails, never hangs",
          "[postgres][fault]") {
  // connect_timeout far off, and no deadline: only the keepalive can end the attempt.
  auto pg = provider_named(unique_name("paused-try"), "&keepalive=1s&connect_timeout=1h");
  (void)pg->create_lock(unique_name("paused-try-warm")).acquire();  // leaves an empty session
  support::undo_test_servers_fault resume({"resume", "postgres"});
  support::test_servers({"pause", "postgres"});
  // Asynchronous: a future of use_future does not block in its destructor if this fails.
  auto attempt = pg->create_lock(unique_name("paused-try")).async_try_acquire(
      std::chrono::nanoseconds::zero(), {}, boost::asio::use_future);
  REQUIRE(attempt.wait_for(10s) == std::future_status::ready);
  CHECK_THROWS_AS(attempt.get(), dlock::connection_error);
  resume.now();
  CHECK(acquires_again(*pg, unique_name("after-paused-try")));
}

TEST_CASE("the server frees the lock of a holder that went silent within its server_lease, and "
          "a contender gets it with a higher fencing token",
          "[postgres][fault][multiprocess]") {
  // A stopped process is a silent client whose TCP path stays healthy (its kernel answers
  // keepalives and acknowledges data): only the server_lease (idle_session_timeout) ends it.
  auto contender = provider_named(unique_name("silent-contender"), "&keepalive=1s");
  const auto outcome = support::silence_holder(
      url_named(unique_name("silent-holder"), "&keepalive=1s&server_lease=3s"), *contender,
      unique_name("silent-holder"));
  CHECK(outcome.contender_token > outcome.holder_token);
  // The server frees it server_lease (3 s) after the holder's last keepalive, which came at
  // most half a period (0.5 s) before the stop: never before the holder's own lost bound
  // (1.5 periods), and within the lease.
  INFO("granted " << outcome.seconds_to_grant << " s after the holder stopped");
  CHECK(outcome.seconds_to_grant >= 1.5);
  CHECK(outcome.seconds_to_grant < 4.5);
  CHECK(outcome.holder_heard == "lost");  // and the holder hears it once it runs again
}

TEST_CASE("a grant to a waiter that went silent is freed within its server_lease, and the next "
          "waiter gets the lock",
          "[postgres][fault][multiprocess]") {
  const auto name = unique_name("silent-waiter");
  auto holder = provider_named(unique_name("silent-waiter-holder"));
  std::optional held{holder->create_lock(name).acquire()};
  const auto waiter_application = unique_name("silent-waiter");
  // keepalive 1 s: server_lease 2 s (2 × keepalive).
  support::child_process waiter({support::helper_path(), "hold",
                                 url_named(waiter_application, "&keepalive=1s"), name, "lock"});
  REQUIRE(wait_until([&] { return sessions_waiting_for_a_lock(waiter_application) == 1; }, 10s));
  waiter.signal(SIGSTOP);  // its pg_advisory_lock stays queued at the server
  auto contender = provider_named(unique_name("silent-waiter-next"), "&keepalive=1s");
  auto waiting = contender->create_lock(name).async_acquire(60s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return contender->metrics().waits == 1; }, 10s));

  const std::uint64_t holder_token = held->fencing_token();
  held.reset();  // the server grants the lock to the stopped waiter first
  const auto released = std::chrono::steady_clock::now();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  const double took = seconds_since(released);
  auto granted = waiting.get();
  // The stopped waiter's grant took a token: the next one is higher still.
  CHECK(granted.fencing_token() >= holder_token + 2);
  INFO("granted " << took << " s after the release");
  CHECK(took >= 1.0);  // it really waited for the abandoned grant
  CHECK(took < 3.5);   // server_lease (2 s) after the grant
  waiter.signal(SIGCONT);
}

TEST_CASE("waits on a server that stops answering fail as connection_error within 1.5 keepalive "
          "periods, with or without a timeout, sync and async",
          "[postgres][fault]") {
  const auto name = unique_name("paused-waits");
  auto holder = provider_named(unique_name("paused-waits-holder"));
  std::vector<dlock::lock_handle> held;
  for (int i = 0; i < 5; ++i) {
    held.push_back(holder->create_lock(name + std::to_string(i)).acquire());
  }
  // connect_timeout far off: only the keepalive can end these waits.
  auto pg = provider_named(unique_name("paused-waits"), "&keepalive=1s&connect_timeout=1h");
  // A keepalive longer than its timeout: its deadline passes while the server is silent.
  auto slow = provider_named(unique_name("paused-waits-slow"), "&keepalive=3s&connect_timeout=1h");
  std::stop_source cleanup;
  auto lock = [&](int i) { return (i == 4 ? slow : pg)->create_lock(name + std::to_string(i)); };
  // What each wait ended with: "connection_error", "obtained", "not obtained" or another error.
  using outcome = std::future<std::string>;
  auto sync_wait = [&](int i, std::chrono::nanoseconds timeout) {
    return std::async(std::launch::async, [&, i, timeout]() -> std::string {
      try {
        if (timeout == dlock::forever) {
          (void)lock(i).acquire(dlock::forever, cleanup.get_token());
          return "obtained";
        }
        return lock(i).try_acquire(timeout, cleanup.get_token()) ? "obtained" : "not obtained";
      } catch (const dlock::connection_error&) {
        return "connection_error";
      } catch (const std::exception& e) {
        return e.what();
      }
    });
  };
  auto async_wait = [&](int i, std::chrono::nanoseconds timeout) {
    return std::async(std::launch::async, [&, i, timeout]() -> std::string {
      auto future = lock(i).async_acquire(timeout, cleanup.get_token(), boost::asio::use_future);
      try {
        (void)future.get();
        return "obtained";
      } catch (const dlock::connection_error&) {
        return "connection_error";
      } catch (const dlock::timeout_error&) {
        return "not obtained";
      } catch (const std::exception& e) {
        return e.what();
      }
    });
  };
  std::vector<outcome> waits;
  waits.push_back(sync_wait(0, dlock::forever));
  waits.push_back(sync_wait(1, std::chrono::hours(1)));
  waits.push_back(async_wait(2, dlock::forever));
  waits.push_back(async_wait(3, std::chrono::hours(1)));
  // Its deadline passes while the server is silent, before its keepalive gives up: still a
  // connection_error (the server's lock_timeout never answered), not "not obtained".
  waits.push_back(sync_wait(4, 2s));
  support::undo_test_servers_fault resume({"resume", "postgres"});
  stop_when_done stop_waits{cleanup};  // before the resume, on the way out of a failed test
  REQUIRE(wait_until([&] { return pg->metrics().waits == 4 && slow->metrics().waits == 1; },
                     10s));

  support::test_servers({"pause", "postgres"});
  const auto paused = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < waits.size(); ++i) {
    INFO("wait " << i);
    REQUIRE(waits[i].wait_for(10s) == std::future_status::ready);
    const double took = seconds_since(paused);
    CHECK(waits[i].get() == "connection_error");
    // A whole period without an answer, judged every half period, plus slack for a busy
    // machine: 1.5 s for keepalive=1s, 4.5 s for the slow provider's 3 s.
    INFO("failed " << took << " s after the pause");
    CHECK(took < (i == 4 ? 6.0 : 3.0));
  }
  resume.now();
  CHECK(acquires_again(*pg, unique_name("after-paused-waits")));
}

TEST_CASE("the server drops the queued wait of a waiter whose process died within a keepalive "
          "period",
          "[postgres][fault][multiprocess]") {
  // client_connection_check_interval: a waiting backend looks at its socket, so a closed
  // connection does not keep its place in the lock's queue until a grant finds it gone.
  const auto name = unique_name("dead-waiter");
  auto holder = provider_named(unique_name("dead-waiter-holder"));
  auto held = holder->create_lock(name).acquire();
  const auto waiter_application = unique_name("dead-waiter");
  support::child_process waiter({support::helper_path(), "hold",
                                 url_named(waiter_application, "&keepalive=1s"), name, "lock"});
  REQUIRE(wait_until([&] { return sessions_waiting_for_a_lock(waiter_application) == 1; }, 10s));
  waiter.signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  CHECK(wait_until([&] { return sessions_waiting_for_a_lock(waiter_application) == 0; }, 5s));
  INFO("dropped " << seconds_since(killed) << " s after the waiter died");
  CHECK(seconds_since(killed) < 2.0);
}

TEST_CASE("an observer's LISTEN session is made again after the server ended it, and the "
          "observation goes on",
          "[postgres][fault][election]") {
  const auto application = unique_name("listener");
  auto observer_side = provider_named(application);
  const auto name = unique_name("listened");
  std::mutex mutex;
  std::optional<dlock::leader_info> last;
  auto observation = observer_side->create_election(name).observe(
      [&](const std::optional<dlock::leader_info>& leader) {
        std::lock_guard lock(mutex);
        last = leader;
      });
  std::string before;
  REQUIRE(wait_until([&] { return !(before = listening_pids(application)).empty(); }, 10s));

  support::test_servers({"kill-connections", "postgres", application});
  // A new session (another pid) listens again: the pause before it is a second.
  std::string after;
  CHECK(wait_until(
      [&] {
        after = listening_pids(application);
        return !after.empty() && after != before;
      },
      10s));
  auto campaigner = provider_named(unique_name("campaigner"));
  auto lead = campaigner->create_election(name).campaign("after the break", 10s);
  const dlock::leader_info expected{"after the break", lead.term()};
  CHECK(wait_until(
      [&] {
        std::lock_guard lock(mutex);
        return last == expected;
      },
      10s));
}
