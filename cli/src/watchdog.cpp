#include "watchdog.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "exit_codes.hpp"
#include "raw_children.hpp"
#include "supervised_child.hpp"

namespace dlock::cli {

watchdog::watchdog(const std::string& helper) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    throw spawn_error(exit_os_error, std::string("dlock: pipe: ") + std::strerror(errno));
  }
  const pid_t pid = start_watchdog(ends[0], ends[1], helper.empty() ? nullptr : helper.c_str());
  const int err = errno;
  ::close(ends[0]);
  if (pid < 0) {
    ::close(ends[1]);
    throw spawn_error(exit_os_error, std::string("dlock: cannot start the watchdog: ") +
                                         std::strerror(err) + "; the command was not run");
  }
  pipe_ = ends[1];
  pid_ = pid;
}

watchdog::~watchdog() {
  if (guarding_ || pipe_ < 0) return;
  ::close(pipe_);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

int watchdog::command_pipe() {
  guarding_ = true;
  return pipe_;
}

void watchdog::disarm() {
  if (pipe_ < 0) return;
  const char verdict = 'x';
  [[maybe_unused]] auto written = ::write(pipe_, &verdict, 1);
  ::close(pipe_);
  pipe_ = -1;
  // Not waited for: the verdict is in the pipe, so the watchdog leaves the group alone and
  // exits on its own; waiting for it to be scheduled only delayed dlock's exit on a busy
  // machine.
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) < 0 && errno == EINTR) {
  }
}

}  // namespace dlock::cli
