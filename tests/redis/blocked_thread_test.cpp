// dlock::redis with its network thread blocked past a lease: the handle is lost by core's clock,
// which needs no thread of the provider (docs/semantics.md, "Lost by the clock").
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "blocked_provider.hpp"
#include "fault_support.hpp"
#include "timing.hpp"

namespace redis_test {

TEST_CASE("a handle whose network thread is blocked past its lease is reported lost by the "
          "clock, and not before",
          "[redis][lost][timing]") {
  // Long enough for a slow machine's acquire; the thread is blocked on purpose.
  auto provider = dlock::make_provider(endpoint() + "?expiry=3s&prefix=" + prefix());
  support::check_lost_by_clock_while_blocked(*provider, support::latency_bound(100ms));
}

TEST_CASE("a RedLock handle whose network thread is blocked past its lease is reported lost by "
          "the clock, and not before",
          "[redis][lost][timing]") {
  auto provider = dlock::make_provider(redlock_endpoint() + "?expiry=3s&prefix=" + prefix());
  support::check_lost_by_clock_while_blocked(*provider, support::latency_bound(100ms));
}

}  // namespace redis_test
