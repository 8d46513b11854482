// Where a latency bound is held. A promise about time (a stop ends a wait within 100 ms, a lost
// lease is noticed within its bound) means something only on the code users run, with the
// machine to itself: the release build's `timing` label, one test at a time
// (docs/testing.md#timing-bounds). Everywhere else (ASan+UBSan runs every test 2-3 times slower,
// three at a time on two cores) the same case checks its outcome against a generous deadline,
// so that a loaded machine fails no test and a hang still does.
#pragma once

#include <algorithm>
#include <chrono>

namespace support {

#ifdef DLOCK_TIMING_BUILD
/// True in the `timing` label's programs: bounds are held as documented.
inline constexpr bool holds_latency_bounds = true;
#else
inline constexpr bool holds_latency_bounds = false;
#endif

/// `bound` where latency bounds are held; elsewhere a deadline that only a hang misses: twenty
/// times the bound, and at least 2 s.
constexpr std::chrono::milliseconds latency_bound(std::chrono::milliseconds bound) {
  using namespace std::chrono_literals;
  return holds_latency_bounds ? bound : std::max<std::chrono::milliseconds>(bound * 20, 2s);
}

}  // namespace support
