// What the dlock benchmarks share: timing, summaries, the two-process handoff, the uncontended
// loop.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <dlock/dlock.hpp>

namespace dlock_bench {

using clock_type = std::chrono::steady_clock;
using micros = std::chrono::duration<double, std::micro>;

std::int64_t now_ns();

/// A field of /proc/self/status as a number: "VmRSS:" (KiB), "Threads:"; -1 if absent.
long status_field(const std::string& field);

/// Bytes the heap has handed out and not had back (every arena), which unlike the resident
/// size does not hide allocations in memory freed earlier.
std::size_t heap_in_use();

struct summary {
  double median_us;
  double p99_us;
};

summary summarize(std::vector<double> samples);

/// One line: "<what>  median .. us  p99 .. us  (n=..)".
void print_row(const std::string& what, const summary& s, std::size_t n);

/// `url` with the query option `option` ("name=value") added.
std::string with_option(const std::string& url, const std::string& option);

/// acquire() + release of `lock`, `iterations` times; the time of each, in microseconds.
std::vector<double> uncontended(dlock::distributed_lock& lock, int iterations);

/// The second of two runs of `cycle` in a row. Interleaved samples on several connections
/// compare fairly only this way: a connection used just before (its server process or thread
/// awake, its caches warm) answers sooner than one that sat idle while the others ran, and the
/// first run of each pair pays that for every kind alike.
template <typename Cycle>
double second_of_two(Cycle&& cycle) {
  (void)cycle();
  return cycle();
}

/// Uncontended acquire + release of one reader-writer lock at `url`, `iterations` times each,
/// interleaved so that all see the same load: beside a plain lock, a read, a write (which takes
/// the upgrade gate first) and an upgradeable read that is upgraded before its release. Prints
/// a row each and the cost of a write over a lock.
void print_reader_writer_rows(const std::string& url, int iterations);

/// Uncontended acquire + release at `url` three ways, `iterations` times each, interleaved so
/// that all see the same load: the blocking acquire(), async_acquire with a callback bound to
/// an io_context the caller runs, and async_acquire with use_awaitable in a coroutine there. Prints a row each and the ratios of the async medians to the blocking one.
void print_async_rows(const std::string& url, int iterations);

/// Starts `waiters` async acquires of one held name at `url` on one provider, prints the
/// resident memory per waiter and the process's threads before and while they wait, then
/// stops them all with one stop request and prints how long they took to complete.
void print_async_waiters(const std::string& url, int waiters);

/// Two processes take strict turns on one lock at `url`, each handing over only to a peer
/// that is already waiting and has had `settle` to block; each sample is the time from the
/// holder starting release() to the waiter's acquire() returning. Forks: call it while this
/// process has no threads (no live provider).
std::vector<double> handoff(const std::string& url, int rounds, std::chrono::microseconds settle);

/// The same turns, but the holder asks `peer_blocked` (in its own process, again and again,
/// never asleep) until the waiter is blocked at the server, then releases at once: the hot
/// handoff, beside a raw floor whose holder polls the server the same way.
std::vector<double> handoff(const std::string& url, int rounds,
                            const std::function<bool()>& peer_blocked);

/// `contenders` processes acquire and release the lock "contended" at `url` for `seconds`;
/// grants per second, all processes together. Forks: call it while this process has no threads.
/// Throws std::runtime_error when a contender fails.
double grants_per_second(const std::string& url, int contenders, double seconds);

/// As grants_per_second, but the grants of each process (at most 1024 processes).
std::vector<std::int64_t> grants_per_process(const std::string& url, int contenders,
                                             double seconds);

/// As grants_per_process, but the contenders are threads of this process, each with a
/// provider of its own (as Curator's clients are threads of one JVM).
std::vector<std::int64_t> grants_per_thread(const std::string& url, int contenders,
                                            double seconds);

/// The command line the backend benchmarks share:
/// `<program> URL [--iterations N] [--handoffs N] [--contenders P] [--seconds S]`.
struct run_options {
  std::string url;
  int iterations = 2000;
  int handoffs = 500;
  int contenders = 8;
  double seconds = 5;
};

/// Parses the command line; on a usage error prints one (naming `url_form`) and returns
/// std::nullopt, and the program exits 64.
std::optional<run_options> parse_run_options(int argc, char** argv, const std::string& program,
                                             const std::string& url_form);

}  // namespace dlock_bench
