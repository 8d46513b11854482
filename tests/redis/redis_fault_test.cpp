// dlock::redis under faults, against the real test servers: paused and killed holders, killed
// connections, restarted and paused servers, RedLock nodes down. These tests stop and restart
// servers that other tests share, so they run alone (RUN_SERIAL) and leave them healthy.
#include <catch2/catch.hpp>

#include <signal.h>

#include <future>
#include <thread>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"

// Inside the namespace of the shared helpers, which the cases use unqualified.
namespace redis_test {

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

/// A URL with a 1 s lease, so that expiries pass quickly, under the test's own client name.
std::string url(const std::string& client_name = "dlock", const std::string& base = endpoint()) {
  return base + "?expiry=1s&prefix=" + prefix() + "&client_name=" + client_name;
}

/// A helper process holding the lock `name`, and the fencing token it was granted.
struct helper_holder {
  std::unique_ptr<support::child_process> process;
  std::uint64_t token = 0;
};

helper_holder start_holder(const std::string& name) {
  helper_holder holder{std::make_unique<support::child_process>(
      std::vector<std::string>{support::helper_path(), "hold", url(), name, "lock"})};
  auto line = holder.process->read_line(10s);
  REQUIRE(line);
  REQUIRE(line->rfind("acquired ", 0) == 0);
  holder.token = std::stoull(line->substr(9));
  return holder;
}

}  // namespace

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
          "[redis][fault][multiprocess]") {
  const auto name = unique_name("killed");
  auto [holder, killed_token] = start_holder(name);
  holder->signal(SIGKILL);
  auto other = dlock::make_provider(url());
  const auto start = std::chrono::steady_clock::now();
  auto taken = other->create_lock(name).acquire(5s);
  CHECK(std::chrono::steady_clock::now() - start < 1500ms);  // expiry 1 s, plus scheduling
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

TEST_CASE("RedLock locks work with one node down and semaphores do not; with two down it is a "
          "connection_error naming both",
          "[redis][redlock][fault]") {
  const std::string nodes = redis_test::redlock_endpoint();
  auto locks = dlock::make_provider(url("dlock", nodes));
  const auto hosts = support::endpoint_hosts(nodes);
  auto endpoint_of = [&](std::size_t i) { return "127.0.0.1:" + std::to_string(hosts.at(i).port); };

  support::undo_test_servers_fault restart_first({"restart", "redlock1"});
  support::test_servers({"kill", "redlock1"});
  const auto name = unique_name("redlock-down");
  {
    auto held = locks->create_lock(name).acquire(5s);
    CHECK_FALSE(dlock::make_provider(url("dlock", nodes))->create_lock(name).try_acquire());
  }
  // A semaphore needs every node (docs/redis.md), so it names the one that is down.
  REQUIRE_THROWS_WITH(locks->create_semaphore(name, 2).try_acquire(),
                      Catch::Contains(endpoint_of(0)));

  support::undo_test_servers_fault restart_second({"restart", "redlock2"});
  support::test_servers({"kill", "redlock2"});
  REQUIRE_THROWS_AS(locks->create_lock(name).try_acquire(), dlock::connection_error);
  REQUIRE_THROWS_WITH(locks->create_lock(name).try_acquire(),
                      Catch::Contains(endpoint_of(0)) && Catch::Contains(endpoint_of(1)));
  restart_second.now();
  restart_first.now();
  CHECK(locks->create_lock(name).acquire(10s));
}

}  // namespace redis_test
