// A nemesis run (support/nemesis.hpp) on every backend: workers take a lock, or a semaphore's
// slots, again and again while a nemesis pauses and kills them at random; afterwards the checker
// (support/history.hpp) judges the whole history. Zero violations is the bar.
#include <signal.h>

#include <catch2/catch.hpp>

#include "backend.hpp"
#include "history.hpp"
#include "nemesis.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;

namespace {

/// Four workers on the backend under test, for eight seconds.
std::filesystem::path run_under_nemesis(const support::temp_directory& dir,
                                        const std::string& name, const std::string& mode) {
  return support::run_nemesis(dir.path(), {.worker_urls = std::vector<std::string>(4, backend().url()),
                                           .name = name, .mode = mode});
}

}  // namespace

TEST_CASE("a lock under a nemesis of paused and killed holders keeps the fenced-mutex model",
          "[contract][multiprocess][nemesis]") {
  support::temp_directory dir;
  const auto history = support::read_history(
      run_under_nemesis(dir, support::unique_name("nemesis"), "lock"));
  const auto verdict = support::check_fenced_mutex(history);
  WARN(backend().label() << ": " << verdict.sections << " sections, " << verdict.accepted_writes
                         << " accepted writes, " << verdict.overlaps << " overlaps ("
                         << verdict.excused_overlaps << " after a fault, safe by the token)");
  for (const auto& violation : verdict.violations) FAIL_CHECK(violation);
  for (const auto& violation : support::check_fenced_counter(dir.path() / "store.journal")) {
    FAIL_CHECK(violation);
  }
  CHECK(verdict.sections >= 10);  // the workers made progress between the faults
}

TEST_CASE("a semaphore under a nemesis of paused and killed holders never exceeds max_count",
          "[contract][multiprocess][nemesis]") {
  support::temp_directory dir;
  const auto history = support::read_history(
      run_under_nemesis(dir, support::unique_name("nemesis-sem"), "semaphore:2"));
  const auto verdict = support::check_semaphore(history, 2);
  WARN(backend().label() << ": " << verdict.sections << " slot sections");
  for (const auto& violation : verdict.violations) FAIL_CHECK(violation);
  CHECK(verdict.sections >= 10);
}
