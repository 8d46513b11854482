// dlock-skew-probe: one host of the "cron job once per window" recipe, for the clock-skew test
// (skew_test.cpp), which runs two of it under libfaketime with wall clocks seconds apart.
//
//   dlock-skew-probe URL NAME WINDOW_MS FIRST COUNT HOLD_MS LOG WHO
//
// For each window index i in [FIRST, FIRST + COUNT): waits until this process's wall clock
// reads i * WINDOW_MS (as cron would fire), makes one attempt on lock NAME with a minimum hold
// of HOLD_MS (none when 0), and when granted appends "i WHO token" to LOG and releases at once
// (a job that takes no time). Dynamically linked and built without a sanitizer: libfaketime
// is a preload.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include <dlock/dlock.hpp>

int main(int argc, char** argv) try {
  if (argc != 9) {
    std::cerr << "usage: dlock-skew-probe URL NAME WINDOW_MS FIRST COUNT HOLD_MS LOG WHO\n";
    return 64;
  }
  const std::chrono::milliseconds window(std::stoll(argv[3]));
  const long long first = std::stoll(argv[4]);
  const long long count = std::stoll(argv[5]);
  const std::chrono::milliseconds hold(std::stoll(argv[6]));
  auto provider = dlock::make_provider(argv[1]);
  auto job = provider->create_lock(argv[2]).with_min_hold(hold);
  const int log = ::open(argv[7], O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (log < 0) throw std::runtime_error(std::string("cannot open ") + argv[7]);
  for (long long i = first; i < first + count; ++i) {
    // The wall clock (faked) says when; the monotonic one (not faked) does the waiting.
    const auto fire = std::chrono::system_clock::time_point(window * i);
    std::this_thread::sleep_for(fire - std::chrono::system_clock::now());
    if (auto held = job.try_acquire()) {
      const std::string line = std::to_string(i) + " " + argv[8] + " " +
                               std::to_string(held->fencing_token()) + "\n";
      if (::write(log, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        throw std::runtime_error("cannot write the log");
      }
    }
  }
  ::close(log);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "dlock-skew-probe: " << e.what() << "\n";
  return 1;
}
