// dlock-bench: latency of the file backend beside the syscall floor it is built on.
//
//   dlock-bench [--dir DIR] [--iterations N] [--handoffs N]
//
// uncontended: acquire + release of one lock, N times, beside the raw
//   open + flock(LOCK_EX) + flock(LOCK_UN) + close on the same kind of file in the same run,
//   and that floor plus the four system calls a safe grant adds (inode check, fencing counter).
// handoff: two processes take turns on one lock; each sample is the time from the holder
//   starting release() to the waiter's acquire() returning (CLOCK_MONOTONIC, shared memory).
// wait endings: how soon a waiting acquire returns after a stop request, and how far past
//   its timeout a try_acquire(5ms) on a held lock returns.
// docs/benchmarks.md records the figures and the command that produced them.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"

namespace {

using namespace dlock_bench;

std::vector<double> raw_flock_floor(const std::filesystem::path& path, int iterations) {
  std::vector<double> samples;
  samples.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    const auto start = clock_type::now();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::flock(fd, LOCK_UN) != 0) {
      throw std::runtime_error(std::string("raw flock failed: ") + std::strerror(errno));
    }
    ::close(fd);
    samples.push_back(micros(clock_type::now() - start).count());
  }
  return samples;
}

// The floor plus the system calls every safe grant needs: the inode check that makes lock
// file removal safe (fstat + stat) and the fencing counter (pread + pwrite).
std::vector<double> raw_flock_with_checks(const std::filesystem::path& path, int iterations) {
  std::vector<double> samples;
  samples.reserve(iterations);
  char counter[21] = {};
  for (int i = 0; i < iterations; ++i) {
    const auto start = clock_type::now();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    struct stat by_fd {}, by_path {};
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::fstat(fd, &by_fd) != 0 ||
        ::stat(path.c_str(), &by_path) != 0 || ::pread(fd, counter, sizeof counter, 0) < 0) {
      throw std::runtime_error(std::string("raw flock failed: ") + std::strerror(errno));
    }
    std::snprintf(counter, sizeof counter, "%020d", i);
    if (::pwrite(fd, counter, sizeof counter - 1, 0) < 0) {
      throw std::runtime_error(std::string("raw pwrite failed: ") + std::strerror(errno));
    }
    ::close(fd);
    samples.push_back(micros(clock_type::now() - start).count());
  }
  return samples;
}

// How late a waiting acquire returns after its stop request, and after its timeout.
struct wait_endings {
  std::vector<double> after_stop_us;
  std::vector<double> past_timeout_us;
};

wait_endings wait_ending_latency(const std::string& url, int rounds) {
  auto holder = dlock::make_provider(url);
  auto waiter = dlock::make_provider(url);
  dlock::lock_handle held = holder->create_lock("endings").acquire();
  auto lock = waiter->create_lock("endings");
  wait_endings result;
  for (int i = 0; i < rounds; ++i) {
    std::stop_source stop;
    std::atomic<std::int64_t> returned_ns{0};
    std::thread waiting([&] {
      (void)lock.try_acquire(std::chrono::hours(1), stop.get_token());
      returned_ns = now_ns();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let it queue and wait
    const std::int64_t requested = now_ns();
    stop.request_stop();
    waiting.join();
    result.after_stop_us.push_back((returned_ns - requested) / 1000.0);

    constexpr auto timeout = std::chrono::milliseconds(5);
    const std::int64_t started = now_ns();
    (void)lock.try_acquire(timeout);
    const double elapsed_us = (now_ns() - started) / 1000.0;
    result.past_timeout_us.push_back(elapsed_us - 5000.0);
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) try {
  std::filesystem::path dir;
  int iterations = 20000;
  int handoffs = 2000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--dir") {
      dir = argv[++i];
    } else if (i + 1 < argc && arg == "--iterations") {
      iterations = std::stoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--handoffs") {
      handoffs = std::min(std::stoi(argv[++i]), 100000);
    } else {
      std::cerr << "usage: dlock-bench [--dir DIR] [--iterations N] [--handoffs N]\n";
      return 64;
    }
  }
  bool own_dir = false;
  if (dir.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "dlock-bench-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    dir = pattern;
    own_dir = true;
  }
  const std::string url = "file://" + std::filesystem::absolute(dir).string();
  std::printf("dlock-bench: file backend in %s\n", dir.c_str());

  // 200 us: enough for a file waiter to block in its wait for inotify.
  const auto handoff_samples = handoff(url, handoffs, std::chrono::microseconds(200));
  {
    auto provider = dlock::make_provider(url);
    auto lock = provider->create_lock("uncontended");
    uncontended(lock, iterations / 10);  // warm-up
    raw_flock_floor(dir / "raw.lock", iterations / 10);
    const auto floor = summarize(raw_flock_floor(dir / "raw.lock", iterations));
    const auto checked = summarize(raw_flock_with_checks(dir / "raw-checked.lock", iterations));
    const auto ours = summarize(uncontended(lock, iterations));
    print_row("raw open+flock+flock(UN)+close", floor, iterations);
    print_row("raw + fstat+stat+pread+pwrite (safe grant)", checked, iterations);
    print_row("dlock acquire+release, uncontended", ours, iterations);
    std::printf("%-44s median %9.2fx\n", "ratio to the floor", ours.median_us / floor.median_us);
  }
  print_row("dlock handoff between two processes", summarize(handoff_samples),
            handoff_samples.size());
  const auto endings = wait_ending_latency(url, 200);
  print_row("waiting acquire returns after stop request", summarize(endings.after_stop_us),
            endings.after_stop_us.size());
  print_row("try_acquire(5ms) returns past its timeout", summarize(endings.past_timeout_us),
            endings.past_timeout_us.size());
  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "dlock-bench: " << e.what() << "\n";
  return 1;
}
