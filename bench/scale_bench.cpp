// dlock-scale-bench: how a provider's cost grows with held locks and with waiters on one name,
// for docs/scaling.md (bench/scale.sh runs it on every backend).
//
//   dlock-scale-bench held URL N [--while-held COMMAND]
//   dlock-scale-bench names URL N
//   dlock-scale-bench waiters URL W [--grants G] [--zookeeper-stats HOST:PORT |
//                                                  --redis-stats HOST:PORT]
//
// held: one provider acquires N locks of distinct names and keeps them: the time that took,
//   the client's resident memory, heap, file descriptors and threads per held lock, then runs
//   COMMAND (sh -c; the server's side, measured by the script) while they are held, and the
//   client's CPU meanwhile (what keeping them costs), then the time their release took. A grant that fails (a server limit) ends the run with the number
//   held, how long the failing acquire took and its exception.
// names: acquire() + release of N distinct names in turn: the median time of the first and of
//   the last tenth (what each new name costs, and whether that grows with the names used).
// waiters: W providers (W sessions) in this process contend for one name, each in a thread
//   that acquires and releases at once, until G grants in all: grants per second and, with
//   --zookeeper-stats, the packets the ZooKeeper server received and sent per grant (its
//   `mntr`), or with --redis-stats the commands the Redis server processed per grant: counts
//   that show a herd (every waiter woken by each release) whatever the load.
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"

namespace {

using dlock_bench::clock_type;
using dlock_bench::heap_in_use;
using dlock_bench::status_field;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

long open_descriptors() {
  long count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++count;
  }
  return count;
}

struct footprint {
  long rss_kib = status_field("VmRSS:");
  std::size_t heap = heap_in_use();
  long descriptors = open_descriptors();
  long threads = status_field("Threads:");
};

// The median of the first and of the last tenth of `samples`: how the cost grew in a run.
std::pair<double, double> first_and_last_tenth(const std::vector<double>& samples) {
  const std::size_t tenth = std::max<std::size_t>(1, samples.size() / 10);
  auto median = [](std::vector<double> part) {
    std::sort(part.begin(), part.end());
    return part[part.size() / 2];
  };
  return {median({samples.begin(), samples.begin() + tenth}),
          median({samples.end() - tenth, samples.end()})};
}

// acquire() + release of `count` distinct names, one after the other: the per-name costs
// (a fencing counter, a parent node) without held locks.
int names(const std::string& url, long count) {
  auto provider = dlock::make_provider(url);
  std::vector<double> cycle_us;
  cycle_us.reserve(count);
  const auto start = clock_type::now();
  for (long i = 0; i < count; ++i) {
    const auto cycle = clock_type::now();
    (void)provider->create_lock("scale-name-" + std::to_string(i)).acquire();
    cycle_us.push_back(seconds_since(cycle) * 1e6);
  }
  const auto [first, last] = first_and_last_tenth(cycle_us);
  std::printf("%ld distinct names acquired and released in %.2f s: median of the first tenth "
              "%.1f us, of the last tenth %.1f us\n",
              count, seconds_since(start), first, last);
  return 0;
}

const char* kind_of(const std::exception& e) {
  if (dynamic_cast<const dlock::connection_error*>(&e)) return "dlock::connection_error";
  if (dynamic_cast<const dlock::error*>(&e)) return "dlock::error";
  if (dynamic_cast<const std::invalid_argument*>(&e)) return "std::invalid_argument";
  return "another exception";
}

// At a server's limit: are the locks held so far still held, and what does another
// provider's (another session's) attempt get meanwhile?
void report_at_limit(const std::string& url, std::vector<dlock::lock_handle>& handles) {
  std::size_t lost = 0;
  for (const auto& handle : handles) lost += handle.lost();
  std::printf("at the limit: %zu of %zu held locks lost\n", lost, handles.size());
  const auto attempt = clock_type::now();
  try {
    auto other = dlock::make_provider(url);
    const auto got = other->create_lock("scale-other-session").try_acquire(std::chrono::seconds(0));
    std::printf("at the limit: another provider's try_acquire(0s): %s after %.3f s\n",
                got ? "granted" : "not granted", seconds_since(attempt));
  } catch (const std::exception& e) {
    std::printf("at the limit: another provider's try_acquire(0s) failed after %.3f s: %s: %s\n",
                seconds_since(attempt), kind_of(e), e.what());
  }
  const auto release_start = clock_type::now();
  for (auto& handle : handles) handle.release();
  std::printf("released %zu locks in %.2f s\n", handles.size(), seconds_since(release_start));
}

int held(const std::string& url, long count, const std::string& while_held) {
  auto provider = dlock::make_provider(url);
  {
    // One grant and release first, so that connections and threads are counted as the
    // provider's, not as the locks'.
    auto warm = provider->create_lock("scale-warm-up").acquire();
  }
  const footprint before;
  std::vector<dlock::lock_handle> handles;
  handles.reserve(count);
  const auto start = clock_type::now();
  std::vector<double> acquire_us;
  acquire_us.reserve(count);
  for (long i = 0; i < count; ++i) {
    const auto attempt = clock_type::now();
    try {
      handles.push_back(provider->create_lock("scale-held-" + std::to_string(i)).acquire());
      acquire_us.push_back(seconds_since(attempt) * 1e6);
    } catch (const std::exception& e) {
      std::printf("held %ld locks; acquire %ld failed after %.3f s: %s: %s\n", i, i + 1,
                  seconds_since(attempt), kind_of(e), e.what());
      report_at_limit(url, handles);
      return 2;
    }
  }
  const double took = seconds_since(start);
  const footprint during;
  const double n = static_cast<double>(count);
  std::printf("held %ld locks in %.2f s (%.1f us each; median of the first tenth %.1f us, of "
              "the last tenth %.1f us)\n",
              count, took, took * 1e6 / n, first_and_last_tenth(acquire_us).first,
              first_and_last_tenth(acquire_us).second);
  std::printf("per held lock: %.0f bytes resident, %.0f bytes of heap, %.4f file descriptors; "
              "threads %ld -> %ld\n",
              (during.rss_kib - before.rss_kib) * 1024.0 / n,
              (static_cast<double>(during.heap) - static_cast<double>(before.heap)) / n,
              (during.descriptors - before.descriptors) / n, before.threads, during.threads);
  std::fflush(stdout);
  if (!while_held.empty()) {
    // This process's CPU time meanwhile (RUSAGE_SELF: the command's own is not counted) is
    // what keeping the locks costs: watchdogs, keepalives, monitors.
    const double cpu_before = cpu_seconds();
    const auto held_since = clock_type::now();
    if (std::system(while_held.c_str()) != 0) {
      std::fprintf(stderr, "dlock-scale-bench: the --while-held command failed\n");
    }
    const double held_for = seconds_since(held_since);
    std::printf("kept them %.1f s: client CPU %.2f %% of a core\n", held_for,
                100.0 * (cpu_seconds() - cpu_before) / held_for);
  }
  const auto release_start = clock_type::now();
  for (auto& handle : handles) handle.release();
  std::printf("released %ld locks in %.2f s\n", count, seconds_since(release_start));
  return 0;
}

// A server's counters, by name, from a request the server answers and then closes the
// connection: ZooKeeper's `mntr` ("name<TAB>value" lines), Redis's INFO then QUIT
// ("name:value" lines).
std::map<std::string, long> server_counters(const std::string& host_port,
                                            const std::string& request) {
  const auto colon = host_port.rfind(':');
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host_port.substr(0, colon).c_str(), host_port.substr(colon + 1).c_str(),
                    &hints, &found) != 0) {
    throw std::runtime_error("cannot resolve " + host_port);
  }
  const int fd = ::socket(found->ai_family, found->ai_socktype, 0);
  const bool connected = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0;
  ::freeaddrinfo(found);
  if (!connected ||
      ::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot ask " + host_port + " for its counters");
  }
  std::string text;
  char buffer[4096];
  for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, got);
  ::close(fd);
  std::map<std::string, long> stats;
  std::size_t line_start = 0;
  while (line_start < text.size()) {
    const auto line_end = text.find('\n', line_start);
    const std::string line = text.substr(line_start, line_end - line_start);
    const auto tab = line.find_first_of("\t:");
    if (tab != std::string::npos) {
      try {
        stats[line.substr(0, tab)] = std::stol(line.substr(tab + 1));
      } catch (const std::exception&) {  // a text figure (the version, the server state)
      }
    }
    if (line_end == std::string::npos) break;
    line_start = line_end + 1;
  }
  return stats;
}

struct counters_at {
  std::string host_port;
  std::string request;               // empty: no counters
  std::vector<std::string> figures;  // what to print per grant
};

int waiters(const std::string& url, int count, long grants, const counters_at& stats) {
  std::vector<std::shared_ptr<dlock::provider>> providers;
  for (int i = 0; i < count; ++i) providers.push_back(dlock::make_provider(url));
  std::atomic<long> granted{0};
  std::atomic<bool> go{false};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (auto& provider : providers) {
    threads.emplace_back([&, &provider = *provider] {
      try {
        auto lock = provider.create_lock("scale-waiters");
        while (!go) std::this_thread::yield();
        while (granted.load() < grants) {
          dlock::lock_handle held = lock.acquire();
          granted.fetch_add(1);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dlock-scale-bench: waiter: %s\n", e.what());
        failed.fetch_add(1);
      }
    });
  }
  std::map<std::string, long> stats_before;
  if (!stats.request.empty()) stats_before = server_counters(stats.host_port, stats.request);
  const auto start = clock_type::now();
  go = true;
  for (auto& thread : threads) thread.join();
  const double took = seconds_since(start);
  const double n = static_cast<double>(granted.load());
  std::printf("%d waiters on one name: %.0f grants in %.2f s, %.0f grants/s, %.0f us per grant\n",
              count, n, took, n / took, took * 1e6 / n);
  if (!stats.request.empty()) {
    auto stats_after = server_counters(stats.host_port, stats.request);
    std::printf("%d waiters, at the server per grant:", count);
    for (const auto& figure : stats.figures) {
      std::printf(" %s %.2f", figure.c_str(), (stats_after[figure] - stats_before[figure]) / n);
    }
    std::printf("\n");
  }
  return failed.load() == 0 ? 0 : 1;
}

int usage() {
  std::cerr << "usage: dlock-scale-bench held URL N [--while-held COMMAND]\n"
               "       dlock-scale-bench names URL N\n"
               "       dlock-scale-bench waiters URL W [--grants G] "
               "[--zookeeper-stats HOST:PORT | --redis-stats HOST:PORT]\n";
  return 64;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 4) return usage();
  const std::string mode = argv[1], url = argv[2];
  const long count = std::stol(argv[3]);
  std::string while_held;
  counters_at stats;
  long grants = 2000;
  for (int i = 4; i < argc; i += 2) {
    if (i + 1 == argc) return usage();
    const std::string arg = argv[i];
    if (arg == "--while-held") {
      while_held = argv[i + 1];
    } else if (arg == "--grants") {
      grants = std::stol(argv[i + 1]);
    } else if (arg == "--zookeeper-stats") {
      stats = {argv[i + 1], "mntr", {"zk_packets_received", "zk_packets_sent"}};
    } else if (arg == "--redis-stats") {
      stats = {argv[i + 1], "INFO stats\r\nQUIT\r\n", {"total_commands_processed"}};
    } else {
      return usage();
    }
  }
  if (count < 1) return usage();
  if (mode == "held") return held(url, count, while_held);
  if (mode == "names") return names(url, count);
  if (mode == "waiters") return waiters(url, static_cast<int>(count), grants, stats);
  return usage();
} catch (const std::exception& e) {
  std::cerr << "dlock-scale-bench: " << e.what() << "\n";
  return 1;
}
