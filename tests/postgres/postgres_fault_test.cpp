// dlock::postgres when the server ends, restarts or stops answering while locks are held.
// These pause and restart the shared server, so they run alone (RUN_SERIAL) and leave it up.
#include <chrono>
#include <future>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

std::shared_ptr<dlock::provider> provider_named(const std::string& application,
                                                const std::string& options = "") {
  return dlock::make_provider(support::require_test_server_endpoint("DLOCK_TEST_POSTGRES") +
                              "?application_name=" + application + options);
}

// The server answers a fresh acquire again, however long it takes to come back.
bool acquires_again(dlock::provider& pg, const std::string& name) {
  return wait_until(
      [&] {
        try {
          return pg.create_lock(name).try_acquire().has_value();
        } catch (const dlock::connection_error&) {
          return false;
        }
      },
      30s);
}

}  // namespace

TEST_CASE("pg_terminate_backend of the holder's session marks every handle on it lost",
          "[postgres][fault]") {
  const auto application = unique_name("terminated");
  auto pg = provider_named(application);
  const auto name = unique_name("terminated");
  auto held = pg->create_lock(name).acquire();
  auto neighbour = pg->create_lock(name + "-2").acquire();
  auto read = pg->create_reader_writer_lock(name + "-rw").acquire_read();
  auto slot = pg->create_semaphore(name, 2).acquire();

  support::test_servers({"kill-connections", "postgres", application});

  CHECK(wait_until([&] { return held.lost() && neighbour.lost() && read.lost() && slot.lost(); },
                   10s));
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
          "[postgres][fault]") {
  auto pg = provider_named(unique_name("paused"), "&keepalive=1s");
  const auto name = unique_name("paused");
  auto held = pg->create_lock(name).acquire();
  support::undo_test_servers_fault resume({"resume", "postgres"});
  support::test_servers({"pause", "postgres"});
  const auto paused = std::chrono::steady_clock::now();
  REQUIRE(wait_until([&] { return held.lost(); }, 10s));
  // A probe unanswered for one period (1 s), judged at a tick every half period, plus
  // scheduling slack on a loaded machine.
  CHECK(std::chrono::steady_clock::now() - paused < 2500ms);
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
