// RedLock's validity arithmetic, a pure function of the expiry and the send time.
#include <catch2/catch.hpp>

#include "redlock.hpp"

using namespace std::chrono_literals;
using dlock::redis::detail::clock_drift;
using dlock::redis::detail::valid_until;

TEST_CASE("the drift allowance is 1 % of the expiry plus 2 ms", "[redis][unit]") {
  CHECK(clock_drift(30s) == 302ms);
  CHECK(clock_drift(10ms) == 2100us);
}

TEST_CASE("a grant is valid for expiry - elapsed - drift after its request was sent",
          "[redis][unit]") {
  const auto sent = std::chrono::steady_clock::time_point{} + 1h;
  CHECK(valid_until(sent, 30s) == sent + 30s - 302ms);
  // 29.698 s after the send no validity is left: a grant confirmed only then is void.
  const auto late = sent + 29'698ms;
  CHECK(valid_until(sent, 30s) - late == 0ms);
}
