// A silent ZooKeeper server met step by step (docs/semantics.md, "Faults and partitions"): the
// client notices the silence 2t/3 after it last heard from the server, a cut-off waiter fails
// t/6 after that, and a held handle is lost by the clock no later than t/3 after the notice
// and no earlier than its grant is known valid. The bounds hold in the `timing` label; under a
// sanitizer the case checks only that every step comes, within a deadline only a hang misses.
// It pauses the shared server, so it runs alone (RUN_SERIAL) and resumes it.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <future>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "fault_support.hpp"
#include "support.hpp"
#include "test_servers.hpp"
#include "timing.hpp"
#include "zookeeper_client.hpp"

using namespace std::chrono_literals;
using namespace zookeeper_fault;

namespace {

using steady = std::chrono::steady_clock;

long long millis(steady::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

TEST_CASE("a silent server is noticed 2t/3 after the last answer, a waiter fails t/6 later and "
          "a holder is lost at most t/3 later, never before its grant's validity",
          "[zookeeper][fault][timing]") {
  constexpr auto t = 3000ms;  // the test server takes 1 s to 60 s
  const std::string base = "/" + support::unique_name("dlock-silence-steps");
  auto holding = make_zookeeper(standalone_url(), base, t);
  auto waiting_provider = make_zookeeper(standalone_url(), base, t);
  auto held = holding->create_lock("x").acquire(10s);
  auto waiting =
      waiting_provider->create_lock("x").async_acquire(60s, {}, boost::asio::use_future);
  REQUIRE(support::wait_until([&] { return child_count(holding->lock_node_path("x")) == 2; }));

  // Each provider notices the silence by its own session's clock.
  steady::time_point paused_at, noticed_at, waiter_noticed_at, waiter_failed_at, lost_at;
  auto first_time = [](steady::time_point& at, bool happened) {
    if (at == steady::time_point{} && happened) at = steady::now();
    return at != steady::time_point{};
  };
  {
    support::undo_test_servers_fault resume({"resume", "zookeeper"});
    support::test_servers({"pause", "zookeeper"});
    paused_at = steady::now();
    support::wait_until([&] {
      const bool noticed = first_time(noticed_at, !holding->health().connected);
      const bool waiter_noticed =
          first_time(waiter_noticed_at, !waiting_provider->health().connected);
      const bool failed = first_time(waiter_failed_at,
                                     waiting.wait_for(0s) == std::future_status::ready);
      const bool lost = first_time(lost_at, held.lost());
      return noticed && waiter_noticed && failed && lost;
    }, support::latency_bound(t) + t);
  }
  REQUIRE(noticed_at != steady::time_point{});
  REQUIRE(waiter_noticed_at != steady::time_point{});
  REQUIRE(waiter_failed_at != steady::time_point{});
  REQUIRE(lost_at != steady::time_point{});
  CHECK_THROWS_AS(waiting.get(), dlock::connection_error);
  std::printf("measured: pause to noticed %lld ms, to the waiter's error %lld ms (its provider "
              "noticed at %lld ms), to lost %lld ms (t = %lld ms)\n",
              millis(noticed_at - paused_at), millis(waiter_failed_at - paused_at),
              millis(waiter_noticed_at - paused_at), millis(lost_at - paused_at),
              static_cast<long long>(t.count()));
  if (support::holds_latency_bounds) {
    // The client last heard an answer at most t/6 before the pause (dlock reads every t/6).
    CHECK(noticed_at - paused_at >= t / 2 - 50ms);
    CHECK(noticed_at - paused_at <= 2 * t / 3 + 100ms);
    CHECK(waiter_noticed_at <= waiter_failed_at);
    CHECK(waiter_failed_at - waiter_noticed_at <= t / 6 + 100ms);
    CHECK(noticed_at <= lost_at);
    CHECK(lost_at - noticed_at <= t / 3 + 50ms);
    // Valid until the sending of the last answered read (at most t/6 before the pause) + t,
    // less the drift allowance (1 % of t + 2 ms).
    CHECK(lost_at - paused_at >= 5 * t / 6 - 32ms - 50ms);
  }
}
