// The waiters' queue of a lock on one server: waiting providers (each as another process would
// be) are granted in the order they queued, a release wakes only the next, and a waiter that
// gives up hands its turn on. docs/redis.md, "Waiting".
#include <catch2/catch.hpp>

#include <future>

#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"

using namespace std::chrono_literals;
using redis_test::endpoint;
using redis_test::key_of;
using redis_test::prefix;
using redis_test::redis_cli;
using support::unique_name;

namespace {

/// A deployment whose queues the tests look at (one server; RedLock's three once they queue).
struct deployment {
  std::string endpoint;
  std::size_t servers;

  std::string url() const { return endpoint + "?expiry=2s&prefix=" + prefix(); }
  long queued_on(std::size_t i, const std::string& name) const {
    return std::stol(
        redis_cli(redis_test::port_of(endpoint, i), {"ZCARD", key_of(name) + ":queue"}));
  }
  /// Whether every server queues exactly `count` waiters of `name`.
  bool queued(const std::string& name, long count) const {
    for (std::size_t i = 0; i < servers; ++i) {
      if (queued_on(i, name) != count) return false;
    }
    return true;
  }
  /// Each server's holder of `name` and queue, for a failure's message.
  std::string state(const std::string& name) const {
    std::string text;
    for (std::size_t i = 0; i < servers; ++i) {
      const int port = redis_test::port_of(endpoint, i);
      text += "server " + std::to_string(i) + ": holder " + redis_cli(port, {"GET", key_of(name)}) +
              ", queue " +
              redis_cli(port, {"ZRANGE", key_of(name) + ":queue", "0", "-1", "WITHSCORES"}) + "\n";
    }
    return text;
  }
};

deployment one_server() { return {endpoint(), 1}; }

/// A provider of its own acquiring `name` on another thread, once `ahead` waiters queued on
/// every server.
std::future<dlock::lock_handle> wait_in_turn(const deployment& at, const std::string& name,
                                             long ahead, std::chrono::milliseconds timeout = 10s) {
  REQUIRE(support::wait_until([&] { return at.queued(name, ahead); }));
  return std::async(std::launch::async, [url = at.url(), name, timeout] {
    auto locks = dlock::make_provider(url);
    return locks->create_lock(name).acquire(timeout);
  });
}

void granted_in_queue_order(const deployment& at) {
  const std::string name = unique_name("queued");
  auto holder = dlock::make_provider(at.url());
  auto held = holder->create_lock(name).acquire();
  auto first = wait_in_turn(at, name, 0);
  auto second = wait_in_turn(at, name, 1);
  auto third = wait_in_turn(at, name, 2);
  REQUIRE(support::wait_until([&] { return at.queued(name, 3); }));
  held.release();
  auto first_held = first.get();
  // The others were not told: still queued (on every server), still waiting.
  INFO(at.state(name));
  CHECK(at.queued(name, 2));
  CHECK(second.wait_for(50ms) == std::future_status::timeout);
  first_held.release();
  auto second_held = second.get();
  CHECK(third.wait_for(50ms) == std::future_status::timeout);
  second_held.release();
  third.get().release();
  // The queue goes with its last waiter.
  for (std::size_t i = 0; i < at.servers; ++i) {
    CHECK(redis_cli(redis_test::port_of(at.endpoint, i),
                    {"EXISTS", key_of(name) + ":queue", key_of(name) + ":queue:alive"}) == "0");
  }
}

void giving_up_passes_the_turn(const deployment& at) {
  const std::string name = unique_name("queued-gives-up");
  auto holder = dlock::make_provider(at.url());
  auto held = holder->create_lock(name).acquire();
  auto impatient = wait_in_turn(at, name, 0, 300ms);
  auto patient = wait_in_turn(at, name, 1);
  REQUIRE_THROWS_AS(impatient.get(), dlock::timeout_error);
  REQUIRE(support::wait_until([&] { return at.queued(name, 1); }));
  held.release();
  patient.get().release();
  CHECK(at.queued(name, 0));
}

}  // namespace

TEST_CASE("waiting providers are granted in the order they queued, each release waking the next",
          "[redis][queue]") {
  granted_in_queue_order(one_server());
}

TEST_CASE("a queued waiter that gives up passes its turn to the next", "[redis][queue]") {
  giving_up_passes_the_turn(one_server());
}

TEST_CASE("a lock whose queue has waiters is not taken past them by an attempt that does not wait",
          "[redis][queue]") {
  const std::string name = unique_name("queued-barging");
  const deployment at = one_server();
  auto holder = dlock::make_provider(at.url());
  auto held = holder->create_lock(name).acquire();
  auto waiter = wait_in_turn(at, name, 0);
  REQUIRE(support::wait_until([&] { return at.queued(name, 1); }));
  // Freed behind the waiter's back (no message): the lock is free, the waiter is still first.
  redis_cli({"DEL", key_of(name)});
  auto other = dlock::make_provider(at.url());
  CHECK_FALSE(other->create_lock(name).try_acquire());
  // The waiter's next try (at the latest when the holder's lease would have run out) wins.
  waiter.get().release();
}
