// The lock_timeout setting a wait sends: never 0 (no limit) for a short wait, never past what
// the server accepts (INT_MAX ms) for a long one.
#include <chrono>
#include <climits>

#include <catch2/catch.hpp>

#include "lock_timeout.hpp"

using namespace std::chrono_literals;
using dlock::postgres::detail::lock_timeout_ms;

TEST_CASE("lock_timeout rounds up to whole milliseconds, at least 1", "[postgres][unit]") {
  CHECK(lock_timeout_ms(0ns) == 1);
  CHECK(lock_timeout_ms(-5ms) == 1);
  CHECK(lock_timeout_ms(1ns) == 1);
  CHECK(lock_timeout_ms(1500us) == 2);
  CHECK(lock_timeout_ms(2s) == 2000);
}

TEST_CASE("a wait longer than lock_timeout can hold sends no limit", "[postgres][unit]") {
  CHECK(lock_timeout_ms(std::chrono::milliseconds(INT_MAX)) == INT_MAX);
  CHECK(lock_timeout_ms(std::chrono::milliseconds(INT_MAX) + 1ms) == 0);
  CHECK(lock_timeout_ms(std::chrono::days(30)) == 0);
  CHECK(lock_timeout_ms(std::chrono::nanoseconds::max()) == 0);
}
