// dlock-peer-bench: the workload bench/peers.sh runs on dlock and on every peer library, for
// one URL, printed as "key value" lines that the script puts in one table.
//
//   dlock-peer-bench URL [--iterations N] [--handoffs N] [--contenders P] [--seconds S]
//                        [--settle-us U] [--uncontended-only | --contended-only]
//
// uncontended_us: median of N acquire() + release of one lock (after N/10 to warm up).
// handoff_us: two processes take strict turns on one lock, handing over only to a peer that
//   has waited U us; median time from the holder starting release() to the waiter's
//   acquire() returning.
// contended_per_s, contended_fewest, contended_most: P processes acquire and release one
//   lock for S seconds; all their grants per second, and the fewest and most of one process.
// contended_threads_per_s, contended_threads_fewest, contended_threads_most: the same with P
//   threads of one process, each with a provider (a session) of its own, as Curator's P
//   clients are threads of one JVM.
// contended_switches_per_grant, contended_threads_switches_per_grant: the context switches
//   (voluntary and not) of the contenders, all their threads, over their grants: what the
//   thread hops of a grant cost (the server's own are not counted).
// contended_wakeups_per_grant, contended_threads_wakeups_per_grant: the voluntary ones alone
//   (a thread blocked, to be woken later), which preemptions on a loaded machine do not add to.
// --uncontended-only: the first figure alone; --contended-only: the contention's figures alone
//   (bench/peers.sh repeats both, alternating with the peers', so that all see the same load).
// bench/peers/py_lock_bench.py and bench/curator/CuratorBench.java print the same keys.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"

namespace {

struct switches {
  std::int64_t all = 0;
  std::int64_t voluntary = 0;
  switches operator-(const switches& before) const {
    return {all - before.all, voluntary - before.voluntary};
  }
};

/// Context switches of `who` (RUSAGE_SELF: every thread of this process; RUSAGE_CHILDREN: the
/// children waited for).
switches context_switches(int who) {
  rusage usage{};
  ::getrusage(who, &usage);
  return {usage.ru_nvcsw + usage.ru_nivcsw, usage.ru_nvcsw};
}

}  // namespace

int main(int argc, char** argv) try {
  using namespace dlock_bench;
  // --settle-us is this program's own; the rest are the shared options.
  int settle_us = 3000;
  bool uncontended_only = false;
  bool contended_only = false;
  std::vector<char*> shared;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--settle-us" && i + 1 < argc) {
      settle_us = std::stoi(argv[++i]);
    } else if (std::string(argv[i]) == "--uncontended-only") {
      uncontended_only = true;
    } else if (std::string(argv[i]) == "--contended-only") {
      contended_only = true;
    } else {
      shared.push_back(argv[i]);
    }
  }
  const auto options = parse_run_options(static_cast<int>(shared.size()), shared.data(),
                                         "dlock-peer-bench",
                                         "URL [--settle-us U] [--uncontended-only | --contended-only]");
  if (!options) return 64;
  if (uncontended_only && contended_only) {
    std::cerr << "dlock-peer-bench: --uncontended-only and --contended-only exclude each other\n";
    return 64;
  }
  const auto& [url, iterations, handoffs, contenders, seconds] = *options;

  const auto alone = [&, &url = url, &iterations = iterations] {
    auto provider = dlock::make_provider(url);
    auto lock = provider->create_lock("peer-uncontended");
    uncontended(lock, std::max(1, iterations / 10));
    return summarize(uncontended(lock, iterations));
  };
  if (url.starts_with("memory:") && !uncontended_only) {
    // The handoff and contention runs need a lock that spans processes.
    std::cerr << "dlock-peer-bench: memory:// locks do not span processes; use --uncontended-only\n";
    return 64;
  }
  if (uncontended_only) {
    std::printf("uncontended_us %.2f\n", alone().median_us);
    return 0;
  }
  // The runs that fork come first, while this process has no provider (and so no threads).
  const auto handoff_samples =
      contended_only ? std::vector<double>{}
                     : handoff(url, handoffs, std::chrono::microseconds(settle_us));
  const auto children_before = context_switches(RUSAGE_CHILDREN);
  const auto grants = grants_per_process(url, contenders, seconds);
  const auto process_switches = context_switches(RUSAGE_CHILDREN) - children_before;
  // Threads from here on: no more forks.
  const auto self_before = context_switches(RUSAGE_SELF);
  const auto thread_grants = grants_per_thread(url, contenders, seconds);
  const auto thread_switches = context_switches(RUSAGE_SELF) - self_before;
  if (!contended_only) {
    std::printf("uncontended_us %.2f\n", alone().median_us);
    std::printf("handoff_us %.2f\n", summarize(handoff_samples).median_us);
  }
  const auto print_contention = [&, &seconds = seconds](const char* key,
                                                        const std::vector<std::int64_t>& counts,
                                                        switches counted) {
    const auto total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    std::printf("%s_per_s %.0f\n", key, static_cast<double>(total) / seconds);
    const auto per_grant = [&](std::int64_t n) {
      return static_cast<double>(n) / static_cast<double>(std::max<std::int64_t>(total, 1));
    };
    std::printf("%s_switches_per_grant %.1f\n", key, per_grant(counted.all));
    std::printf("%s_wakeups_per_grant %.1f\n", key, per_grant(counted.voluntary));
    std::printf("%s_fewest %lld\n", key,
                static_cast<long long>(*std::min_element(counts.begin(), counts.end())));
    std::printf("%s_most %lld\n", key,
                static_cast<long long>(*std::max_element(counts.begin(), counts.end())));
  };
  print_contention("contended", grants, process_switches);
  print_contention("contended_threads", thread_grants, thread_switches);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "dlock-peer-bench: " << e.what() << "\n";
  return 1;
}
