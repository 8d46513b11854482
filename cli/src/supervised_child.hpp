// The command that dlock runs under the lock: its own process group, the terminal handed to
// it when dlock runs in the foreground, stopped and continued with it, and killed (by its
// watchdog) if dlock dies.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::cli {

class watchdog;

/// The command (or its watchdog) could not be started; exit_code is 126, 127 or 71.
struct spawn_error : std::runtime_error {
  spawn_error(int code, const std::string& message) : std::runtime_error(message), exit_code(code) {}
  int exit_code;
};

class supervised_child {
 public:
  /// Starts `command` (searched in $PATH unless it has a '/') in a new process group with
  /// `extra_env` ("K=V") added and the signal mask `child_mask`; dispositions stay as dlock
  /// inherited them (exec resets handlers; a SIGHUP ignored by nohup stays ignored).
  ///
  /// `watcher`, started earlier, learns the group before the command execs: if dlock dies
  /// without calling watcher.disarm() (SIGKILL, a crash), it kills the whole group,
  /// grandchildren included, so no part of the command runs on without the lock. The command
  /// execs only once the watchdog has memory of its own (raw_children.hpp). Throws
  /// spawn_error.
  supervised_child(const std::vector<std::string>& command,
                   const std::vector<std::string>& extra_env, const sigset_t& child_mask,
                   watchdog& watcher);
  /// Gives the terminal back to dlock's process group if the command had it.
  ~supervised_child();
  supervised_child(const supervised_child&) = delete;
  supervised_child& operator=(const supervised_child&) = delete;

  pid_t pid() const { return pid_; }
  /// Sends `signo` to the command's whole process group.
  void signal_group(int signo) const;
  /// True while any process of the command's group exists.
  bool group_alive() const;
  /// The command's wait status once it has exited, else nullopt. When the command stopped
  /// (Ctrl-Z, SIGTTIN) and dlock has a controlling terminal, dlock stops too, as a shell job
  /// would, and on being continued hands the terminal back and continues the command.
  /// Throws std::system_error if the command cannot be waited for.
  std::optional<int> try_reap();

 private:
  void follow_stop();

  pid_t pid_ = -1;
  int terminal_ = -1;            // dlock's controlling terminal, or -1
  bool owns_terminal_ = false;   // the command's group has the terminal
};

}  // namespace dlock::cli
