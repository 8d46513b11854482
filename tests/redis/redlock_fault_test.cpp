// dlock::redis's RedLock under faults, against the real test servers: nodes down, restarted or
// silent (SIGSTOP) while locks are held, tried and waited for. They stop and restart servers
// that other tests share, so they run alone (RUN_SERIAL) and leave them healthy. The cases
// tagged [timing] hold their latency bounds in the `timing` label (tests/timing/); under a
// sanitizer they check the outcome with generous deadlines (support/timing.hpp).
// One server's faults: redis_fault_test.cpp.
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

TEST_CASE("a RedLock waiter granted after one node's subscription was lost leaves no "
          "subscription on any node",
          "[redis][redlock][fault]") {
  const std::string nodes = redis_test::redlock_endpoint();
  const auto client = unique_name("redlock-waiter");
  auto waiter = dlock::make_provider(url(client, nodes));
  const auto name = unique_name("redlock-lost-sub");
  const std::string channel = key_of(name) + ":released";
  auto on_every_node = [&](std::vector<std::string> arguments) {
    std::vector<std::string> replies;
    for (std::size_t i = 0; i < 3; ++i) replies.push_back(redis_cli(port_of(nodes, i), arguments));
    return replies;
  };
  const std::vector<std::string> subscribed(3, channel + "\n1");
  const std::vector<std::string> unsubscribed(3, channel + "\n0");

  on_every_node({"SET", key_of(name), "someone-else", "PX", "60000"});
  auto waiting = waiter->create_lock(name).async_acquire(30s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return on_every_node({"PUBSUB", "NUMSUB", channel}) == subscribed; }));
  // Freed without a message; then node 1's subscription goes, and the retry it causes wins.
  on_every_node({"DEL", key_of(name)});
  support::test_servers({"kill-connections", "redlock1", client});
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  auto held = waiting.get();
  CHECK(held);
  CHECK(wait_until([&] { return on_every_node({"PUBSUB", "NUMSUB", channel}) == unsubscribed; }));
}

TEST_CASE("a RedLock waiter subscribes on a node that was down when it began waiting, once the "
          "node is back",
          "[redis][redlock][fault]") {
  const std::string nodes = redis_test::redlock_endpoint();
  auto holder = dlock::make_provider(url("dlock", nodes));
  auto waiter = dlock::make_provider(url("dlock", nodes));
  const auto name = unique_name("redlock-late-sub");
  const std::string channel = key_of(name) + ":released";
  auto subscribers_on = [&](std::size_t i) {
    return redis_cli(port_of(nodes, i), {"PUBSUB", "NUMSUB", channel});
  };

  support::undo_test_servers_fault restart_first({"restart", "redlock1"});
  support::test_servers({"kill", "redlock1"});
  auto held = holder->create_lock(name).acquire(5s);
  auto waiting = waiter->create_lock(name).async_acquire(30s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return subscribers_on(1) == channel + "\n1"; }));
  restart_first.now();
  // The subscription that failed while the node was down is tried again.
  CHECK(wait_until([&] { return subscribers_on(0) == channel + "\n1"; }));
  held.release();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  CHECK(waiting.get());
}

TEST_CASE("RedLock locks work with one node down and semaphores do not; with two down it is a "
          "connection_error naming both",
          "[redis][redlock][fault]") {
  const std::string nodes = redis_test::redlock_endpoint();
  auto locks = dlock::make_provider(url("dlock", nodes));

  support::undo_test_servers_fault restart_first({"restart", "redlock1"});
  support::test_servers({"kill", "redlock1"});
  const auto name = unique_name("redlock-down");
  {
    auto held = locks->create_lock(name).acquire(5s);
    CHECK_FALSE(dlock::make_provider(url("dlock", nodes))->create_lock(name).try_acquire());
  }
  // A semaphore needs every node (docs/redis.md), so it names the one that is down.
  REQUIRE_THROWS_WITH(locks->create_semaphore(name, 2).try_acquire(),
                      Catch::Contains(endpoint_of(nodes, 0)));

  support::undo_test_servers_fault restart_second({"restart", "redlock2"});
  support::test_servers({"kill", "redlock2"});
  REQUIRE_THROWS_AS(locks->create_lock(name).try_acquire(), dlock::connection_error);
  REQUIRE_THROWS_WITH(
      locks->create_lock(name).try_acquire(),
      Catch::Contains(endpoint_of(nodes, 0)) && Catch::Contains(endpoint_of(nodes, 1)));
  restart_second.now();
  restart_first.now();
  CHECK(locks->create_lock(name).acquire(10s));
}

TEST_CASE("RedLock with one silent node of three grants and releases about as fast as with all "
          "three up, and the silent node's late grants are deleted once it answers",
          "[redis][redlock][fault][timing]") {
  const std::string nodes = redlock_endpoint();
  // Default options: a 30 s expiry, so a 5 s command timeout per node and a 5 s release_timeout.
  auto locks = dlock::make_provider(nodes + "?prefix=" + prefix());
  const auto name = unique_name("silent-node");
  (void)acquire_release_cycles(*locks, name + "-warm", 2);  // connections made, scripts loaded
  const cycle_times up = acquire_release_cycles(*locks, name + "-up", 20);

  support::undo_test_servers_fault resume({"resume", "redlock1"});
  support::test_servers({"pause", "redlock1"});
  // Every release returns (no throw) once two nodes confirmed it.
  const cycle_times silent = acquire_release_cycles(*locks, name + "-silent", 20);
  std::cout << "redlock acquire+release, 20 cycles: all up mean " << milliseconds(up.mean)
            << " ms, slowest " << milliseconds(up.slowest) << " ms; one node paused mean "
            << milliseconds(silent.mean) << " ms, slowest " << milliseconds(silent.slowest)
            << " ms (command timeout 5000 ms)" << std::endl;
  // Before: two command timeouts per grant and one per release, 15 s a cycle.
  CHECK(silent.slowest < support::latency_bound(500ms));
  CHECK(silent.mean < up.mean + support::latency_bound(50ms));

  resume.now();
  // The paused node grants each try when it wakes, and deletes it with the release queued
  // behind it: nothing is left there for the 30 s expiry.
  auto paused_node = node_connection(nodes, 0);
  for (int i = 0; i < 20; ++i) {
    const std::string key = key_of(name + "-silent-" + std::to_string(i));
    CHECK(wait_until([&] { return paused_node.command({"GET", key + ":fence"}) == "1"; }));
    CHECK(wait_until([&] { return paused_node.command({"EXISTS", key}) == "0"; }));
  }
}

TEST_CASE("a RedLock try refused by a majority settles without the silent node, and what the "
          "silent node grants it later is given back",
          "[redis][redlock][fault][timing]") {
  const std::string nodes = redlock_endpoint();
  auto locks = dlock::make_provider(nodes + "?expiry=60s&prefix=" + prefix());  // 5 s per node
  REQUIRE(locks->create_lock(unique_name("warm")).try_acquire());
  const auto name = unique_name("refused-silent");
  const std::string key = key_of(name);
  for (std::size_t i : {1, 2}) {
    REQUIRE(node_connection(nodes, i).command({"SET", key, "someone-else", "PX", "60000"}) == "OK");
  }
  support::undo_test_servers_fault resume({"resume", "redlock1"});
  support::test_servers({"pause", "redlock1"});
  const auto start = clock::now();
  CHECK_FALSE(locks->create_lock(name).try_acquire());
  const auto took = clock::now() - start;
  std::cout << "redlock try refused by two nodes, the third paused: " << milliseconds(took)
            << " ms (command timeout 5000 ms)" << std::endl;
  CHECK(took < support::latency_bound(500ms));
  resume.now();
  // Node 1 was free: it granted the try when it woke (and stored the proposal, 1, as its
  // counter), and the give-back queued behind the try deleted the grant.
  auto paused_node = node_connection(nodes, 0);
  CHECK(wait_until([&] { return paused_node.command({"GET", key + ":fence"}) == "1"; }));
  CHECK(wait_until([&] { return paused_node.command({"EXISTS", key}) == "0"; }));
}

TEST_CASE("a RedLock handle keeps its lease while one node is silent, and its release succeeds",
          "[redis][redlock][fault][timing]") {
  const std::string nodes = redlock_endpoint();
  auto locks = dlock::make_provider(url("dlock", nodes));  // 1 s expiry, extended every 333 ms
  const auto name = unique_name("extend-silent");
  auto held = locks->create_lock(name).acquire(5s);
  support::undo_test_servers_fault resume({"resume", "redlock1"});
  support::test_servers({"pause", "redlock1"});
  // Two expiries: a lease not extended on a majority would be lost after one.
  const auto until = clock::now() + 2s;
  wait_until([&] { return held.lost() || clock::now() >= until; }, 5s);
  CHECK_FALSE(held.lost());
  auto answering = node_connection(nodes, 1);
  CHECK(std::stoll(answering.command({"PTTL", key_of(name)}).value_or("-2")) > 500);
  const auto start = clock::now();
  CHECK_NOTHROW(held.release());
  const auto took = clock::now() - start;
  std::cout << "redlock release with one node paused (command timeout 333 ms): "
            << milliseconds(took) << " ms" << std::endl;
  CHECK(took < support::latency_bound(200ms));
  CHECK(answering.command({"EXISTS", key_of(name)}) == "0");
}

TEST_CASE("a RedLock handle is marked lost once two of three nodes fall silent, by the time "
          "its keys on them could expire, and not while a majority still confirmed it",
          "[redis][redlock][fault][timing]") {
  const std::string nodes = redlock_endpoint();
  auto locks = dlock::make_provider(url("dlock", nodes));  // 1 s expiry, extended every 333 ms
  const auto name = unique_name("two-silent");
  auto held = locks->create_lock(name).acquire(5s);
  support::undo_test_servers_fault resume_first({"resume", "redlock1"});
  support::undo_test_servers_fault resume_second({"resume", "redlock2"});
  support::test_servers({"pause", "redlock1"});
  CHECK_FALSE(held.lost());
  const auto pausing_second = clock::now();
  support::test_servers({"pause", "redlock2"});
  const auto paused = clock::now();
  // The last extension a majority confirmed went out by `paused`: the grant is known valid at
  // most one expiry less the drift allowance (12 ms) after it, and the silent nodes' keys may
  // expire soon after, when a majority could grant the name again.
  const auto valid_at_most_until = paused + 988ms;
  wait_until([&] { return held.lost() || clock::now() >= valid_at_most_until; }, 5s);
  const auto seen_lost = clock::now();
  const bool lost_in_time = held.lost();
  std::cout << "redlock handle with two of three nodes paused (expiry 1000 ms) lost after "
            << milliseconds(seen_lost - paused) << " ms" << std::endl;
  CHECK(lost_in_time);
  // An extension that two nodes confirmed at most one period (333 ms) before the pause keeps the
  // grant valid until about 650 ms after it.
  if (support::holds_latency_bounds) CHECK(seen_lost - pausing_second > 550ms);
  CHECK(wait_until([&] { return held.lost_token().stop_requested(); }));
  resume_second.now();
  resume_first.now();
  CHECK(locks->create_lock(name).acquire(5s));
}

TEST_CASE("a RedLock waiter waits on through one silent node and is granted on release, and "
          "with two silent it fails with connection_error within one expiry",
          "[redis][redlock][fault][timing]") {
  const std::string nodes = redlock_endpoint();
  auto holder = dlock::make_provider(url("dlock", nodes));
  auto waiter = dlock::make_provider(url("dlock", nodes));
  auto last_waiter = dlock::make_provider(url("dlock", nodes));
  const auto name = unique_name("redlock-silent-wait");
  const std::string channel = key_of(name) + ":released";
  auto subscribed_on = [&](std::size_t i, int count) {
    return redis_cli(port_of(nodes, i), {"PUBSUB", "NUMSUB", channel}) ==
           channel + "\n" + std::to_string(count);
  };
  auto held = holder->create_lock(name).acquire(5s);
  auto waiting = waiter->create_lock(name).async_acquire(dlock::forever, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return subscribed_on(0, 1) && subscribed_on(1, 1) && subscribed_on(2, 1); }));

  support::undo_test_servers_fault resume_first({"resume", "redlock1"});
  support::test_servers({"pause", "redlock1"});
  // Two expiries: the two nodes that answer are a quorum, so the waiter does not give up.
  CHECK(waiting.wait_for(2s) == std::future_status::timeout);
  held.release();
  REQUIRE(waiting.wait_for(1s) == std::future_status::ready);
  auto granted = waiting.get();
  CHECK(granted);

  auto last = last_waiter->create_lock(name).async_acquire(dlock::forever, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return subscribed_on(1, 1) && subscribed_on(2, 1); }));
  support::undo_test_servers_fault resume_second({"resume", "redlock2"});
  const auto paused = clock::now();
  support::test_servers({"pause", "redlock2"});
  REQUIRE(last.wait_for(5s) == std::future_status::ready);
  const auto took = clock::now() - paused;
  std::cout << "redlock waiter with two of three nodes paused (expiry 1000 ms) failed after "
            << milliseconds(took) << " ms" << std::endl;
  CHECK_THROWS_AS(last.get(), dlock::connection_error);
  CHECK(took < support::latency_bound(1300ms));
  resume_second.now();
  resume_first.now();
  CHECK(last_waiter->create_lock(name).acquire(5s));
}

}  // namespace redis_test
