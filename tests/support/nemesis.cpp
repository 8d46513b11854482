#include "nemesis.hpp"

#include <signal.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

#include "history.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace support {

namespace {

/// Follows the history log as the workers write it: a pid is inside a section from its B
/// line to its S line (or its kill).
class holder_watch {
 public:
  explicit holder_watch(std::filesystem::path log) : log_(std::move(log)) {}

  struct open_section {
    std::int64_t begin = 0, planned_end = 0;  ///< CLOCK_MONOTONIC ns
  };

  /// The pids inside a section now, with their sections.
  const std::map<pid_t, open_section>& holders() {
    std::ifstream in(log_);
    in.seekg(static_cast<std::streamoff>(offset_));
    std::string text;
    // Only whole lines: a worker's line is one write(2), but it may land after our read.
    while (std::getline(in, text) && !in.eof()) {
      offset_ += text.size() + 1;
      std::istringstream line(text);
      std::string kind;
      pid_t pid = 0;
      std::uint64_t token = 0;
      std::int64_t begin = 0, planned_end = 0;
      std::string hold;
      line >> kind >> pid;
      if (kind == "B" && line >> token >> begin >> hold) {
        inside_[pid] = {begin, line >> planned_end ? planned_end : begin};
      }
      if (kind == "S" || kind == "K") inside_.erase(pid);
    }
    return inside_;
  }

 private:
  std::filesystem::path log_;
  std::size_t offset_ = 0;
  std::map<pid_t, open_section> inside_;
};

struct worker_slot {
  const nemesis_workload* workload;
  std::string url;
  std::unique_ptr<child_process> process;
  std::optional<steady::time_point> paused_until;
  std::int64_t paused_from = 0;
  bool spared = false;  ///< a restart's holder, left alone until the restart and section end
};

class nemesis {
 public:
  nemesis(const std::filesystem::path& directory, const nemesis_plan& plan)
      : directory_(directory), plan_(plan), log_(directory / "history.log"), watch_(log_) {
    for (const nemesis_workload& workload : plan.workloads) {
      for (const std::string& url : workload.urls) workers_.push_back({&workload, url});
    }
    for (std::size_t i = 0; i < workers_.size(); ++i) spawn(i);
    const auto seed = std::random_device{}();
    WARN("nemesis seed " << seed);
    random_.seed(seed);
  }

  ~nemesis() {
    if (side_.joinable()) side_.join();
  }
  nemesis(const nemesis&) = delete;
  nemesis& operator=(const nemesis&) = delete;

  std::filesystem::path run() {
    run_at_holders();
    for (auto& worker : workers_) {
      const auto status = worker.process->wait(60s);
      REQUIRE(status);
      CHECK(exit_code(*status) == 0);
    }
    return log_;
  }

 private:
  void spawn(std::size_t i) {
    const auto left = std::chrono::seconds(plan_.seconds) - (steady::now() - start_);
    const auto seconds = std::max<long>(1, std::chrono::ceil<std::chrono::seconds>(left).count());
    worker_slot& worker = workers_[i];
    worker.process = std::make_unique<child_process>(std::vector<std::string>{
        helper_path(), "nemesis-worker", worker.url, worker.workload->name,
        worker.workload->mode, std::to_string(seconds), log_.string(),
        (directory_ / (worker.workload->name + ".store")).string(), "100", "2000"});
  }

  std::vector<pid_t> pids() const {
    std::vector<pid_t> all;
    for (const auto& worker : workers_) all.push_back(worker.process->pid());
    return all;
  }

  std::chrono::milliseconds pause_length() {
    if (plan_.lease) return *plan_.lease + std::chrono::milliseconds(500 + random_() % 1000);
    return std::chrono::milliseconds(200 + random_() % 1800);
  }

  void kill(std::size_t victim) {
    workers_[victim].process->signal(SIGKILL);
    append_history_line(log_, "K " + std::to_string(workers_[victim].process->pid()) + " " +
                                  std::to_string(monotonic_ns()));
    workers_[victim].process->wait(10s);
    spawn(victim);
  }

  void pause(std::size_t victim) {
    workers_[victim].paused_from = monotonic_ns();
    workers_[victim].process->signal(SIGSTOP);
    workers_[victim].paused_until = steady::now() + pause_length();
  }

  void resume(worker_slot& worker) {
    worker.process->signal(SIGCONT);
    worker.paused_until.reset();
    append_history_line(log_, "P " + std::to_string(worker.process->pid()) + " " +
                                  std::to_string(worker.paused_from) + " " +
                                  std::to_string(monotonic_ns()));
  }

  /// Runs `fault` on the side thread, which must be idle. A fault that throws ends the run
  /// with its exception once the thread is joined.
  void on_the_side(std::function<void(std::mt19937&)> fault) {
    join_side();
    side_busy_ = true;
    side_ = std::thread([this, fault = std::move(fault), seed = random_()] {
      std::mt19937 random(seed);
      try {
        fault(random);
      } catch (...) {
        side_error_ = std::current_exception();
      }
      side_busy_ = false;
    });
  }

  void join_side() {
    if (side_.joinable()) side_.join();
    if (side_error_) std::rethrow_exception(std::exchange(side_error_, nullptr));
  }

  /// A kill, the caller's fault or a pause, at random, at `victim`.
  void strike(std::size_t victim) {
    const auto choice = random_() % 4;
    if (choice == 0) return kill(victim);
    // Nor does a cut strike a restart's holder: it would excuse that holder's section.
    const bool restart_watched =
        std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return w.spared; });
    if (choice == 1 && plan_.extra_fault && !side_busy_ && !restart_watched &&
        (!plan_.extra_fault_reaches || plan_.extra_fault_reaches(victim))) {
      return on_the_side([this, pids = pids()](std::mt19937& random) {
        plan_.extra_fault(random, log_, pids);
        side_fault_ended_ = monotonic_ns();
      });
    }
    pause(victim);
  }

  /// Restarts a server while a worker holds, once the next restart's time has come.
  void restart_when_due(steady::time_point faults_end) {
    if (restarts_done_ >= plan_.restarts || !plan_.restart_server || side_busy_) return;
    const auto window = faults_end - (start_ + 500ms);
    const auto due = start_ + 500ms + window * (restarts_done_ + 1) / (plan_.restarts + 1);
    // A restart takes 0.3 to 1.2 s: a holder with 1.2 s left mostly outlasts it, and shows what
    // it did. Such holders can be rare (most workers wait): the nemesis asks less as it waits.
    const auto now = steady::now();
    if (now < due) return;
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - due);
    const auto victim = pick_holder(std::max<std::chrono::milliseconds>(400ms, 1200ms - waited));
    if (!victim) return;
    // No other fault strikes it in that section, so that its end shows what the restart did.
    workers_[*victim].spared = true;
    ++restarts_done_;
    on_the_side([this](std::mt19937& random) {
      const std::int64_t from = monotonic_ns();
      const std::string server = plan_.restart_server(random);
      append_history_line(log_, "R " + std::to_string(from) + " " +
                                    std::to_string(monotonic_ns()) + " " + server);
    });
  }

  // Faults stop early enough that the longest pause ends a second before the workers do.
  void run_at_holders() {
    const auto longest = (plan_.lease ? *plan_.lease + 1500ms : 2000ms) + 1s;
    const auto faults_end = start_ + std::chrono::seconds(plan_.seconds) - longest;
    auto next = start_ + 500ms;
    for (;;) {
      const auto now = steady::now();
      bool any_paused = false;
      for (auto& worker : workers_) {
        if (worker.paused_until && *worker.paused_until <= now) resume(worker);
        any_paused = any_paused || worker.paused_until.has_value();
      }
      if (!side_busy_) {
        const auto& holders = watch_.holders();
        for (auto& worker : workers_) {
          if (!holders.contains(worker.process->pid())) worker.spared = false;
        }
      }
      if (now >= faults_end && !any_paused && !side_busy_) return join_side();
      if (now < faults_end) restart_when_due(faults_end);
      if (now < faults_end && now >= next) {
        if (const auto victim = pick_holder()) {
          strike(*victim);
          next = steady::now() + std::chrono::milliseconds(150 + random_() % 300);
        }
      }
      std::this_thread::sleep_for(5ms);  // the period of following the log
    }
  }

  /// A worker inside a section now, neither paused nor spared. With `unstruck_with_left`, only
  /// one whose section no fault has struck yet and is planned to last that long yet.
  std::optional<std::size_t> pick_holder(
      std::optional<std::chrono::nanoseconds> unstruck_with_left = std::nullopt) {
    std::vector<std::size_t> candidates;
    const auto& holders = watch_.holders();
    const std::int64_t now = monotonic_ns();
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const auto held = holders.find(workers_[i].process->pid());
      if (held == holders.end() || workers_[i].paused_until || workers_[i].spared) continue;
      if (unstruck_with_left &&
          (held->second.planned_end - now < unstruck_with_left->count() ||
           workers_[i].paused_from >= held->second.begin ||
           side_fault_ended_ >= held->second.begin)) {
        continue;
      }
      candidates.push_back(i);
    }
    if (candidates.empty()) return std::nullopt;
    return candidates[random_() % candidates.size()];
  }

  std::filesystem::path directory_;
  const nemesis_plan& plan_;
  std::filesystem::path log_;
  holder_watch watch_;
  steady::time_point start_ = steady::now();
  std::vector<worker_slot> workers_;
  std::mt19937 random_;
  int restarts_done_ = 0;
  // The extra faults' and restarts' thread: busy from its start until its fault is undone.
  std::thread side_;
  std::atomic<bool> side_busy_{false};
  // When the last extra fault (a cut, of workers the nemesis does not track) was undone.
  std::atomic<std::int64_t> side_fault_ended_{0};
  std::exception_ptr side_error_;
};

}  // namespace

std::filesystem::path run_nemesis(const std::filesystem::path& directory,
                                  const nemesis_plan& plan) {
  return nemesis(directory, plan).run();
}

std::filesystem::path nemesis_journal(const std::filesystem::path& directory,
                                      const std::string& name) {
  return directory / (name + ".store.journal");
}

}  // namespace support
