// dlock-bench: latency of a backend beside the floor it is built on.
//
//   dlock-bench [--dir DIR] [--iterations N] [--handoffs N]       the file backend
//   dlock-bench --url postgres://... [--iterations N] [--handoffs N] [--held N]
//
// uncontended: acquire + release of one lock, N times, beside the raw
//   open + flock(LOCK_EX) + flock(LOCK_UN) + close on the same kind of file in the same run,
//   and that floor plus the four system calls a safe grant adds (inode check, fencing counter).
// handoff: two processes take turns on one lock; each sample is the time from the holder
//   starting release() to the waiter's acquire() returning (CLOCK_MONOTONIC, shared memory).
// wait endings: how soon a waiting acquire returns after a stop request, and how far past
//   its timeout a try_acquire(5ms) on a held lock returns.
// postgres: the floor is a raw libpq connection's two round trips (pg_try_advisory_lock,
//   pg_advisory_unlock); also one raw round trip, and --held N locks held by one provider
//   (sessions at the server, resident memory).
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
#include <utility>
#include <vector>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"
#if DLOCK_HAS_POSTGRES
#include "postgres_floor.hpp"
#endif

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

void print_generic_rows(const std::string& url, const std::vector<double>& handoff_samples,
                        int iterations) {
  print_reader_writer_rows(url, iterations);
  print_async_rows(url, iterations);
  print_async_waiters(url, 10000);
  print_row("dlock handoff between two processes", summarize(handoff_samples),
            handoff_samples.size());
  const auto endings = wait_ending_latency(url, 200);
  print_row("waiting acquire returns after stop request", summarize(endings.after_stop_us),
            endings.after_stop_us.size());
  print_row("try_acquire(5ms) returns past its timeout", summarize(endings.past_timeout_us),
            endings.past_timeout_us.size());
}

#if DLOCK_HAS_POSTGRES
long resident_kib() {
  long pages = 0, resident = 0;
  if (std::FILE* statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(statm);
  }
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

void postgres_bench(const std::string& url, int iterations, int handoffs, int held_count) {
  std::printf("dlock-bench: postgres backend at %s\n",
              dlock::make_provider(url)->endpoint().c_str());
  // The raw cycles with dlock's statements write owner rows: a provider with the owners' table
  // (not the default) creates it first.
  dlock::make_provider(with_option(url, "owners_table=dlock_owners"))
      ->create_lock("owners-table-made")
      .acquire(std::chrono::seconds(10))
      .release();
  // The waiter's attempt and its blocking statement must be in place before the release.
  constexpr std::chrono::microseconds settle(5000);
  // dlock's handoff and the raw ones in ten turns each, one after the other, so that all
  // see the same load on the machine. The raw floors' holders settle as dlock's does before
  // releasing: a holder that polls pg_locks up to its release keeps the machine's cores awake,
  // while a release after a sleep wakes processes that were idle for milliseconds, which on
  // this VM costs about as much again. So the hot floor is printed too,
  // beside dlock's hot handoff, whose holder polls pg_locks the same way.
  std::vector<double> handoff_samples, bare_handoff_samples, same_handoff_samples,
      hot_handoff_samples, hot_same_samples, ours_hot_samples;
  const int per_turn = std::max(handoffs / 10, 2);
  const auto bare = dlock_bench::bare_statements("handoff-raw");
  const auto same = dlock_bench::dlock_statements("handoff-raw");
  const std::chrono::microseconds hot(0);
  for (int turn = 0; turn < 10; ++turn) {
    for (auto [into, samples] :
         {std::pair{&handoff_samples, handoff(url, per_turn, settle)},
          std::pair{&bare_handoff_samples,
                    dlock_bench::raw_handoff_us(url, per_turn, bare, settle)},
          std::pair{&same_handoff_samples,
                    dlock_bench::raw_handoff_us(url, per_turn, same, settle)},
          std::pair{&hot_handoff_samples, dlock_bench::raw_handoff_us(url, per_turn, bare, hot)},
          std::pair{&hot_same_samples, dlock_bench::raw_handoff_us(url, per_turn, same, hot)},
          std::pair{&ours_hot_samples,
                    handoff(url, per_turn, dlock_bench::waiter_blocked(url, "handoff"))}}) {
      into->insert(into->end(), samples.begin(), samples.end());
    }
  }
  {
    // The seven kinds take turns, so that all see the same load on the machine, each sample
    // the second of two cycles of its kind in a row (bench_support.hpp says why).
    // A cycle that commits a row (dlock's statements with an owners' table) leaves the server
    // busy for a while after it answered; each owner-row sample follows one of its own kind.
    // The default (token, no row) is measured against the nextval floor.
    auto fenced = dlock::make_provider(with_option(url, "owners_table=dlock_owners"));
    auto unfenced =
        dlock::make_provider(with_option(url, "fencing_sequence=&owners_table=dlock_owners"));
    auto unrecorded = dlock::make_provider(url);
    auto fenced_lock = fenced->create_lock("uncontended");
    auto unfenced_lock = unfenced->create_lock("uncontended");
    auto unrecorded_lock = unrecorded->create_lock("uncontended");
    dlock_bench::raw_libpq raw(url);
    const auto same = dlock_bench::dlock_statements("uncontended-raw");
    const auto dlock_cycle = [](dlock::distributed_lock& lock) {
      return [&lock] { return uncontended(lock, 1).front(); };
    };
    std::vector<double> trip, floor, fenced_floor, same_floor, plain, bare, ours;
    for (int i = -iterations / 10; i < iterations; ++i) {  // the first tenth warms up
      const double samples[] = {
          dlock_bench::second_of_two([&] { return raw.round_trip_us(); }),
          dlock_bench::second_of_two([&] { return raw.grant_and_release_us(false); }),
          dlock_bench::second_of_two([&] { return raw.grant_and_release_us(true); }),
          dlock_bench::second_of_two(dlock_cycle(unrecorded_lock)),
          dlock_bench::second_of_two(dlock_cycle(unfenced_lock)),
          dlock_bench::second_of_two([&] { return raw.grant_and_release_us(same); }),
          dlock_bench::second_of_two(dlock_cycle(fenced_lock))};
      if (i < 0) continue;
      std::vector<double>* into[] = {&trip, &floor, &fenced_floor, &bare,
                                     &plain, &same_floor, &ours};
      for (std::size_t k = 0; k < std::size(into); ++k) into[k]->push_back(samples[k]);
    }
    const auto fenced_floor_summary = summarize(fenced_floor);
    const auto same_floor_summary = summarize(same_floor);
    const auto bare_summary = summarize(bare);
    const auto ours_summary = summarize(ours);
    print_row("raw libpq SELECT 1 (one round trip)", summarize(trip), trip.size());
    print_row("raw libpq try_advisory_lock + unlock (floor)", summarize(floor), floor.size());
    print_row("raw floor with nextval in the grant", fenced_floor_summary, fenced_floor.size());
    print_row("raw libpq, dlock's statements (row, token)", same_floor_summary, same_floor.size());
    print_row("dlock acquire+release, owner row, no token", summarize(plain), plain.size());
    print_row("dlock acquire+release, token (default)", bare_summary, bare.size());
    print_row("dlock acquire+release, token + owner row", ours_summary, ours.size());
    std::printf("%-44s median %9.2fx\n", "default / raw floor with nextval (goal 1.2x)",
                bare_summary.median_us / fenced_floor_summary.median_us);
    std::printf("%-44s median %9.2fx / %.2fx\n", "owner row: / its statements raw / floor",
                ours_summary.median_us / same_floor_summary.median_us,
                ours_summary.median_us / fenced_floor_summary.median_us);
  }
  {
    // Beside dlock's handoff: the same wake-up between two raw connections.
    const auto bare_handoff = summarize(bare_handoff_samples);
    const auto same_handoff = summarize(same_handoff_samples);
    const auto hot_handoff = summarize(hot_handoff_samples);
    const auto hot_same = summarize(hot_same_samples);
    const auto ours_hot = summarize(ours_hot_samples);
    const auto ours_handoff = summarize(handoff_samples);
    print_row("raw handoff, bare (holder settles 5 ms)", bare_handoff,
              bare_handoff_samples.size());
    print_row("raw handoff, dlock's statements (settles)", same_handoff,
              same_handoff_samples.size());
    std::printf("%-44s median %9.2fx / %.2fx\n", "dlock handoff / raw handoff (bare / same)",
                ours_handoff.median_us / bare_handoff.median_us,
                ours_handoff.median_us / same_handoff.median_us);
    print_row("raw handoff, bare, holder polls (hot)", hot_handoff, hot_handoff_samples.size());
    print_row("raw handoff, dlock's statements (hot)", hot_same, hot_same_samples.size());
    print_row("dlock handoff, holder polls (hot)", ours_hot, ours_hot_samples.size());
    std::printf("%-44s median %9.2fx / %.2fx\n", "hot: dlock / raw handoff (bare / same)",
                ours_hot.median_us / hot_handoff.median_us,
                ours_hot.median_us / hot_same.median_us);
    std::printf("%-44s median %9.2fx\n", "dlock (settles) / hot bare raw (before 11-25)",
                ours_handoff.median_us / hot_handoff.median_us);
  }
  print_generic_rows(url, handoff_samples, iterations);
  {
    const std::string application = "dlock-bench-held-" + std::to_string(::getpid());
    auto provider = dlock::make_provider(with_option(url, "application_name=" + application));
    (void)provider->create_lock("warm-up").acquire();
    const long before = resident_kib();
    std::vector<dlock::lock_handle> held;
    const auto start = clock_type::now();
    for (int i = 0; i < held_count; ++i) {
      held.push_back(provider->create_lock("held-" + std::to_string(i)).acquire());
    }
    const double took_ms = std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
    std::printf("%d held locks: %d server session(s), %ld KiB resident more, %.1f ms to take\n",
                held_count, dlock_bench::raw_libpq(url).server_sessions(application),
                resident_kib() - before, took_ms);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) try {
  std::filesystem::path dir;
  std::string url_option;
  int iterations = 20000;
  int handoffs = 2000;
  int held_count = 1000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--dir") {
      dir = argv[++i];
    } else if (i + 1 < argc && arg == "--url") {
      url_option = argv[++i];
    } else if (i + 1 < argc && arg == "--iterations") {
      iterations = std::stoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--handoffs") {
      handoffs = std::min(std::stoi(argv[++i]), 100000);
    } else if (i + 1 < argc && arg == "--held") {
      held_count = std::stoi(argv[++i]);
    } else {
      std::cerr << "usage: dlock-bench [--dir DIR | --url postgres://...] [--iterations N] "
                   "[--handoffs N] [--held N]\n";
      return 64;
    }
  }
  if (!url_option.empty()) {
#if DLOCK_HAS_POSTGRES
    if (url_option.starts_with("postgres")) {
      postgres_bench(url_option, iterations, handoffs, held_count);
      return 0;
    }
#endif
    std::cerr << "dlock-bench: --url supports the postgres backend of this build only\n";
    return 64;
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
  print_generic_rows(url, handoff_samples, iterations);
  std::printf("dlock-bench: memory backend (async rows only)\n");
  print_async_rows("memory://", iterations);
  print_async_waiters("memory://", 10000);
  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "dlock-bench: " << e.what() << "\n";
  return 1;
}
