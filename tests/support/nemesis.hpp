// A nemesis run: worker processes (dlock-test-helper nemesis-worker, nemesis_worker.hpp) take
// locks, reader-writer locks or semaphores' slots again and again while the nemesis pauses and
// kills them and, when given them, applies a fault of the caller's (a network partition) and
// restarts the backend's servers. The history it leaves is judged by history.hpp's checkers.
//
// The faults are aimed at holders: sections last 100 ms to 2 s, and every fault strikes a
// process inside one (the nemesis follows the workers' B and S lines in the log), pauses
// outlasting the backend's lease, so that a holder is deposed while it works and must be
// refused by the fenced store when it resumes. (Faults at random moments, against sections of
// a millisecond, almost never landed inside one.)
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace support {

/// Workers on one name: one per URL (the same backend, possibly over different network paths).
struct nemesis_workload {
  std::string name;
  std::string mode = "lock";  ///< lock | rw | semaphore:N
  std::vector<std::string> urls;
};

struct nemesis_plan {
  /// Each on its own name, all at once, all in one history (the checkers tell them apart by
  /// their sections' kind, so at most one workload of each mode).
  std::vector<nemesis_workload> workloads;
  int seconds = 8;
  /// The backend's lease: a pause outlasts it by 0.5 to 1.5 s. nullopt (a backend where a
  /// paused holder keeps its grant): pauses of 0.2 to 2 s.
  std::optional<std::chrono::milliseconds> lease;
  /// An extra fault the nemesis picks as often as a kill, when it reaches the worker aimed at
  /// (`extra_fault_reaches(index)`, the index in the order of the workloads' URLs; a pause
  /// otherwise). The extra faults and the restarts below run on a thread of the nemesis's, one
  /// at a time, while pauses and kills go on, so they must not use Catch2's macros (not thread
  /// safe): an exception they throw fails the run. `extra_fault` gets a random engine of its
  /// own, the history log and the workers' pids when it began; it applies its fault, undoes it
  /// and logs a "P <pid> <from> <to>" line for every worker it cut off.
  std::function<bool(std::size_t)> extra_fault_reaches;
  std::function<void(std::mt19937&, const std::filesystem::path&, const std::vector<pid_t>&)>
      extra_fault;
  /// Restarts one of the backend's servers and returns its name. The nemesis calls it
  /// `restarts` times, spread over the run, each when a holder has 1.2 s of its section left
  /// (less, down to 0.4 s, the longer it waits for one), which no other fault strikes until
  /// that section ends, and logs an R line. Only for
  /// servers no other test uses meanwhile (the partition set's).
  std::function<std::string(std::mt19937&)> restart_server;
  int restarts = 0;
};

/// Runs the plan in `directory` and returns the path of the history log. Fails the test
/// (Catch2) when a worker does not end well.
std::filesystem::path run_nemesis(const std::filesystem::path& directory, const nemesis_plan& plan);

/// The fenced store's journal of the workload on `name` in a run in `directory`.
std::filesystem::path nemesis_journal(const std::filesystem::path& directory,
                                      const std::string& name);

}  // namespace support
