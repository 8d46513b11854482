// The nemesis over real partitions: two workers of each workload reach the backend over path A,
// two over path B, which stays up; the nemesis aims at holders: it cuts off and heals path A
// when the holder it aims at is on it, pauses and kills holders, and twice restarts one of the
// backend's servers while a worker holds. The checker (support/history.hpp) then judges the
// whole history: a restart excuses no overlap, so a grant must outlive it or its holder must
// be told lost.
#include <catch2/catch.hpp>
#include <thread>

#include "history.hpp"
#include "nemesis.hpp"
#include "partition_servers.hpp"
#include "scenario.hpp"
#include "support.hpp"

using support::net_path;

TEST_CASE("locks, reader-writer locks and semaphores under a nemesis of cuts, pauses, kills and "
          "server restarts aimed at their holders keep their models",
          "[partition][nemesis]") {
  const partition::backend_case& backend = partition::backend();
  support::partition_servers set;
  const std::string scope = support::unique_name("nemesis");
  const auto url_a = backend.url(set.url(backend.variable, net_path::a), scope);
  const auto url_b = backend.url(set.url(backend.variable, net_path::b), scope);
  support::temp_directory dir;
  // Each workload's first two workers are on path A. Three at once give the nemesis holders to
  // aim at while a lock's holder is cut off or its lease runs out.
  const std::vector<std::string> urls{url_a, url_a, url_b, url_b};
  const std::string lock = support::unique_name("nemesis-lock");
  const std::string rw = support::unique_name("nemesis-rw");
  const std::string semaphore = support::unique_name("nemesis-semaphore");
  support::nemesis_plan plan{
      .workloads = {{lock, "lock", urls}, {rw, "rw", urls}, {semaphore, "semaphore:2", urls}},
      .seconds = 12};
  const auto on_path_a = [&](std::size_t worker) { return urls[worker % urls.size()] == url_a; };
  // Cuts path A while the holder aimed at is on it (pauses and kills go on meanwhile).
  plan.extra_fault_reaches = on_path_a;
  plan.extra_fault = [&](std::mt19937& random, const std::filesystem::path& log,
                         const std::vector<pid_t>& pids) {
    const std::int64_t from = support::monotonic_ns();
    {
      support::partition_cut cut(set, backend.servers, net_path::a);
      const auto length = std::chrono::milliseconds(500 + random() % 2000);
      std::this_thread::sleep_for(length);  // the cut lasts
    }
    for (std::size_t worker = 0; worker < pids.size(); ++worker) {
      if (!on_path_a(worker)) continue;
      support::append_history_line(log, "P " + std::to_string(pids[worker]) + " " +
                                            std::to_string(from) + " " +
                                            std::to_string(support::monotonic_ns()));
    }
  };
  // Twice a run, a server of the backend restarts under a holder (one member of a quorum).
  plan.restarts = 2;
  plan.restart_server = [&](std::mt19937& random) {
    const std::string& server = backend.servers[random() % backend.servers.size()];
    set.restart(server);
    return server;
  };
  const auto history = support::read_history(support::run_nemesis(dir.path(), plan));
  const auto verdict = support::check_fenced_mutex(history);
  const auto reader_writer = support::check_reader_writer(history);
  const auto slots = support::check_semaphore(history, 2);
  const auto faults =
      support::judge_faults(history, {.min_landed = 10, .min_sections_across_restart = 1});
  WARN(backend.name << ": " << faults.faults << " faults, " << faults.landed
                    << " inside a section (" << faults.landed_kills << " kills, "
                    << faults.landed_restarts << " of " << faults.restarts
                    << " server restarts; sections across one: " << faults.held_across_restart
                    << " held, " << faults.lost_across_restart << " told lost), "
                    << faults.refusals << " steps refused; sections: " << verdict.sections
                    << " lock, " << reader_writer.sections << " read or write, "
                    << slots.sections << " slot");
  for (const auto* judged : {&verdict, &reader_writer, &slots}) {
    for (const auto& violation : judged->violations) FAIL_CHECK(violation);
  }
  for (const auto& violation : faults.violations) FAIL_CHECK(violation);
  for (const auto& name : {lock, rw}) {
    for (const auto& violation :
         support::check_fenced_counter(support::nemesis_journal(dir.path(), name))) {
      FAIL_CHECK(violation);
    }
  }
  CHECK(verdict.sections + reader_writer.sections + slots.sections >= 10);
}
