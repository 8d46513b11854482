#include "stall_watch.hpp"

namespace support {

namespace {

using namespace std::chrono_literals;
constexpr auto tick_period = 1ms;
// A wake-up this late past its tick is the scheduler's ordinary jitter, not lost time.
constexpr auto jitter = 1ms;

}  // namespace

stall_watch::stall_watch() : ticker_([this](std::stop_token stop) { tick(stop); }) {}

void stall_watch::reset() {
  longest_ = 0;
  lost_ = 0;
}

stall_watch::clock_type::duration stall_watch::longest() const {
  return clock_type::duration(longest_.load());
}

stall_watch::clock_type::duration stall_watch::lost() const {
  return clock_type::duration(lost_.load());
}

void stall_watch::tick(const std::stop_token& stop) {
  auto last = clock_type::now();
  while (!stop.stop_requested()) {
    std::this_thread::sleep_for(tick_period);
    const auto now = clock_type::now();
    const auto gap = now - last;
    last = now;
    clock_type::rep seen = longest_.load();
    while (gap.count() > seen && !longest_.compare_exchange_weak(seen, gap.count())) {
    }
    const auto excess = gap - tick_period - jitter;
    if (excess > clock_type::duration::zero()) lost_ += excess.count();
  }
}

}  // namespace support
