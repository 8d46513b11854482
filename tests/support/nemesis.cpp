#include "nemesis.hpp"

#include <signal.h>

#include <catch2/catch.hpp>
#include <memory>
#include <thread>

#include "history.hpp"
#include "support.hpp"

using namespace std::chrono_literals;

namespace support {

std::filesystem::path run_nemesis(const std::filesystem::path& directory,
                                  const nemesis_plan& plan) {
  const auto log = directory / "history.log";
  const auto store = directory / "store";
  const auto start = std::chrono::steady_clock::now();
  auto spawn = [&](std::size_t worker) {
    const auto left = std::chrono::seconds(plan.seconds) - (std::chrono::steady_clock::now() - start);
    const auto seconds = std::max<long>(1, std::chrono::duration_cast<std::chrono::seconds>(left).count());
    return std::make_unique<child_process>(std::vector<std::string>{
        helper_path(), "nemesis-worker", plan.worker_urls[worker], plan.name, plan.mode,
        std::to_string(seconds), log.string(), store.string()});
  };
  std::vector<std::unique_ptr<child_process>> workers;
  for (std::size_t i = 0; i < plan.worker_urls.size(); ++i) workers.push_back(spawn(i));
  auto pids = [&] {
    std::vector<pid_t> all;
    for (const auto& worker : workers) all.push_back(worker->pid());
    return all;
  };

  const auto seed = std::random_device{}();
  WARN("nemesis seed " << seed);
  std::mt19937 random(seed);
  // The last two seconds are left calm, so that the workers finish their last sections.
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(plan.seconds - 2)) {
    const std::size_t victim = random() % workers.size();
    const auto choice = random() % 4;
    if (choice == 0) {
      workers[victim]->signal(SIGKILL);
      append_history_line(log, "K " + std::to_string(workers[victim]->pid()) + " " +
                                   std::to_string(monotonic_ns()));
      workers[victim]->wait(10s);
      workers[victim] = spawn(victim);
    } else if (choice == 1 && plan.extra_fault) {
      plan.extra_fault(random, log, pids());
    } else {
      const std::int64_t from = monotonic_ns();
      workers[victim]->signal(SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(200 + random() % 1800));  // the fault's length
      workers[victim]->signal(SIGCONT);
      append_history_line(log, "P " + std::to_string(workers[victim]->pid()) + " " +
                                   std::to_string(from) + " " + std::to_string(monotonic_ns()));
    }
  }
  for (auto& worker : workers) {
    const auto status = worker->wait(60s);
    REQUIRE(status);
    CHECK(exit_code(*status) == 0);
  }
  return log;
}

}  // namespace support
