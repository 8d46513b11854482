#include "bench_support.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <new>
#include <numeric>
#include <stdexcept>
#include <thread>

namespace dlock_bench {

namespace {

constexpr int max_samples = 100000;

// Shared between the two processes of the handoff run.
struct handoff_board {
  std::atomic<std::int64_t> release_started_ns{0};
  std::atomic<int> last_holder{-1};
  std::atomic<int> waiting[2] = {0, 0};
  std::atomic<int> finished[2] = {0, 0};
  std::atomic<int> sample_count{0};
  double samples_us[max_samples];
};

// The two processes wait for their turn asleep, never spinning: on a loaded machine a spinning
// process takes the core that the peer's provider thread needs to send its wait or its
// release, which the samples then count. Neither wait is inside a sample.
constexpr auto poll_interval = std::chrono::microseconds(50);

// Before its release the holder sleeps `settle`, or, given `peer_blocked`, asks it until the
// peer is blocked.
void take_turns(handoff_board& board, int me, const std::string& url, int rounds,
                std::chrono::microseconds settle, const std::function<bool()>& peer_blocked) {
  auto provider = dlock::make_provider(url);
  auto lock = provider->create_lock("handoff");
  const int peer = 1 - me;
  for (int i = 0; i < rounds; ++i) {
    // Strict turns: flock(2) is not fair, and a releaser that tries again at once usually
    // wins against a waiter that is still waking up.
    while (i > 0 && board.last_holder.load() == me && !board.finished[peer]) {
      std::this_thread::sleep_for(poll_interval);
    }
    board.waiting[me] = 1;
    dlock::lock_handle held = lock.acquire();
    const std::int64_t acquired = now_ns();
    board.waiting[me] = 0;
    if (board.last_holder.load() == peer) {
      const int slot = board.sample_count.fetch_add(1);
      if (slot < max_samples) {
        board.samples_us[slot] = (acquired - board.release_started_ns.load()) / 1000.0;
      }
    }
    board.last_holder = me;
    // Hand over only to a peer that is already waiting, and give it time to block, so each
    // sample is a real wake-up rather than a fresh uncontended acquire.
    while (!board.waiting[peer] && !board.finished[peer]) {
      std::this_thread::sleep_for(poll_interval);
    }
    if (peer_blocked) {
      while (!board.finished[peer] && !peer_blocked()) {
      }
    } else {
      std::this_thread::sleep_for(settle);
    }
    board.release_started_ns = now_ns();
    held.release();
  }
  board.finished[me] = 1;
}

// Shared by the contending processes.
struct contention_board {
  static constexpr int max_contenders = 1024;
  std::atomic<int> ready{0};
  std::atomic<std::int64_t> stop_at_ns{0};
  std::atomic<std::int64_t> grants[max_contenders] = {};
};

}  // namespace

long status_field(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(field.size()));
  }
  return -1;
}

std::size_t heap_in_use() {
  const struct mallinfo2 info = ::mallinfo2();
  return info.uordblks + info.hblkhd;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             clock_type::now().time_since_epoch())
      .count();
}

summary summarize(std::vector<double> samples) {
  // No samples (a row asked for with a count of 0): "nan", and print_row says so.
  if (samples.empty()) return {std::nan(""), std::nan("")};
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[std::min(samples.size() - 1, static_cast<std::size_t>(q * samples.size()))];
  };
  return {at(0.5), at(0.99)};
}

std::string with_option(const std::string& url, const std::string& option) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + option;
}

void print_row(const std::string& what, const summary& s, std::size_t n) {
  if (n == 0) {
    std::printf("%-44s not measured (n=0)\n", what.c_str());
    return;
  }
  std::printf("%-44s median %9.2f us   p99 %9.2f us   (n=%zu)\n", what.c_str(), s.median_us,
              s.p99_us, n);
}

std::vector<double> uncontended(dlock::distributed_lock& lock, int iterations) {
  std::vector<double> samples;
  samples.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    const auto start = clock_type::now();
    {
      dlock::lock_handle held = lock.acquire();
    }
    samples.push_back(micros(clock_type::now() - start).count());
  }
  return samples;
}

namespace {

template <typename Work>
double timed_us(Work&& work) {
  const auto start = clock_type::now();
  work();
  return micros(clock_type::now() - start).count();
}

}  // namespace

void print_reader_writer_rows(const std::string& url, int iterations) {
  auto provider = dlock::make_provider(url);
  auto lock = provider->create_lock("bench-lock");
  auto rw = provider->create_reader_writer_lock("bench-rw");
  std::vector<double> locks, reads, writes, upgrades;
  for (int i = -iterations / 10; i < iterations; ++i) {  // the first tenth warms up
    const double samples[] = {timed_us([&] { (void)lock.acquire(); }),
                              timed_us([&] { (void)rw.acquire_read(); }),
                              timed_us([&] { (void)rw.acquire_write(); }),
                              timed_us([&] {
                                auto held = rw.acquire_upgradeable_read();
                                held.upgrade();
                              })};
    if (i < 0) continue;
    locks.push_back(samples[0]);
    reads.push_back(samples[1]);
    writes.push_back(samples[2]);
    upgrades.push_back(samples[3]);
  }
  const auto lock_summary = summarize(locks);
  const auto write_summary = summarize(writes);
  print_row("lock acquire+release (for comparison)", lock_summary, locks.size());
  print_row("rw read acquire+release", summarize(reads), reads.size());
  print_row("rw write acquire+release (gate + write)", write_summary, writes.size());
  print_row("rw upgradeable read + upgrade + release", summarize(upgrades), upgrades.size());
  std::printf("%-44s median %9.2fx\n", "rw write / lock",
              write_summary.median_us / lock_summary.median_us);
}

namespace {

std::vector<double> handoff_turns(const std::string& url, int rounds,
                                  std::chrono::microseconds settle,
                                  const std::function<bool()>& peer_blocked) {
  void* memory = ::mmap(nullptr, sizeof(handoff_board), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* board = new (memory) handoff_board;
  // Forked before either side has a provider: a process with threads must not fork.
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      take_turns(*board, 1, url, rounds, settle, peer_blocked);
      ::_exit(0);
    } catch (const std::exception& e) {
      std::cerr << "handoff child: " << e.what() << "\n";
      ::_exit(1);
    }
  }
  take_turns(*board, 0, url, rounds, settle, peer_blocked);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("handoff child failed");
  const int n = std::min(board->sample_count.load(), max_samples);
  std::vector<double> samples(board->samples_us, board->samples_us + n);
  ::munmap(memory, sizeof(handoff_board));
  return samples;
}

}  // namespace

std::vector<double> handoff(const std::string& url, int rounds, std::chrono::microseconds settle) {
  return handoff_turns(url, rounds, settle, {});
}

std::vector<double> handoff(const std::string& url, int rounds,
                            const std::function<bool()>& peer_blocked) {
  return handoff_turns(url, rounds, std::chrono::microseconds(0), peer_blocked);
}

std::vector<std::int64_t> grants_per_process(const std::string& url, int contenders,
                                             double seconds) {
  if (contenders < 1 || contenders > contention_board::max_contenders) {
    throw std::invalid_argument("contenders must be 1 to " +
                                std::to_string(contention_board::max_contenders));
  }
  void* memory = ::mmap(nullptr, sizeof(contention_board), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* board = new (memory) contention_board;
  std::vector<pid_t> children;
  for (int i = 0; i < contenders; ++i) {
    const pid_t child = ::fork();  // this process has no threads here: no live provider
    if (child == 0) {
      try {
        auto provider = dlock::make_provider(url);
        auto lock = provider->create_lock("contended");
        board->ready.fetch_add(1);
        while (board->stop_at_ns.load() == 0) std::this_thread::yield();
        std::int64_t mine = 0;
        while (now_ns() < board->stop_at_ns.load()) {
          dlock::lock_handle held = lock.acquire();
          ++mine;
        }
        board->grants[i] = mine;
        ::_exit(0);
      } catch (const std::exception& e) {
        std::cerr << "contender: " << e.what() << "\n";
        board->ready.fetch_add(1);  // counted, so that the others do not wait for it
        board->stop_at_ns = 1;
        ::_exit(1);
      }
    }
    children.push_back(child);
  }
  while (board->ready.load() < contenders) std::this_thread::yield();
  // A contender that failed set stop_at_ns already: the others stop at once.
  std::int64_t unset = 0;
  board->stop_at_ns.compare_exchange_strong(unset,
                                            now_ns() + static_cast<std::int64_t>(seconds * 1e9));
  bool failed = false;
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    failed = failed || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  std::vector<std::int64_t> grants(board->grants, board->grants + contenders);
  ::munmap(memory, sizeof(contention_board));
  if (failed) throw std::runtime_error("a contender failed");
  return grants;
}

std::vector<std::int64_t> grants_per_thread(const std::string& url, int contenders,
                                            double seconds) {
  if (contenders < 1) throw std::invalid_argument("contenders must be at least 1");
  // Each thread has its provider (a session or connection of its own), as each process has.
  std::vector<std::shared_ptr<dlock::provider>> providers;
  std::vector<dlock::distributed_lock> locks;
  for (int i = 0; i < contenders; ++i) {
    providers.push_back(dlock::make_provider(url));
    locks.push_back(providers.back()->create_lock("contended"));
  }
  std::vector<std::int64_t> grants(static_cast<std::size_t>(contenders), 0);
  std::atomic<std::int64_t> stop_at_ns{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < contenders; ++i) {
    threads.emplace_back([&, i] {
      try {
        while (stop_at_ns.load() == 0) std::this_thread::yield();
        std::int64_t mine = 0;
        while (now_ns() < stop_at_ns.load()) {
          dlock::lock_handle held = locks[static_cast<std::size_t>(i)].acquire();
          ++mine;
        }
        grants[static_cast<std::size_t>(i)] = mine;
      } catch (const std::exception& e) {
        std::cerr << "contender: " << e.what() << "\n";
        failed = true;
        stop_at_ns = 1;
      }
    });
  }
  stop_at_ns = now_ns() + static_cast<std::int64_t>(seconds * 1e9);
  for (auto& thread : threads) thread.join();
  if (failed) throw std::runtime_error("a contender failed");
  return grants;
}

double grants_per_second(const std::string& url, int contenders, double seconds) {
  const auto grants = grants_per_process(url, contenders, seconds);
  return static_cast<double>(std::accumulate(grants.begin(), grants.end(), std::int64_t{0})) /
         seconds;
}

std::optional<run_options> parse_run_options(int argc, char** argv, const std::string& program,
                                             const std::string& url_form) {
  if (argc < 2) {
    std::cerr << "usage: " << program << " " << url_form
              << " [--iterations N] [--handoffs N] [--contenders P] [--seconds S]\n";
    return std::nullopt;
  }
  run_options options{.url = argv[1]};
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--iterations") {
      options.iterations = std::stoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--handoffs") {
      options.handoffs = std::stoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--contenders") {
      options.contenders = std::stoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--seconds") {
      options.seconds = std::stod(argv[++i]);
    } else {
      std::cerr << program << ": unknown argument " << arg << "\n";
      return std::nullopt;
    }
  }
  return options;
}

}  // namespace dlock_bench
