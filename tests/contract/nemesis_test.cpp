// A nemesis run: worker processes take a lock (or a semaphore's slots) again and again while a
// nemesis pauses and kills them at random; afterwards the checker (support/history.hpp) judges
// the whole history. Zero violations is the bar.
#include <signal.h>

#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <thread>

#include "backend.hpp"
#include "history.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::child_process;

namespace {

constexpr int worker_count = 4;
constexpr int run_seconds = 8;

/// Runs the workers under the nemesis for run_seconds and returns the history's path.
std::filesystem::path run_under_nemesis(const support::temp_directory& dir, const std::string& name,
                                        const std::string& mode) {
  const auto log = dir.path() / "history.log";
  const auto store = dir.path() / "store";
  auto spawn = [&](int seconds) {
    return std::make_unique<child_process>(std::vector<std::string>{
        support::helper_path(), "nemesis-worker", backend().url(), name, mode,
        std::to_string(seconds), log.string(), store.string()});
  };
  std::vector<std::unique_ptr<child_process>> workers;
  for (int i = 0; i < worker_count; ++i) workers.push_back(spawn(run_seconds));

  const auto seed = std::random_device{}();
  WARN("nemesis seed " << seed);
  std::mt19937 random(seed);
  const auto start = std::chrono::steady_clock::now();
  // The last two seconds are left calm, so that the workers finish their last sections.
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(run_seconds - 2)) {
    auto& victim = workers[random() % workers.size()];
    const auto pause = std::chrono::milliseconds(200 + random() % 1800);
    if (random() % 4 == 0) {
      victim->signal(SIGKILL);
      support::append_history_line(log, "K " + std::to_string(victim->pid()) + " " +
                                            std::to_string(support::monotonic_ns()));
      victim->wait(10s);
      const auto left = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::seconds(run_seconds) - (std::chrono::steady_clock::now() - start));
      victim = spawn(std::max<int>(1, static_cast<int>(left.count())));
    } else {
      const std::int64_t from = support::monotonic_ns();
      victim->signal(SIGSTOP);
      std::this_thread::sleep_for(pause);  // the fault's length, not a wait for a condition
      victim->signal(SIGCONT);
      support::append_history_line(log, "P " + std::to_string(victim->pid()) + " " +
                                            std::to_string(from) + " " +
                                            std::to_string(support::monotonic_ns()));
    }
  }
  for (auto& worker : workers) {
    const auto status = worker->wait(60s);
    REQUIRE(status);
    CHECK(support::exit_code(*status) == 0);
  }
  return log;
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
