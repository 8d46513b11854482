// The command started without fork: a clone(CLONE_VM | CLONE_VFORK) child that shares dlock's
// memory until it execs, as posix_spawn's does, so no page table is copied and dlock takes no
// copy-on-write faults afterwards. What it runs must not touch dlock's heap, locks or
// thread-local state (errno): it makes raw system calls only, and its file is built without
// sanitizer instrumentation, whose runtime keeps per-thread state the child would share with
// dlock's thread. The watchdog, which must survive whatever kills dlock, is a clone(CLONE_VM)
// child too (without CLONE_VFORK: it execs while dlock goes on) that execs a small program of
// its own (or, without it, is a fork running the same kind of code).
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace dlock::cli {

/// What the command's child needs; it reads it while dlock's thread waits (CLONE_VFORK).
struct command_start {
  const char* program;      // resolved path
  char* const* argv;
  char* const* envp;
  pid_t parent;             // dlock: the child gives up if it is gone already
  int watchdog_fd;          // the child writes its pid (its group) here before exec
  int terminal;             // handed to the child's group, or -1
  const sigset_t* mask;     // the command's signal mask
  int exec_errno = 0;       // set by the child when execve failed
  bool unwatched = false;   // set by the child, which did not exec: the watchdog failed to start
};

/// Starts `start.program` in a new process group (its pid), with PR_SET_PDEATHSIG SIGKILL,
/// once the watchdog started last has memory of its own (its child waits for the watchdog's
/// exec), returning once it has called execve (or failed: then `start.exec_errno` is set and the
/// child exits with status 127). Returns the pid, or -1 with errno when no child was made.
pid_t start_command(command_start& start);

/// Starts the watchdog: it reads a pid from `read_end`, then waits for one more byte; EOF
/// instead (dlock died: every write end, `write_end` included, is closed) kills the pid's
/// process group. All signals that can be are blocked in it, and it holds none of dlock's other
/// descriptors, 0 to 2 included, so it holds no pipe of dlock's output open. It has its own
/// memory (the OOM killer's choice of dlock does not end it too): the helper program at
/// `helper` (dlock-watchdog, watchdog_main.cpp), exec'd by a clone(CLONE_VM) child while dlock
/// goes on (start_command waits for that exec), or, when `helper` is null or not executable,
/// a fork. Returns its pid, or -1 with errno.
pid_t start_watchdog(int read_end, int write_end, const char* helper);

}  // namespace dlock::cli
