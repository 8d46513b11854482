// The waiters' queue of a lock on one server, and on each of RedLock's: waiting providers (each
// as another process would be) are granted in the order they queued, a release wakes only the
// next, and a waiter that gives up hands its turn on. docs/redis.md, "Waiting".
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

std::string url() { return endpoint() + "?expiry=2s&prefix=" + prefix(); }

long queued(const std::string& name) {
  return std::stol(redis_cli({"ZCARD", key_of(name) + ":queue"}));
}

/// A provider of its own acquiring `name` on another thread, once `ahead` waiters queued.
std::future<dlock::lock_handle> wait_in_turn(const std::string& name, long ahead,
                                             std::chrono::milliseconds timeout = 10s) {
  REQUIRE(support::wait_until([&] { return queued(name) == ahead; }));
  return std::async(std::launch::async, [name, timeout] {
    auto locks = dlock::make_provider(url());
    return locks->create_lock(name).acquire(timeout);
  });
}

std::string redlock_url() { return redis_test::redlock_endpoint() + "?expiry=2s&prefix=" + prefix(); }

/// How many wait in `name`'s queue on RedLock's server `i`.
long queued_on(std::size_t i, const std::string& name) {
  return std::stol(redis_cli(redis_test::port_of(redis_test::redlock_endpoint(), i),
                             {"ZCARD", key_of(name) + ":queue"}));
}

/// Each RedLock server's queue of `name` and holder, for a failure's message.
std::string redlock_state(const std::string& name) {
  std::string text;
  for (std::size_t i = 0; i < 3; ++i) {
    const int port = redis_test::port_of(redis_test::redlock_endpoint(), i);
    text += "server " + std::to_string(i) + ": holder " + redis_cli(port, {"GET", key_of(name)}) +
            ", queue " + redis_cli(port, {"ZRANGE", key_of(name) + ":queue", "0", "-1", "WITHSCORES"}) +
            "\n";
  }
  return text;
}

/// Whether every RedLock server queues exactly `count` waiters of `name`.
bool queued_everywhere(const std::string& name, long count) {
  for (std::size_t i = 0; i < 3; ++i) {
    if (queued_on(i, name) != count) return false;
  }
  return true;
}

/// As wait_in_turn, on RedLock: once `ahead` waiters queued on every server.
std::future<dlock::lock_handle> wait_in_turn_on_redlock(const std::string& name, long ahead,
                                                        std::chrono::milliseconds timeout = 10s) {
  REQUIRE(support::wait_until([&] { return queued_everywhere(name, ahead); }));
  return std::async(std::launch::async, [name, timeout] {
    auto locks = dlock::make_provider(redlock_url());
    return locks->create_lock(name).acquire(timeout);
  });
}

}  // namespace

TEST_CASE("waiting providers are granted in the order they queued, each release waking the next",
          "[redis][queue]") {
  const std::string name = unique_name("queued");
  auto holder = dlock::make_provider(url());
  auto held = holder->create_lock(name).acquire();
  auto first = wait_in_turn(name, 0);
  auto second = wait_in_turn(name, 1);
  auto third = wait_in_turn(name, 2);
  REQUIRE(support::wait_until([&] { return queued(name) == 3; }));
  held.release();
  auto first_held = first.get();
  // The others were not told: still queued, still waiting.
  CHECK(queued(name) == 2);
  CHECK(second.wait_for(50ms) == std::future_status::timeout);
  first_held.release();
  auto second_held = second.get();
  CHECK(third.wait_for(50ms) == std::future_status::timeout);
  second_held.release();
  third.get().release();
  // The queue goes with its last waiter.
  CHECK(redis_cli({"EXISTS", key_of(name) + ":queue", key_of(name) + ":queue:alive"}) == "0");
}

TEST_CASE("a queued waiter that gives up passes its turn to the next", "[redis][queue]") {
  const std::string name = unique_name("queued-gives-up");
  auto holder = dlock::make_provider(url());
  auto held = holder->create_lock(name).acquire();
  auto impatient = wait_in_turn(name, 0, 300ms);
  auto patient = wait_in_turn(name, 1);
  REQUIRE_THROWS_AS(impatient.get(), dlock::timeout_error);
  REQUIRE(support::wait_until([&] { return queued(name) == 1; }));
  held.release();
  patient.get().release();
  CHECK(queued(name) == 0);
}

TEST_CASE("a lock whose queue has waiters is not taken past them by an attempt that does not wait",
          "[redis][queue]") {
  const std::string name = unique_name("queued-barging");
  auto holder = dlock::make_provider(url());
  auto held = holder->create_lock(name).acquire();
  auto waiter = wait_in_turn(name, 0);
  REQUIRE(support::wait_until([&] { return queued(name) == 1; }));
  // Freed behind the waiter's back (no message): the lock is free, the waiter is still first.
  redis_cli({"DEL", key_of(name)});
  auto other = dlock::make_provider(url());
  CHECK_FALSE(other->create_lock(name).try_acquire());
  // The waiter's next try (at the latest when the holder's lease would have run out) wins.
  waiter.get().release();
}

TEST_CASE("RedLock: waiting providers are granted in the order they queued, on every server",
          "[redis][redlock][queue]") {
  const std::string name = unique_name("redlock-queued");
  auto holder = dlock::make_provider(redlock_url());
  auto held = holder->create_lock(name).acquire();
  auto first = wait_in_turn_on_redlock(name, 0);
  auto second = wait_in_turn_on_redlock(name, 1);
  auto third = wait_in_turn_on_redlock(name, 2);
  REQUIRE(support::wait_until([&] { return queued_everywhere(name, 3); }));
  held.release();
  auto first_held = first.get();
  // Only the head was told; the others are still queued on every server, in the same order.
  INFO(redlock_state(name));
  CHECK(queued_everywhere(name, 2));
  CHECK(second.wait_for(50ms) == std::future_status::timeout);
  first_held.release();
  auto second_held = second.get();
  CHECK(third.wait_for(50ms) == std::future_status::timeout);
  second_held.release();
  third.get().release();
  CHECK(queued_everywhere(name, 0));
}

TEST_CASE("RedLock: a queued waiter that gives up passes its turn to the next",
          "[redis][redlock][queue]") {
  const std::string name = unique_name("redlock-queued-gives-up");
  auto holder = dlock::make_provider(redlock_url());
  auto held = holder->create_lock(name).acquire();
  auto impatient = wait_in_turn_on_redlock(name, 0, 300ms);
  auto patient = wait_in_turn_on_redlock(name, 1);
  REQUIRE_THROWS_AS(impatient.get(), dlock::timeout_error);
  REQUIRE(support::wait_until([&] { return queued_everywhere(name, 1); }));
  held.release();
  patient.get().release();
  CHECK(queued_everywhere(name, 0));
}
