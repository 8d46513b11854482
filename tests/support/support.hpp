// Test support: waiting on conditions with deadlines, temporary directories, child processes.
// Every wait in the tests goes through wait_until; nothing sleeps and hopes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

/// Ends the running test case as skipped, saying why (a stream expression): CTest reads the
/// line it prints (SKIP_REGULAR_EXPRESSION, tests/CMakeLists.txt) and reports the case as
/// skipped, counted in its summary, never as passed. For a case that cannot apply to this
/// backend, decided before the case checks anything.
#define DLOCK_SKIP(reason)                                         \
  do {                                                             \
    std::cout << "dlock-test-skipped: " << reason << std::endl;    \
    return;                                                        \
  } while (false)

namespace support {

using namespace std::chrono_literals;

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 10s);

/// A fresh directory under $TMPDIR, removed with its contents on destruction.
class temp_directory {
 public:
  temp_directory();
  ~temp_directory();
  temp_directory(const temp_directory&) = delete;
  temp_directory& operator=(const temp_directory&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Every file descriptor the process may open is in use while this lives: a low soft limit
/// (RLIMIT_NOFILE), then the holes below it filled. give_back() (or destruction) closes them
/// and restores the limit.
class descriptors_used_up {
 public:
  descriptors_used_up();
  ~descriptors_used_up();
  descriptors_used_up(const descriptors_used_up&) = delete;
  descriptors_used_up& operator=(const descriptors_used_up&) = delete;
  /// The errno of the open that found no descriptor left: EMFILE when it worked.
  int open_errno() const { return open_errno_; }
  void give_back();

 private:
  std::vector<int> fillers_;
  unsigned long long soft_limit_ = 0;
  int open_errno_ = 0;
  bool lowered_ = false;
};

/// A name unique to this process and call, for backends whose state outlives a test.
std::string unique_name(const std::string& base);

/// A child process with pipes to its stdin and from its stdout (stderr is inherited).
class child_process {
 public:
  /// Starts `argv` (argv[0] is a path) with `extra_env` ("K=V") added to the environment.
  explicit child_process(std::vector<std::string> argv, std::vector<std::string> extra_env = {},
                         bool new_process_group = false);
  ~child_process();  // kills (SIGKILL) and reaps a child still running
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  /// Reads one line of stdout (without '\n'); nullopt on EOF or when `timeout` passes.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout = 10s);
  /// Everything left on stdout until EOF (bounded by `timeout`).
  std::string read_all(std::chrono::milliseconds timeout = 10s);
  void write_stdin(const std::string& text);
  void close_stdin();
  void signal(int signo);
  /// Waits for exit; returns the wait status, or nullopt when `timeout` passes first.
  std::optional<int> wait(std::chrono::milliseconds timeout = 10s);

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

/// Runs `processes` helper processes that each take the lock `name` at `url` `iterations`
/// times, logging every critical section to `log`; throws if one fails or hangs.
void run_contenders(const std::string& url, const std::string& name, int processes,
                    int iterations, const std::filesystem::path& log);

/// Reads a log written by `dlock-test-helper contend` processes and returns how many
/// critical sections it holds. Throws std::runtime_error naming the first line where two
/// sections overlap or a fencing token fails to rise.
int count_exclusive_sections(const std::filesystem::path& log);

/// Exit code of a wait status, or 128 + signal for a killed child.
int exit_code(int wait_status);

/// Paths of the programs under test, set by CMake.
std::string helper_path();
std::string cli_path();
/// The dlock-watchdog helper of the build tree; empty where it is not built.
std::string watchdog_path();

}  // namespace support
