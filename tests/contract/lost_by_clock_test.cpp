// Lost by the clock (docs/semantics.md "Lost by the clock"), stated once for every backend whose
// grants carry a validity: reported once it has passed even when the provider's threads are
// blocked, and never while it holds, also for a grant that waited longer than the validity's
// bound and for the waiter's other grants meanwhile.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <vector>

#include <boost/asio/use_future.hpp>

#include <dlock/core/backend/lease.hpp>

#include "backend.hpp"
#include "blocked_provider.hpp"
#include "support.hpp"
#include "timing.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;
using steady = std::chrono::steady_clock;

TEST_CASE("a handle whose provider's thread is blocked past its validity is reported lost by "
          "the clock, and not before",
          "[contract][lost]") {
  auto provider = backend().make_short_validity_provider();
  if (!provider) DLOCK_SKIP("its grants carry no validity (no lease)");
  support::check_lost_by_clock_while_blocked(*provider, support::latency_bound(100ms));
}

// A write handle is the name's upgrade gate and a write grant held as one (core's gated
// lease): it carries the earlier of their validities itself, rather than hearing of their
// loss a wake-up of the clock later.
TEST_CASE("a write handle whose provider's thread is blocked past its validity is reported lost "
          "by the clock, and not before",
          "[contract][lost][rw]") {
  auto provider = backend().make_short_validity_provider();
  if (!provider) DLOCK_SKIP("its grants carry no validity (no lease)");
  support::check_lost_by_clock_while_blocked(*provider, support::latency_bound(100ms),
                                             support::hold_write);
}

// A session busy in a wait (PostgreSQL's pg_advisory_lock, MariaDB's GET_LOCK) holds no grant
// and answers no keepalive; its grant, when it comes, must not be taken for one that has gone
// unconfirmed since the wait began. The wait lasts well past the validity each grant had when
// it began.
TEST_CASE("a grant that waited longer than its validity's bound is not lost, nor are the "
          "waiter's other grants meanwhile",
          "[contract][lost]") {
  auto waiter = backend().make_short_validity_provider();
  if (!waiter) DLOCK_SKIP("its grants carry no validity (no lease)");
  const auto bound = backend().nemesis_url().lease.value_or(2s);
  // Two waits at once: an async one, and a blocking one, which a backend may run on the
  // caller's thread (PostgreSQL's wait on a session of its own).
  const auto name = unique_name("long-wait");
  const auto blocking_name = unique_name("long-wait-blocking");
  auto holder = backend().make_provider();
  auto held = holder->create_lock(name).acquire(10s);
  auto held_too = holder->create_lock(blocking_name).acquire(10s);
  auto beside = support::hold_lock(*waiter, unique_name("beside"));
  auto waited = waiter->create_lock(name).async_acquire(60s, {}, boost::asio::use_future);
  auto blocking_lock = waiter->create_lock(blocking_name);
  auto waited_blocking =
      std::async(std::launch::async, [&blocking_lock] { return blocking_lock.acquire(60s); });
  const auto ready = [](const std::future<dlock::lock_handle>& f) {
    return f.wait_for(0s) == std::future_status::ready;
  };
  const auto beside_until = dlock::granted_lease(beside)->valid_until();
  const auto wait_for = beside_until == steady::time_point::max()
                            ? 2 * bound
                            : std::chrono::duration_cast<std::chrono::milliseconds>(
                                  beside_until - steady::now()) + bound;
  CHECK_FALSE(wait_until(
      [&] { return beside.lost() || ready(waited) || ready(waited_blocking); }, wait_for));
  if (beside_until != steady::time_point::max()) CHECK(steady::now() > beside_until);
  held.release();
  held_too.release();
  REQUIRE(waited.wait_for(30s) == std::future_status::ready);
  REQUIRE(waited_blocking.wait_for(30s) == std::future_status::ready);
  std::vector<dlock::lock_handle> granted;
  granted.push_back(waited.get());
  granted.push_back(waited_blocking.get());
  for (const auto& handle : granted) {
    CHECK_FALSE(handle.lost());
    const auto until = dlock::granted_lease(handle)->valid_until();
    CHECK(until > steady::now());
    // Where grants carry a time, a waited one does too, whichever thread waited.
    if (beside_until != steady::time_point::max()) CHECK(until != steady::time_point::max());
  }
  // Renewed from here on, as any grant.
  CHECK_FALSE(wait_until(
      [&] { return granted[0].lost() || granted[1].lost() || beside.lost(); }, 2 * bound));
}
