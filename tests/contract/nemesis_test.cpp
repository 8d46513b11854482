// A nemesis run (support/nemesis.hpp) on every backend: workers take a lock, a reader-writer
// lock (reading or writing) and a semaphore's slots, each on its own name, all at once, holding
// each for 100 ms to 2 s, while a nemesis aims pauses past the lease and kills at the holders;
// afterwards the checker (support/history.hpp) judges the whole history. Zero violations is
// the bar, and a run whose faults did not land inside sections fails: it proved nothing.
//
// DLOCK_NEMESIS_SECONDS lengthens the run (default 20 s).
#include <catch2/catch.hpp>
#include <cstdlib>

#include "backend.hpp"
#include "history.hpp"
#include "nemesis.hpp"
#include "support.hpp"

using contract::backend;

namespace {

int nemesis_seconds() {
  const char* text = std::getenv("DLOCK_NEMESIS_SECONDS");
  if (!text || !*text) return 20;
  const int seconds = std::atoi(text);
  if (seconds < 12) {
    throw std::invalid_argument(std::string("DLOCK_NEMESIS_SECONDS: '") + text +
                                "' is not a number of seconds of at least 12");
  }
  return seconds;
}

void fail_each(const std::vector<std::string>& violations) {
  for (const auto& violation : violations) FAIL_CHECK(violation);
}

}  // namespace

TEST_CASE("locks, reader-writer locks and semaphores keep their models under a nemesis aimed "
          "at their holders", "[contract][multiprocess][nemesis]") {
  const auto [url, lease] = backend().nemesis_url();
  const std::string lock = support::unique_name("nemesis-lock");
  const std::string rw = support::unique_name("nemesis-rw");
  const std::string semaphore = support::unique_name("nemesis-semaphore");
  const std::vector<std::string> three(3, url);
  support::temp_directory dir;
  const auto started = std::chrono::steady_clock::now();
  const auto history = support::read_history(support::run_nemesis(
      dir.path(), {.workloads = {{lock, "lock", three}, {rw, "rw", three},
                                 {semaphore, "semaphore:2", three}},
                   .seconds = nemesis_seconds(),
                   .lease = lease}));
  const auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started);

  const auto locks = support::check_fenced_mutex(history);
  const auto reader_writer = support::check_reader_writer(history);
  const auto slots = support::check_semaphore(history, 2);
  std::optional<std::int64_t> lease_ns;
  if (lease) lease_ns = std::chrono::nanoseconds(*lease).count();
  const auto faults = support::judge_faults(history, {.min_landed = 20, .lease_ns = lease_ns});
  WARN(backend().label() << " nemesis, " << wall.count() << " s: " << faults.faults
       << " faults, " << faults.landed << " inside a section (" << faults.landed_kills
       << " kills), " << faults.paused_past_lease << " holders paused past the lease, "
       << faults.refusals << " steps refused by the fenced store; sections: " << locks.sections
       << " lock, " << reader_writer.sections << " read or write, " << slots.sections
       << " slot; overlaps excused by a fault or shared: " << locks.excused_overlaps << " lock, "
       << reader_writer.excused_overlaps << " read or write");
  fail_each(locks.violations);
  fail_each(reader_writer.violations);
  fail_each(slots.violations);
  fail_each(faults.violations);
  fail_each(support::check_fenced_counter(support::nemesis_journal(dir.path(), lock)));
  fail_each(support::check_fenced_counter(support::nemesis_journal(dir.path(), rw)));
  // Every workload made progress between the faults.
  CHECK(locks.sections >= 5);
  CHECK(reader_writer.sections >= 5);
  CHECK(slots.sections >= 5);
  CHECK(locks.accepted_writes + reader_writer.accepted_writes >= 5);
}
