// The command that dlock runs under the lock: its own process group, the terminal handed to
// it when dlock runs in the foreground, and killed if dlock dies.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::cli {

/// The command could not be started; exit_code is 126, 127 or 71.
struct spawn_error : std::runtime_error {
  spawn_error(int code, const std::string& message) : std::runtime_error(message), exit_code(code) {}
  int exit_code;
};

class supervised_child {
 public:
  /// Starts `command` (searched in $PATH unless it has a '/') with `extra_env` ("K=V") added,
  /// the signal mask `child_mask`; dispositions stay as dlock inherited them (exec resets
  /// handlers, and a SIGHUP ignored by nohup stays ignored). Throws spawn_error.
  supervised_child(const std::vector<std::string>& command,
                   const std::vector<std::string>& extra_env, const sigset_t& child_mask);
  /// Gives the terminal back to dlock's process group if the command had it.
  ~supervised_child();
  supervised_child(const supervised_child&) = delete;
  supervised_child& operator=(const supervised_child&) = delete;

  pid_t pid() const { return pid_; }
  /// Sends `signo` to the command's whole process group.
  void signal_group(int signo) const;
  /// The command's wait status once it has exited (non-blocking), else nullopt.
  std::optional<int> try_reap();

 private:
  pid_t pid_ = -1;
  bool owns_terminal_ = false;
};

}  // namespace dlock::cli
