// What the watchdog does, in the exec'd helper (watchdog_main.cpp) and in the fork that
// stands in for it when the helper is missing (raw_children.cpp): raw system calls only.
#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <cerrno>

#include "raw_syscall.hpp"

namespace dlock::cli {

inline bool read_fully(int fd, void* into, long size) {
  auto* at = static_cast<char*>(into);
  long have = 0;
  while (have < size) {
    const long got = raw_call(SYS_read, fd, reinterpret_cast<long>(at + have), size - have);
    if (got == -EINTR) continue;
    if (got <= 0) return false;
    have += got;
  }
  return true;
}

/// Reads the command's pid (its group) from `fd`, then waits for one more byte; EOF instead
/// (dlock died: every write end is closed) kills the group.
inline void watch_group(int fd) {
  pid_t group = 0;
  if (!read_fully(fd, &group, sizeof group)) return;  // no command was started
  char verdict = 0;
  if (!read_fully(fd, &verdict, 1)) raw_call(SYS_kill, -group, SIGKILL);  // dlock died
}

}  // namespace dlock::cli
