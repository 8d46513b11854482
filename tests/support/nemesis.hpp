// A nemesis run: worker processes (dlock-test-helper nemesis-worker) take a lock or a
// semaphore's slots again and again while the nemesis pauses and kills them at random, and,
// when given one, applies a fault of the caller's (a network partition). The history it leaves
// is judged by history.hpp's checkers.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace support {

struct nemesis_plan {
  /// One worker per URL (the same backend, possibly over different network paths).
  std::vector<std::string> worker_urls;
  std::string name;
  std::string mode = "lock";  ///< lock | semaphore:N
  int seconds = 8;
  /// An extra fault the nemesis picks as often as a pause. It gets the random engine, the
  /// history log and the workers' pids (by URL index); it applies its fault, undoes it, and
  /// logs a "P <pid> <from> <to>" line for every worker it cut off.
  std::function<void(std::mt19937&, const std::filesystem::path&, const std::vector<pid_t>&)>
      extra_fault;
};

/// Runs the plan in `directory` and returns the path of the history log; the fenced store's
/// journal is directory/store.journal. Fails the test (Catch2) when a worker does not end well.
std::filesystem::path run_nemesis(const std::filesystem::path& directory, const nemesis_plan& plan);

}  // namespace support
