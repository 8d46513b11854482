// Private to dlock::postgres: the lock_timeout setting for a wait.
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>

namespace dlock::postgres::detail {

/// The lock_timeout (ms) that ends a wait of `left` at its end: at least 1, since 0 means no
/// limit; but 0 past what the setting can hold (INT_MAX ms, about 24.8 days), which the server
/// rejects as out of range. Such a wait is ended by its own deadline instead (the core cancels
/// it; a transaction lock then waits without limit).
inline long long lock_timeout_ms(std::chrono::nanoseconds left) {
  const auto milliseconds = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  if (milliseconds > INT_MAX) return 0;
  return std::max<long long>(1, milliseconds);
}

}  // namespace dlock::postgres::detail
