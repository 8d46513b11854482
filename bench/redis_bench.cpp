// dlock-redis-bench: the Redis backend beside the raw hiredis floor, in the same run.
//
//   dlock-redis-bench redis://127.0.0.1:6379 [--iterations N] [--handoffs N] [--seconds S]
//                     [--held N] [--compare URL]... [--only handoff|handoff-dlock|election]
//
// floor: one SET NX PX and one EVALSHA compare-and-delete on a raw synchronous hiredis
//   connection; the fenced floor, one script that sets the key and increments its fencing
//   counter, and the delete; dlock's uncontended acquire + release; N samples of each,
//   interleaved.
// compare: dlock's uncontended acquire + release over another URL of the same server (rediss://
//   with its TLS options, redis+unix://) and over plain TCP, interleaved in blocks of 100, N
//   times each, and the ratio of their medians.
// parallel floor (RedLock URLs): GET, SET NX PX and EVALSHA delete, each sent to every server
//   before any reply is read (redis_floor.hpp); dlock's uncontended cycle over it.
// pub/sub round trip: PUBLISH on one raw connection until the message is read on another.
// handoff: two processes take turns on one lock (bench_support.hpp), release to acquire; beside
//   it the raw handoff floor, the same turns with raw hiredis (redis_floor.hpp).
// contention: 8 processes acquire and release one name for S seconds: grants per second and
//   the spread of grants per process.
// watchdog: one provider holds N locks for S seconds: the server's commands per second and the
//   client's CPU time meanwhile.
// election: with one candidate leading, leader() and proclaim() beside a raw PING round trip,
//   interleaved, N samples of each.
// --only: that part alone (handoff-dlock: dlock's turns without the floor's, for counting its
//   wake-ups under perf stat), for comparisons run back to back.
// docs/benchmarks.md records the figures and the command that produced them.
#include <hiredis/hiredis.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <iostream>
#include <memory>

#include "bench_support.hpp"
#include "redis_floor.hpp"

namespace {

using namespace dlock_bench;

// One raw grant and release on a synchronous hiredis connection: the least a correct Redis
// lock needs, `SET key token NX PX` and a compare-and-delete script; `fenced`, the least a
// grant with a fencing token needs, one script that sets the key and increments its counter.
class raw_cycle {
 public:
  explicit raw_cycle(redisContext* c)
      : c_(c),
        release_(run(c, {"SCRIPT", "LOAD",
                         "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                         "return redis.call('DEL', KEYS[1]) end return 0"})
                     ->str),
        fenced_grant_(run(c, {"SCRIPT", "LOAD",
                              "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
                              "return redis.call('INCR', KEYS[2]) end return false"})
                          ->str) {}

  /// Microseconds of one grant and its release.
  double grant_and_release_us(bool fenced) {
    const auto start = clock_type::now();
    if (fenced) {
      run(c_, {"EVALSHA", fenced_grant_, "2", key_, key_ + ":fence", token_, "30000"});
    } else {
      run(c_, {"SET", key_, token_, "NX", "PX", "30000"});
    }
    run(c_, {"EVALSHA", release_, "1", key_, token_});
    return micros(clock_type::now() - start).count();
  }

 private:
  redisContext* c_;
  std::string release_, fenced_grant_;
  std::string key_ = "dlock-bench:floor";
  std::string token_ = "0123456789abcdef0123456789abcdef";
};

std::vector<double> pubsub_round_trip(const redis_endpoint& server, int iterations) {
  auto subscriber = connect(server);
  auto publisher = connect(server);
  run(subscriber.get(), {"SUBSCRIBE", "dlock-bench:channel"});
  std::vector<double> samples;
  for (int i = 0; i < iterations; ++i) {
    const auto start = clock_type::now();
    run(publisher.get(), {"PUBLISH", "dlock-bench:channel", "released"});
    void* message = nullptr;
    if (redisGetReply(subscriber.get(), &message) != REDIS_OK) {
      throw std::runtime_error("subscriber lost");
    }
    samples.push_back(micros(clock_type::now() - start).count());
    freeReplyObject(message);
  }
  return samples;
}

// Eight processes, forked before any of them has a provider (a process with threads must not
// fork), each counting its grants into shared memory.
void contention(const std::string& url, int seconds) {
  constexpr int processes = 8;
  void* memory = ::mmap(nullptr, sizeof(std::atomic<long>) * processes, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* grants = new (memory) std::atomic<long>[processes]{};
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    const pid_t child = ::fork();
    if (child == 0) {
      try {
        auto provider = dlock::make_provider(url);
        auto lock = provider->create_lock("contention");
        const auto end = clock_type::now() + std::chrono::seconds(seconds);
        while (clock_type::now() < end) {
          dlock::lock_handle held = lock.acquire(std::chrono::seconds(30));
          ++grants[p];
        }
        ::_exit(0);
      } catch (const std::exception& e) {
        std::cerr << "contender: " << e.what() << "\n";
        ::_exit(1);
      }
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("contender failed");
  }
  long total = 0, fewest = grants[0], most = grants[0];
  for (int p = 0; p < processes; ++p) {
    total += grants[p];
    fewest = std::min<long>(fewest, grants[p]);
    most = std::max<long>(most, grants[p]);
  }
  std::printf("%-44s %9.0f grants/s   per process: fewest %ld, most %ld of %ld\n",
              "8 processes contending for one name", static_cast<double>(total) / seconds, fewest,
              most, total);
  ::munmap(memory, sizeof(std::atomic<long>) * processes);
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

long commands_processed(redisContext* c) {
  const std::string info = run(c, {"INFO", "stats"})->str;
  const std::string field = "total_commands_processed:";
  return std::stol(info.substr(info.find(field) + field.size()));
}

void watchdog_cost(const std::string& url, redisContext* c, int held_count, int seconds) {
  auto provider = dlock::make_provider(url);
  std::vector<dlock::lock_handle> held;
  held.reserve(held_count);
  for (int i = 0; i < held_count; ++i) {
    held.push_back(provider->create_lock("held-" + std::to_string(i)).acquire());
  }
  const long commands_before = commands_processed(c);
  const double cpu_before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const long commands = commands_processed(c) - commands_before;
  const double cpu = cpu_seconds() - cpu_before;
  std::size_t lost = 0;
  for (const auto& h : held) lost += h.lost();
  std::printf("%-44s %9.0f commands/s at the server, client CPU %.1f %%, lost %zu\n",
              ("watchdog with " + std::to_string(held_count) + " held locks").c_str(),
              static_cast<double>(commands) / seconds, 100.0 * cpu / seconds, lost);
}

// leader() and proclaim() as one candidate leads, each the second of two of its kind, beside
// one raw round trip on a synchronous connection.
void print_election_rows(const std::string& url, redisContext* raw, int iterations) {
  auto provider = dlock::make_provider(url);
  dlock::election election = provider->create_election("bench-election");
  dlock::leadership lead = election.campaign();
  const std::function<void()> calls[] = {[&] { run(raw, {"PING"}); },
                                         [&] { (void)election.leader(); },
                                         [&] { lead.proclaim("value"); }};
  const char* const names[] = {"raw PING round trip", "election leader()", "election proclaim()"};
  std::vector<double> samples[3];
  for (int i = -iterations / 10; i < iterations; ++i) {  // the first tenth warms up
    for (std::size_t k = 0; k < 3; ++k) {
      const double us = second_of_two([&] {
        const auto start = clock_type::now();
        calls[k]();
        return std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
      });
      if (i >= 0) samples[k].push_back(us);
    }
  }
  double medians[3];
  for (std::size_t k = 0; k < 3; ++k) {
    const auto row = summarize(samples[k]);
    print_row(names[k], row, samples[k].size());
    medians[k] = row.median_us;
  }
  std::printf("%-44s median %9.2fx\n", "leader() / raw round trip", medians[1] / medians[0]);
  std::printf("%-44s median %9.2fx\n", "proclaim() / raw round trip", medians[2] / medians[0]);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::cerr << "usage: dlock-redis-bench redis://host:port [--iterations N] [--handoffs N]"
                 " [--seconds S] [--held N] [--compare URL]...\n";
    return 64;
  }
  const std::string endpoint = argv[1];
  int iterations = 20000, handoffs = 2000, seconds = 5, held_count = 10000;
  std::vector<std::string> compared;
  std::string only;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--compare") {
      compared.emplace_back(argv[i + 1]);
      continue;
    }
    if (arg == "--only") {
      only = argv[i + 1];
      continue;
    }
    const int value = std::stoi(argv[i + 1]);
    if (arg == "--iterations") {
      iterations = value;
    } else if (arg == "--handoffs") {
      handoffs = std::min(value, 100000);
    } else if (arg == "--seconds") {
      seconds = value;
    } else if (arg == "--held") {
      held_count = value;
    } else {
      std::cerr << "dlock-redis-bench: unknown option " << arg << "\n";
      return 64;
    }
  }
  const std::string url = endpoint + "?prefix=dlock-bench-" + std::to_string(::getpid()) + ":";
  // The raw floors of one server use the first of a RedLock URL's.
  const std::vector<redis_endpoint> servers = endpoints_of(endpoint);
  std::printf("dlock-redis-bench: %s\n", endpoint.c_str());

  // Processes are forked first, before this one has threads.
  // dlock's handoff and the raw one alternate in blocks, so that both see the same load.
  if (only == "election") {
    auto raw = connect(servers[0]);
    print_election_rows(url, raw.get(), iterations);
    return 0;
  }
  std::vector<double> handoff_samples, raw_handoff_samples;
  constexpr int handoff_block = 100;
  for (int done = 0; done < handoffs; done += handoff_block) {
    const int rounds = std::min(handoff_block, handoffs - done);
    if (only != "handoff-dlock") {
      const auto raw = raw_handoff(servers[0], rounds, 2000);
      raw_handoff_samples.insert(raw_handoff_samples.end(), raw.begin(), raw.end());
    }
    const auto ours = handoff(url, rounds, std::chrono::microseconds(2000));
    handoff_samples.insert(handoff_samples.end(), ours.begin(), ours.end());
  }
  if (only == "handoff-dlock") {
    print_row("dlock handoff between two processes", summarize(handoff_samples),
              handoff_samples.size());
    return 0;
  }
  if (only == "handoff") {
    const auto handed = summarize(handoff_samples);
    const auto raw_handed = summarize(raw_handoff_samples);
    print_row("raw hiredis handoff (release, message, SET)", raw_handed,
              raw_handoff_samples.size());
    print_row("dlock handoff between two processes", handed, handoff_samples.size());
    std::printf("%-44s median %9.2fx\n", "handoff / raw handoff",
                handed.median_us / raw_handed.median_us);
    return 0;
  }
  contention(url, seconds);

  auto raw = connect(servers[0]);
  {
    auto provider = dlock::make_provider(url);
    auto lock = provider->create_lock("uncontended");
    // The samples are interleaved, floors and dlock, so that all see the same load, each the
    // second of two cycles of its kind in a row (bench_support.hpp says why).
    raw_cycle floors(raw.get());
    std::vector<double> floor_samples, fenced_samples, ours_samples;
    for (int i = -iterations / 10; i < iterations; ++i) {  // the first tenth warms up
      const double samples[] = {
          second_of_two([&] { return floors.grant_and_release_us(false); }),
          second_of_two([&] { return floors.grant_and_release_us(true); }),
          second_of_two([&] { return uncontended(lock, 1).front(); })};
      if (i < 0) continue;
      floor_samples.push_back(samples[0]);
      fenced_samples.push_back(samples[1]);
      ours_samples.push_back(samples[2]);
    }
    const auto floor = summarize(floor_samples);
    const auto fenced = summarize(fenced_samples);
    const auto ours = summarize(ours_samples);
    print_row("raw SET NX PX + EVALSHA delete (the floor)", floor, iterations);
    print_row("raw floor with the fencing INCR in the grant", fenced, iterations);
    print_row("dlock acquire+release, uncontended", ours, iterations);
    std::printf("%-44s median %9.2fx\n", "ratio to the floor", ours.median_us / floor.median_us);
    std::printf("%-44s median %9.2fx\n", "ratio to the fenced floor",
                ours.median_us / fenced.median_us);
    if (servers.size() > 1) {
      // RedLock's own floor: its three round trips, to every server at once.
      const auto parallel = summarize(raw_parallel_floor(servers, iterations));
      print_row("raw GET + SET NX PX + EVALSHA, all servers at once", parallel, iterations);
      std::printf("%-44s median %9.2fx\n", "ratio to the parallel floor",
                  ours.median_us / parallel.median_us);
    }
    // Interleaved in blocks, so that both see the same load (on a shared machine, medians of
    // consecutive runs differ by more than what is compared).
    for (const std::string& other : compared) {
      const char separator = other.find('?') == std::string::npos ? '?' : '&';
      auto over = dlock::make_provider(other + separator + "prefix=dlock-bench-" +
                                       std::to_string(::getpid()) + ":");
      auto other_lock = over->create_lock("uncontended-compared");
      uncontended(other_lock, iterations / 10);  // warm-up
      std::vector<double> plain_samples, other_samples;
      constexpr int block = 100;
      for (int done = 0; done < iterations; done += block) {
        const auto p = uncontended(lock, block);
        const auto o = uncontended(other_lock, block);
        plain_samples.insert(plain_samples.end(), p.begin(), p.end());
        other_samples.insert(other_samples.end(), o.begin(), o.end());
      }
      const auto plain = summarize(plain_samples);
      const auto theirs = summarize(other_samples);
      // The scheme alone: the URL's options name files of no interest here.
      print_row("  interleaved: dlock over plain TCP", plain, plain_samples.size());
      print_row("  interleaved: dlock over " + other.substr(0, other.find("://") + 3), theirs,
                other_samples.size());
      std::printf("%-44s median %9.2fx\n", "  ratio to plain TCP",
                  theirs.median_us / plain.median_us);
    }
  }
  print_reader_writer_rows(url, iterations);
  print_async_rows(url, iterations);
  print_async_waiters(url, 10000);
  print_election_rows(url, raw.get(), iterations);
  const auto pubsub = summarize(pubsub_round_trip(servers[0], iterations / 10));
  const auto handed = summarize(handoff_samples);
  const auto raw_handed = summarize(raw_handoff_samples);
  print_row("raw pub/sub round trip", pubsub, iterations / 10);
  print_row("raw hiredis handoff (release, message, SET)", raw_handed,
            raw_handoff_samples.size());
  print_row("dlock handoff between two processes", handed, handoff_samples.size());
  std::printf("%-44s median %9.2fx\n", "handoff / pub/sub round trip",
              handed.median_us / pubsub.median_us);
  std::printf("%-44s median %9.2fx\n", "handoff / raw handoff", handed.median_us / raw_handed.median_us);
  watchdog_cost(endpoint + "?expiry=3s&prefix=dlock-bench-watchdog-" + std::to_string(::getpid()) + ":",
                raw.get(), held_count, seconds);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "dlock-redis-bench: " << e.what() << "\n";
  return 1;
}
