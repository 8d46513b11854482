// dlock::mysql when the server restarts or stops answering while locks are held or awaited,
// and when a client goes silent (a stopped process: the server's TCP sees nothing wrong).
// These pause and restart the shared server, so they run alone (RUN_SERIAL) and leave it up.
#include <chrono>
#include <future>
#include <stop_token>
#include <string>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it
#include <vector>

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "server_faults.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

std::string url_with(const std::string& options = "") {
  const auto url = support::require_test_server_endpoint("DLOCK_TEST_MARIADB");
  return options.empty() ? url : url + "?" + options;
}

// Requests stops when destroyed: ends the waits of a failing test before their futures join.
struct stop_when_done {
  std::stop_source& first;
  std::stop_source& second;
  ~stop_when_done() {
    first.request_stop();
    second.request_stop();
  }
};

// What an acquire ended with: "connection_error", "obtained", "not obtained" or the message.
std::future<std::string> wait_for_lock(dlock::provider& db, const std::string& name,
                                       std::chrono::nanoseconds timeout, std::stop_token stop) {
  return std::async(std::launch::async, [&db, name, timeout, stop]() -> std::string {
    try {
      return db.create_lock(name).try_acquire(timeout, stop) ? "obtained" : "not obtained";
    } catch (const dlock::connection_error&) {
      return "connection_error";
    } catch (const std::exception& e) {
      return e.what();
    }
  });
}

}  // namespace

TEST_CASE("a server restart while held is a loss; a waiter fails; acquires work once it is back",
          "[mysql][fault]") {
  auto db = dlock::make_provider(url_with());
  const auto name = unique_name("restart");
  auto held = db->create_lock(name).acquire();
  auto read = db->create_reader_writer_lock(name).acquire_read();
  auto slot = db->create_semaphore(name, 2).acquire();
  auto waiter = dlock::make_provider(url_with());
  auto waiting = waiter->create_lock(name).async_acquire(60s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return waiter->metrics().waits == 1; }));
  support::undo_test_servers_fault restart({"restart", "mariadb"});
  restart.now();

  CHECK(wait_until([&] { return held.lost() && read.lost() && slot.lost(); }, 10s));
  REQUIRE(waiting.wait_for(30s) == std::future_status::ready);
  CHECK_THROWS_AS(waiting.get(), dlock::connection_error);
  CHECK(support::acquires_again(*db, name));
}

TEST_CASE("a server that stops answering: held locks are lost and waits fail as connection_error "
          "within 1.5 keepalive periods, a stop request still ends a wait at once, and the "
          "given-up connections free their locks",
          "[mysql][fault]") {
  const auto name = unique_name("paused-waits");
  auto holder = dlock::make_provider(url_with());
  std::vector<dlock::lock_handle> held;
  for (int i = 0; i < 4; ++i) held.push_back(holder->create_lock(name + std::to_string(i)).acquire());
  // connect_timeout far off: only the keepalive can end these waits.
  auto db = dlock::make_provider(url_with("keepalive=1s&connect_timeout=1h"));
  auto mine = db->create_lock(name + "-mine").acquire();
  std::stop_source cleanup, stop_one;
  std::vector<std::future<std::string>> waits;
  waits.push_back(wait_for_lock(*db, name + "0", dlock::forever, cleanup.get_token()));
  waits.push_back(wait_for_lock(*db, name + "1", std::chrono::hours(1), cleanup.get_token()));
  auto stopped = wait_for_lock(*db, name + "3", dlock::forever, stop_one.get_token());
  support::undo_test_servers_fault resume({"resume", "mariadb"});
  stop_when_done stop_waits{cleanup, stop_one};  // on the way out of a failed test
  REQUIRE(wait_until([&] { return db->metrics().waits == 3; }, 10s));

  support::test_servers({"pause", "mariadb"});
  const auto paused = std::chrono::steady_clock::now();
  // Begun in the silence, so that its deadline surely passes there: still a connection_error.
  waits.push_back(wait_for_lock(*db, name + "2", 500ms, cleanup.get_token()));
  stop_one.request_stop();
  REQUIRE(stopped.wait_for(1s) == std::future_status::ready);
  CHECK(stopped.get() == "not obtained");
  for (std::size_t i = 0; i < waits.size(); ++i) {
    INFO("wait " << i);
    REQUIRE(waits[i].wait_for(10s) == std::future_status::ready);
    const double took = support::seconds_since(paused);
    CHECK(waits[i].get() == "connection_error");
    INFO("failed " << took << " s after the pause");
    CHECK(took < 3.0);
  }
  // On a connection of its own, whose probe may come a moment after the waits' sessions'.
  CHECK(wait_until([&] { return mine.lost(); }, 1s));
  cleanup.request_stop();
  resume.now();
  CHECK(support::acquires_again(*db, unique_name("after-paused-waits")));
  auto other = dlock::make_provider(url_with());
  CHECK(support::acquires_again(*other, name + "-mine"));
}

TEST_CASE("the server frees the lock of a holder that went silent within its server_lease, and "
          "a contender gets it with a higher fencing token",
          "[mysql][fault][multiprocess]") {
  // A stopped process is a silent client whose TCP path stays healthy: only the server lease
  // (the session's wait_timeout) ends it.
  auto contender = dlock::make_provider(url_with("keepalive=1s"));
  const auto outcome = support::silence_holder(url_with("keepalive=1s&server_lease=3s"),
                                               *contender, unique_name("silent-holder"));
  CHECK(outcome.contender_token > outcome.holder_token);
  // wait_timeout (3 s) after the holder's last keepalive, which came at most half a period
  // (0.5 s) before the stop: never before the holder's own lost bound (1.5 periods).
  INFO("granted " << outcome.seconds_to_grant << " s after the holder stopped");
  CHECK(outcome.seconds_to_grant >= 1.5);
  CHECK(outcome.seconds_to_grant < 4.5);
  CHECK(outcome.holder_heard == "lost");  // and the holder hears it once it runs again
}
