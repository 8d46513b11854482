// dlock::redis on one server under faults, against the real test servers: paused and killed
// holders, killed connections, restarted and paused servers. These tests stop and restart
// servers that other tests share, so they run alone (RUN_SERIAL) and leave them healthy.
// A paused server (SIGSTOP) is silent, as a black-holed one is: it refuses nothing and answers
// nothing. The figures in docs/redis.md ("Faults") come from the lines these tests print. The
// cases tagged [timing] hold their latency bounds in the `timing` label (tests/timing/); under
// a sanitizer they check the outcome with generous deadlines (support/timing.hpp).
// RedLock's nodes down or silent: redlock_fault_test.cpp.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <thread>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "fault_support.hpp"
#include "timing.hpp"

// Inside the namespace of the shared helpers, which the cases use unqualified.
namespace redis_test {

using support::unique_name;
using support::wait_until;

TEST_CASE("a holder stopped past its expiry loses the lock to a higher token, and sees the "
          "loss once resumed",
          "[redis][fault][multiprocess]") {
  const auto name = unique_name("stopped");
  auto [holder, stopped_token] = start_holder(name);
  holder->signal(SIGSTOP);

  auto other = dlock::make_provider(url());
  auto taken = other->create_lock(name).acquire(10s);  // granted once the lease ran out
  CHECK(taken.fencing_token() > stopped_token);

  holder->signal(SIGCONT);
  CHECK(holder->read_line(10s) == "lost");
  holder->close_stdin();
  CHECK(holder->read_line(10s) == "released");
  // The late release compared tokens and left the new holder's key alone.
  CHECK(redis_cli({"EXISTS", key_of(name)}) == "1");
  CHECK_FALSE(taken.lost());
}

TEST_CASE("a holder killed with SIGKILL frees the lock within its expiry",
          "[redis][fault][multiprocess][timing]") {
  const auto name = unique_name("killed");
  auto [holder, killed_token] = start_holder(name);
  holder->signal(SIGKILL);
  auto other = dlock::make_provider(url());
  const auto start = std::chrono::steady_clock::now();
  auto taken = other->create_lock(name).acquire(5s);
  // Expiry 1 s, plus scheduling.
  CHECK(std::chrono::steady_clock::now() - start < support::latency_bound(1500ms));
  CHECK(taken.fencing_token() > killed_token);
}

TEST_CASE("killed connections of a holder are re-established and its lease kept",
          "[redis][fault]") {
  const auto client = unique_name("held-client");
  auto holder = dlock::make_provider(url(client));
  const auto name = unique_name("conn-held");
  auto held = holder->create_lock(name).acquire(5s);
  support::test_servers({"kill-connections", "redis", client});
  // The next extension reconnects and sets the full lease again.
  REQUIRE(wait_until([&] { return redis_cli({"CLIENT", "LIST"}).find(client) != std::string::npos; }));
  REQUIRE(wait_until([&] { return std::stoi(redis_cli({"PTTL", key_of(name)})) > 900; }));
  CHECK_FALSE(held.lost());
  CHECK_FALSE(dlock::make_provider(url())->create_lock(name).try_acquire());
}

TEST_CASE("a waiter whose connections are killed reconnects and is granted on release",
          "[redis][fault]") {
  const auto client = unique_name("waiter-client");
  auto holder = dlock::make_provider(url());
  auto waiter = dlock::make_provider(url(client));
  const auto name = unique_name("conn-wait");
  auto held = holder->create_lock(name).acquire(5s);
  auto waiting = waiter->create_lock(name).async_acquire(30s, {}, boost::asio::use_future);
  const std::string channel = key_of(name) + ":released";
  REQUIRE(wait_until([&] { return redis_cli({"PUBSUB", "NUMSUB", channel}) == channel + "\n1"; }));
  support::test_servers({"kill-connections", "redis", client});
  // Subscribed again on a new connection.
  REQUIRE(wait_until([&] { return redis_cli({"CLIENT", "LIST"}).find(client) != std::string::npos; }));
  REQUIRE(wait_until([&] { return redis_cli({"PUBSUB", "NUMSUB", channel}) == channel + "\n1"; }));
  held.release();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  CHECK(waiting.get());
}

TEST_CASE("a server restart while held marks the handle lost, and the lock works after",
          "[redis][fault]") {
  auto holder = dlock::make_provider(url());
  const auto name = unique_name("restart-held");
  auto held = holder->create_lock(name).acquire(5s);
  support::undo_test_servers_fault restart({"restart", "redis"});
  restart.now();
  // The test server keeps nothing on disk: the key is gone and the next extension says so.
  REQUIRE(wait_until([&] { return held.lost(); }, 10s));
  held.release();
  // A new connection, and the scripts sent again after NOSCRIPT.
  CHECK(holder->create_lock(name).acquire(5s));
}

TEST_CASE("a server restart while waiting neither hangs the waiter nor leaves the holder "
          "unaware",
          "[redis][fault]") {
  auto holder = dlock::make_provider(url());
  auto waiter = dlock::make_provider(url());
  const auto name = unique_name("restart-wait");
  auto held = holder->create_lock(name).acquire(5s);
  auto waiting = waiter->create_lock(name).async_acquire(30s, {}, boost::asio::use_future);
  const std::string channel = key_of(name) + ":released";
  REQUIRE(wait_until([&] { return redis_cli({"PUBSUB", "NUMSUB", channel}) == channel + "\n1"; }));
  support::undo_test_servers_fault restart({"restart", "redis"});
  restart.now();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  auto granted = waiting.get();
  CHECK(granted);
  CHECK(wait_until([&] { return held.lost(); }, 10s));
}

TEST_CASE("a server paused past the expiry marks the handle lost, and acquires fail after one "
          "command timeout",
          "[redis][fault]") {
  auto holder = dlock::make_provider(url());
  const auto name = unique_name("paused-server");
  auto held = holder->create_lock(name).acquire(5s);
  support::undo_test_servers_fault resume({"resume", "redis"});
  support::test_servers({"pause", "redis"});
  // No extension is confirmed, so the validity deadline passes: lost within about 1 s.
  CHECK(wait_until([&] { return held.lost(); }, 5s));
  // An acquire meanwhile fails after one command timeout (333 ms here), not its own 10 s.
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(holder->create_lock(unique_name("hung")).acquire(10s), dlock::connection_error);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  resume.now();
  held.release();
}

TEST_CASE("a try whose reply is lost to a paused server gives the grant back once it answers",
          "[redis][fault]") {
  auto locks = dlock::make_provider(endpoint() + "?expiry=60s&command_timeout=300ms&prefix=" +
                                    prefix());
  const auto name = unique_name("lost-reply");
  // Both connections (the caller's blocking one, the network thread's) logged in beforehand,
  // so that the tries themselves reach the paused server.
  REQUIRE(locks->create_lock(name).try_acquire());
  REQUIRE(locks->create_lock(name).async_try_acquire(100ms, {}, boost::asio::use_future).get());
  support::undo_test_servers_fault resume({"resume", "redis"});
  support::test_servers({"pause", "redis"});
  // The try is sent, then abandoned after the command timeout: the paused server grants it
  // once resumed, with nobody to hear.
  CHECK_THROWS_AS(locks->create_lock(name).try_acquire(), dlock::connection_error);
  auto waiting = locks->create_lock(name).async_try_acquire(100ms, {}, boost::asio::use_future);
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  // Its 100 ms ran out before the 300 ms command timeout: not acquired, the try still in flight.
  CHECK_FALSE(waiting.get());
  resume.now();
  // Given back, rather than held until its 60 s expiry.
  CHECK(wait_until([&] { return redis_cli({"EXISTS", key_of(name)}) == "0"; }));
  CHECK(dlock::make_provider(url())->create_lock(name).try_acquire());
}

TEST_CASE("a stop request while a try is in flight ends the acquire at once, and what the try "
          "wins is given back",
          "[redis][fault][cancel]") {
  auto locks = dlock::make_provider(endpoint() + "?expiry=60s&command_timeout=5s&prefix=" +
                                    prefix());
  const auto name = unique_name("stop-in-flight");
  REQUIRE(locks->create_lock(name).async_try_acquire(100ms, {}, boost::asio::use_future).get());
  support::undo_test_servers_fault resume({"resume", "redis"});
  support::test_servers({"pause", "redis"});
  std::stop_source stop;
  auto waiting = locks->create_lock(name).async_try_acquire(60s, stop.get_token(),
                                                             boost::asio::use_future);
  // Time for the try to reach the paused server. Were it not there yet, the stop would end the
  // wait at once anyway: this pause can only make the test pass without proving, never fail.
  std::this_thread::sleep_for(300ms);
  stop.request_stop();
  // Not after the 5 s command timeout.
  REQUIRE(waiting.wait_for(2s) == std::future_status::ready);
  CHECK_FALSE(waiting.get());
  resume.now();
  CHECK(wait_until([&] { return redis_cli({"EXISTS", key_of(name)}) == "0"; }));
}

TEST_CASE("a handle whose server falls silent is marked lost before its key expires there",
          "[redis][fault]") {
  // A 2 s expiry: extended every 667 ms, so the pause below lands well between two extensions.
  auto locks = dlock::make_provider(endpoint() + "?expiry=2s&prefix=" + prefix());
  const auto name = unique_name("lost-bound");
  auto held = locks->create_lock(name).acquire(5s);
  std::atomic<long long> lost_at_ms{0};
  std::stop_callback on_loss(held.lost_token(), [&] {
    lost_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  });
  support::redis_connection server(support::endpoint_hosts(endpoint()).at(0));
  // Just extended (the full lease again), then read when the key expires on the server.
  REQUIRE(wait_until([&] { return std::stoll(server.command({"PTTL", key_of(name)}).value_or("0")) > 1950; }));
  const long long expires_at_ms = std::stoll(server.command({"PEXPIRETIME", key_of(name)}).value_or("0"));
  support::undo_test_servers_fault resume({"resume", "redis"});
  support::test_servers({"pause", "redis"});
  REQUIRE(wait_until([&] { return held.lost(); }, 5s));
  std::cout << "handle lost " << expires_at_ms - lost_at_ms << " ms before its key expired on the "
            << "paused server (expiry 2000 ms, drift allowance 22 ms)" << std::endl;
  // Had an extension reached the server after the read, the key would expire later still.
  CHECK(lost_at_ms < expires_at_ms);
}

TEST_CASE("waiting acquires on a silent server (async, sync, with a timeout) fail with "
          "connection_error within one expiry, and the same provider works once it answers",
          "[redis][fault][timing]") {
  auto holder = dlock::make_provider(url());
  const auto name = unique_name("silent-wait");
  const std::string channel = key_of(name) + ":released";
  auto held = holder->create_lock(name).acquire(5s);
  // One provider per waiter, so that none queues behind another in the provider.
  auto async_waiter = dlock::make_provider(url());
  auto sync_waiter = dlock::make_provider(url());
  auto timed_waiter = dlock::make_provider(url());
  auto waiting = async_waiter->create_lock(name).async_acquire(dlock::forever, {},
                                                                boost::asio::use_future);
  auto timed = timed_waiter->create_lock(name).async_try_acquire(30s, {}, boost::asio::use_future);
  std::atomic<bool> sync_done{false};
  std::string sync_outcome;
  clock::time_point sync_end;
  std::jthread sync_thread([&] {
    try {
      (void)sync_waiter->create_lock(name).acquire();
      sync_outcome = "granted";
    } catch (const dlock::connection_error&) {
      sync_outcome = "connection_error";
    } catch (const std::exception& e) {
      sync_outcome = e.what();
    }
    sync_end = clock::now();
    sync_done = true;
  });
  REQUIRE(wait_until([&] { return redis_cli({"PUBSUB", "NUMSUB", channel}) == channel + "\n3"; }));

  // Declared after the thread: resumed before the thread is joined, should a check fail.
  support::undo_test_servers_fault resume({"resume", "redis"});
  const auto paused = clock::now();
  support::test_servers({"pause", "redis"});
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  const auto async_end = clock::now();
  REQUIRE(timed.wait_for(5s) == std::future_status::ready);
  const auto timed_end = clock::now();
  REQUIRE(wait_until([&] { return sync_done.load(); }, 5s));
  std::cout << "waiters on a paused server (expiry 1000 ms) failed after: async_acquire() "
            << milliseconds(async_end - paused) << " ms, async_try_acquire(30s) "
            << milliseconds(timed_end - paused) << " ms, acquire() "
            << milliseconds(sync_end - paused) << " ms" << std::endl;
  CHECK_THROWS_AS(waiting.get(), dlock::connection_error);
  CHECK_THROWS_AS(timed.get(), dlock::connection_error);  // never "not obtained"
  CHECK(sync_outcome == "connection_error");
  // One expiry after the server was last heard, which was before the pause; plus scheduling.
  // Before: about two expiries.
  CHECK(async_end - paused < support::latency_bound(1300ms));
  CHECK(timed_end - paused < support::latency_bound(1300ms));
  CHECK(sync_end - paused < support::latency_bound(1300ms));

  resume.now();
  held = {};
  // The same provider reconnects, and its waiters subscribe again and hear the release.
  auto again = async_waiter->create_lock(name).acquire(5s);
  auto next = timed_waiter->create_lock(name).async_acquire(5s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return redis_cli({"PUBSUB", "NUMSUB", channel}) == channel + "\n1"; }));
  again.release();
  // The message, not the 1 s lease.
  CHECK(next.wait_for(support::latency_bound(500ms)) == std::future_status::ready);
  CHECK(next.get());
}

}  // namespace redis_test
