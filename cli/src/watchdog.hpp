// The watchdog that kills the command's process group if dlock dies (SIGKILL, a crash, the
// OOM killer), so that no part of the command runs on without the lock.
#pragma once

#include <sys/types.h>

#include <string>

namespace dlock::cli {

class watchdog {
 public:
  /// Starts the watchdog process: the program `helper` (the installed dlock-watchdog) when it
  /// is executable, else a fork of dlock (raw_children.hpp). Started once the lock is granted,
  /// just before the command. Until a command's pid reaches it (the command's child writes it
  /// there, supervised_child), it guards nothing: when dlock exits without starting a command
  /// (the command could not be started), the watchdog reads EOF and exits too. Throws
  /// spawn_error (exit 71) when no process can be made.
  explicit watchdog(const std::string& helper);
  /// Without a command (command_pipe() never called: the command could not be started):
  /// closes the pipe and waits for the watchdog, which ends at that EOF, so none is left over.
  /// With one, leaves the pipe open: the command stays guarded until dlock exits, so an error
  /// after its start still ends its group (disarm() is the normal end).
  ~watchdog();
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

  /// The pipe's write end, where the command's child writes its pid before exec. From this
  /// call on the watchdog guards a command, and only disarm() or dlock's exit ends that.
  int command_pipe();
  /// Tells the watchdog that dlock ends normally: leftovers of the group are left alone. Does
  /// not wait for the watchdog to exit (it is reaped here if it is gone already, else by
  /// whoever inherits it). Idempotent.
  void disarm();

 private:
  int pipe_ = -1;  // its write end; the watchdog reads EOF if dlock dies
  pid_t pid_ = -1;
  bool guarding_ = false;  // command_pipe() was called
};

}  // namespace dlock::cli
