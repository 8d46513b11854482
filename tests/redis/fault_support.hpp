// What the Redis fault tests share (redis_fault_test.cpp, redlock_fault_test.cpp): a URL with a
// short lease, a helper process holding a lock, a look at one RedLock node, and timed cycles.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <dlock/dlock.hpp>

#include "../servers/redis_client.hpp"
#include "redis_test_support.hpp"

namespace redis_test {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

/// A URL with a 1 s lease, so that expiries pass quickly, under the test's own client name.
inline std::string url(const std::string& client_name = "dlock",
                       const std::string& base = endpoint()) {
  return base + "?expiry=1s&prefix=" + prefix() + "&client_name=" + client_name;
}

/// A helper process holding the lock `name`, and the fencing token it was granted.
struct helper_holder {
  std::unique_ptr<support::child_process> process;
  std::uint64_t token = 0;
};

inline double milliseconds(clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

/// A connection of the test's own to RedLock node `i` of `nodes`, to look behind dlock.
inline support::redis_connection node_connection(const std::string& nodes, std::size_t i) {
  return support::redis_connection(support::endpoint_hosts(nodes).at(i));
}

/// The slowest and the mean of `cycles` uncontended acquire-and-release cycles, each on a
/// lock of its own, `<base>-<i>`.
struct cycle_times {
  clock::duration slowest{};
  clock::duration mean{};
};

inline cycle_times acquire_release_cycles(dlock::provider& locks, const std::string& base,
                                          int cycles) {
  cycle_times times;
  clock::duration total{};
  for (int i = 0; i < cycles; ++i) {
    const auto start = clock::now();
    auto held = locks.create_lock(base + "-" + std::to_string(i)).acquire(30s);
    held.release();
    const auto took = clock::now() - start;
    total += took;
    times.slowest = std::max(times.slowest, took);
  }
  times.mean = total / cycles;
  return times;
}

inline helper_holder start_holder(const std::string& name) {
  helper_holder holder{std::make_unique<support::child_process>(
      std::vector<std::string>{support::helper_path(), "hold", url(), name, "lock"})};
  auto line = holder.process->read_line(10s);
  REQUIRE(line);
  REQUIRE(line->rfind("acquired ", 0) == 0);
  holder.token = std::stoull(line->substr(9));
  return holder;
}


}  // namespace redis_test
