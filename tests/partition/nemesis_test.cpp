// The nemesis over real partitions: two workers reach the backend over path A, which the
// nemesis cuts off and heals at random, two over path B, which stays up; the nemesis also pauses
// and kills workers. The checker (support/history.hpp) then judges the whole history.
#include <catch2/catch.hpp>
#include <thread>

#include "history.hpp"
#include "nemesis.hpp"
#include "partition_servers.hpp"
#include "scenario.hpp"
#include "support.hpp"

using support::net_path;

TEST_CASE("a lock under a nemesis of partitions, pauses and kills keeps the fenced-mutex model",
          "[partition][nemesis]") {
  const partition::backend_case& backend = partition::backend();
  support::partition_servers set;
  const std::string scope = support::unique_name("nemesis");
  const auto url_a = backend.url(set.url(backend.variable, net_path::a), scope);
  const auto url_b = backend.url(set.url(backend.variable, net_path::b), scope);
  support::temp_directory dir;
  support::nemesis_plan plan{
      .workloads = {{.name = "nemesis", .mode = "lock", .urls = {url_a, url_a, url_b, url_b}}},
      .seconds = 14};
  // Cuts path A while the worker aimed at is on it (the first two).
  plan.extra_fault = [&](std::mt19937& random, const std::filesystem::path& log,
                         const std::vector<pid_t>& pids, std::size_t victim) {
    if (victim >= 2) return false;
    const std::int64_t from = support::monotonic_ns();
    {
      support::partition_cut cut(set, backend.servers, net_path::a);
      std::this_thread::sleep_for(std::chrono::milliseconds(500 + random() % 4500));  // the cut's length
    }
    for (std::size_t worker = 0; worker < 2; ++worker) {  // the workers on path A
      support::append_history_line(log, "P " + std::to_string(pids[worker]) + " " +
                                            std::to_string(from) + " " +
                                            std::to_string(support::monotonic_ns()));
    }
    return true;
  };
  const auto history = support::read_history(support::run_nemesis(dir.path(), plan));
  const auto verdict = support::check_fenced_mutex(history);
  WARN(backend.name << ": " << verdict.sections << " sections, " << verdict.accepted_writes
                    << " accepted writes, " << verdict.overlaps << " overlaps ("
                    << verdict.excused_overlaps << " after a fault, safe by the token)");
  for (const auto& violation : verdict.violations) FAIL_CHECK(violation);
  const auto journal = support::nemesis_journal(dir.path(), "nemesis");
  for (const auto& violation : support::check_fenced_counter(journal)) {
    FAIL_CHECK(violation);
  }
  CHECK(verdict.sections >= 10);
}
