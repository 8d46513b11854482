// How much of an interval this process spent not running: a stall of the machine (a loaded CI
// runner, the hypervisor), as seen by a thread of its own that wakes every millisecond. A
// latency test takes a sample again when the machine stalled during it, since that delay is
// not the code under test: the watching thread shares nothing with dlock, so dlock's own slow
// paths (a timer, a wait for a server) do not show here.
#pragma once

#include <atomic>
#include <chrono>
#include <stop_token>
#include <thread>

namespace support {

class stall_watch {
 public:
  using clock_type = std::chrono::steady_clock;

  stall_watch();

  /// Starts a new interval.
  void reset();

  /// The longest gap between two wake-ups since reset().
  clock_type::duration longest() const;
  /// The time lost since reset(): each gap's excess over the intended tick, summed, so that
  /// many short delays (a machine busy on every core) count as one long one does.
  clock_type::duration lost() const;

  /// Whether the process lost `limit` or more since reset(), in one gap or summed.
  bool stalled(clock_type::duration limit) const { return longest() >= limit || lost() >= limit; }

 private:
  void tick(const std::stop_token& stop);

  std::atomic<clock_type::rep> longest_{0};
  std::atomic<clock_type::rep> lost_{0};
  std::jthread ticker_;  // last: it uses the counters
};

}  // namespace support
