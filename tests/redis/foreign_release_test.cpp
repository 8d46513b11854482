// dlock::redis in plain-key mode beside a client that publishes nothing when it releases (any
// SET NX PX client: redis-cli, redis-py's Lock, .NET's DistributedLock.Redis): a dlock waiter
// sees the release within a second, not at the key's expiry. In dlock_redis_fault_tests (the
// sanitized outcome) and the timing label (the bound).
#include <catch2/catch.hpp>

#include <chrono>
#include <future>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"
#include "timing.hpp"

namespace redis_test {

using namespace std::chrono_literals;

TEST_CASE("in plain-key mode a waiter is granted within a second of a silent foreign release",
          "[redis][plain][timing]") {
  auto locks = dlock::make_provider(endpoint() + "?plain_keys=true&prefix=" + prefix());
  const auto name = support::unique_name("foreign");
  const std::string key = prefix() + name;
  // Held by a foreign client for a minute, far past every bound below.
  REQUIRE(redis_cli({"SET", key, "held-by-redis-cli", "NX", "PX", "60000"}) == "OK");
  const auto waits_before = locks->metrics().waits;
  auto waiting = locks->create_lock(name).async_acquire(90s, {}, boost::asio::use_future);
  REQUIRE(support::wait_until([&] { return locks->metrics().waits > waits_before; }));
  const auto released_at = std::chrono::steady_clock::now();
  REQUIRE(redis_cli({"DEL", key}) == "1");  // no message: the foreign client knows no channel
  REQUIRE(waiting.wait_for(90s) == std::future_status::ready);
  const auto took = std::chrono::steady_clock::now() - released_at;
  CHECK(took < support::latency_bound(1s));
  auto held = waiting.get();
  CHECK(redis_cli({"GET", key}).size() == 32);  // dlock's token now
}

}  // namespace redis_test
