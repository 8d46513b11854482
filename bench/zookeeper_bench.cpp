// dlock-zookeeper-bench: dlock::zookeeper beside the raw ZooKeeper C client it is built on.
//
//   dlock-zookeeper-bench URL [--iterations N] [--handoffs N] [--contenders P] [--seconds S]
//
// URL: the server or ensemble, zookeeper://host:port[,host:port...]
// floor: the three calls an uncontended grant needs at least, on the raw C client dlock links
//   (the single-threaded build): create an EPHEMERAL_SEQUENTIAL child, list the parent, delete
//   the child, each waited for on the calling thread's zookeeper_interest/process loop.
// uncontended: dlock acquire() + release of one lock, N times, in the same run.
// handoff: two processes take turns on one lock; each sample is the time from the holder
//   starting release() to the waiter's acquire() returning.
// contended: P processes acquire and release one lock for S seconds; grants per second.
// Then, when the build found a JDK and Curator's jars, bench/curator/CuratorBench.java does
// the same with Apache Curator's InterProcessMutex against the same server.
// docs/benchmarks.md records the figures and the command that produced them.
#include <poll.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"

namespace {

using namespace dlock_bench;

void ignore_events(zhandle_t*, int, int, const char*, void*) {}

struct handle_closer {
  void operator()(zhandle_t* handle) const { zookeeper_close(handle); }
};

std::string hosts_of(const std::string& url) {
  const auto parsed = dlock::provider_url::parse(url);
  std::string hosts;
  for (const auto& host : parsed.hosts) {
    hosts += (hosts.empty() ? "" : ",") + host.host + ":" + std::to_string(host.port.value_or(2181));
  }
  return hosts;
}

// One round of the single-threaded client's loop on this thread: wait for what
// zookeeper_interest() names, then let zookeeper_process() read and run the completions.
void drive_once(zhandle_t* zh) {
  int fd = -1;
  int interest = 0;
  timeval tv{};
  if (zookeeper_interest(zh, &fd, &interest, &tv) != ZOK) fd = -1;
  pollfd watched{.fd = fd, .events = 0, .revents = 0};
  if (interest & ZOOKEEPER_READ) watched.events |= POLLIN;
  if (interest & ZOOKEEPER_WRITE) watched.events |= POLLOUT;
  const int millis = static_cast<int>(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
  if (::poll(&watched, fd >= 0 ? 1 : 0, fd >= 0 ? millis : 10) <= 0) return;
  int events = 0;
  if (watched.revents & (POLLIN | POLLERR | POLLHUP)) events |= ZOOKEEPER_READ;
  if (watched.revents & (POLLOUT | POLLERR | POLLHUP)) events |= ZOOKEEPER_WRITE;
  zookeeper_process(zh, events);
}

// A call's outcome, written by its completion: 1 until then (ZooKeeper's codes are 0 or less).
struct outcome {
  int rc = 1;
  std::string created;
};
void on_done(int rc, const void* data) { static_cast<outcome*>(const_cast<void*>(data))->rc = rc; }
void on_created(int rc, const char* path, const void* data) {
  auto* to = static_cast<outcome*>(const_cast<void*>(data));
  if (path) to->created = path;
  to->rc = rc;
}
void on_children(int rc, const String_vector*, const void* data) { on_done(rc, data); }

// Makes the call `start` (given the outcome to pass as completion data) and drives the client
// until it completed; returns its code.
template <class Start>
int call(zhandle_t* zh, outcome& result, Start start) {
  result.rc = 1;
  const int rc = start(&result);
  if (rc != ZOK) return rc;
  while (result.rc == 1) drive_once(zh);
  return result.rc;
}

std::vector<double> raw_floor(const std::string& hosts, const std::string& parent, int iterations) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  std::unique_ptr<zhandle_t, handle_closer> zh(
      zookeeper_init(hosts.c_str(), ignore_events, 15000, nullptr, nullptr, 0));
  if (!zh) throw std::runtime_error("zookeeper_init failed");
  const auto connect_deadline = clock_type::now() + std::chrono::seconds(10);
  while (zoo_state(zh.get()) != ZOO_CONNECTED_STATE) {
    if (clock_type::now() > connect_deadline) {
      throw std::runtime_error("no ZooKeeper session at " + hosts);
    }
    drive_once(zh.get());
  }
  outcome result;
  const int made = call(zh.get(), result, [&](outcome* to) {
    return zoo_acreate(zh.get(), parent.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, on_created, to);
  });
  if (made != ZOK && made != ZNODEEXISTS) throw std::runtime_error(zerror(made));
  const std::string prefix = parent + "/_c_00000000-0000-4000-8000-000000000000-lock-";
  std::vector<double> samples;
  samples.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    const auto start = clock_type::now();
    int rc = call(zh.get(), result, [&](outcome* to) {
      return zoo_acreate(zh.get(), prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE,
                         ZOO_EPHEMERAL_SEQUENTIAL, on_created, to);
    });
    if (rc == ZOK) {
      rc = call(zh.get(), result, [&](outcome* to) {
        return zoo_aget_children(zh.get(), parent.c_str(), 0, on_children, to);
      });
    }
    if (rc == ZOK) {
      rc = call(zh.get(), result, [&](outcome* to) {
        return zoo_adelete(zh.get(), result.created.c_str(), -1, on_done, to);
      });
    }
    if (rc != ZOK) throw std::runtime_error(std::string("raw floor: ") + zerror(rc));
    samples.push_back(micros(clock_type::now() - start).count());
  }
  call(zh.get(), result, [&](outcome* to) {
    return zoo_adelete(zh.get(), parent.c_str(), -1, on_done, to);
  });
  return samples;
}

}  // namespace

int main(int argc, char** argv) try {
  const auto options = parse_run_options(argc, argv, "dlock-zookeeper-bench", "zookeeper://host:port[,...]");
  if (!options) return 64;
  const auto& [server, iterations, handoffs, contenders, seconds] = *options;
  const std::string base = "/dlock-bench-" + std::to_string(::getpid());
  const std::string url = "zookeeper://" + hosts_of(server) + base;
  std::printf("dlock-zookeeper-bench: %s\n", url.c_str());

  // The runs that fork come first, while this process has no provider (and so no threads).
  // 3 ms: enough for a ZooKeeper waiter to queue its node and set its watch.
  const auto handoff_samples = handoff(url, handoffs, std::chrono::microseconds(3000));
  const double rate = grants_per_second(url, contenders, seconds);
  {
    auto provider = dlock::make_provider(url);
    auto lock = provider->create_lock("uncontended");
    const std::string raw_parent = base + "-raw";
    uncontended(lock, iterations / 10);  // warm-up
    raw_floor(hosts_of(server), raw_parent, iterations / 10);
    const auto floor = summarize(raw_floor(hosts_of(server), raw_parent, iterations));
    const auto ours = summarize(uncontended(lock, iterations));
    print_row("raw create+getChildren+delete (the floor)", floor, iterations);
    print_row("dlock acquire+release, uncontended", ours, iterations);
    std::printf("%-44s median %9.2fx\n", "ratio to the floor", ours.median_us / floor.median_us);
  }
  print_reader_writer_rows(url, iterations);
  print_async_rows(url, iterations);
  print_async_waiters(url, 10000);
  print_row("dlock handoff between two processes", summarize(handoff_samples),
            handoff_samples.size());
  std::printf("%-44s %9.0f grants/s (%d processes, %.0f s)\n", "dlock contended", rate,
              contenders, seconds);
  if (std::string(DLOCK_CURATOR_BENCH_CLASSPATH).empty()) {
    std::printf("(no Curator figures: this build found no JDK or no Curator jars)\n");
    return 0;
  }
  std::fflush(stdout);
  const std::string curator = std::string(DLOCK_JAVA) + " -cp " + DLOCK_CURATOR_BENCH_CLASSPATH +
                              " CuratorBench " + hosts_of(server) + " " + base + "-curator " +
                              std::to_string(iterations) + " " + std::to_string(handoffs) + " " +
                              std::to_string(contenders) + " " + std::to_string(seconds);
  return std::system(curator.c_str()) == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "dlock-zookeeper-bench: " << e.what() << "\n";
  return 1;
}
