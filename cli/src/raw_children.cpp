#include "raw_children.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "exit_codes.hpp"
#include "raw_syscall.hpp"
#include "watchdog_watch.hpp"

namespace dlock::cli {
namespace {

// ThreadSanitizer intercepts clone() and runs its own bookkeeping in the child, which a
// CLONE_VM child must not do (it would update the runtime's state of dlock's thread): under
// it, the command's child is made by libc's own clone(), found past the interceptor.
using clone_function = int (*)(int (*)(void*), void*, int, void*, ...);
clone_function libc_clone() {
#if DLOCK_CLONE_FROM_LIBC
  static const clone_function found = [] {
    void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void* symbol = libc ? ::dlsym(libc, "clone") : nullptr;
    return symbol ? reinterpret_cast<clone_function>(symbol) : &::clone;
  }();
  return found;
#else
  return &::clone;
#endif
}

constexpr long kernel_sigset_bytes = 8;  // _NSIG / 8 on Linux
constexpr std::size_t child_stack_bytes = 64 * 1024;

[[noreturn]] void exit_child(int status) {
  for (;;) raw_call(SYS_exit, status);
}

// The children's stack. One is enough: CLONE_VFORK suspends dlock's thread until a child
// execs or exits, and only that thread starts children. In the executable rather than mapped
// per child: no mmap and munmap per start, and its pages fault in once.
alignas(16) char child_stack[child_stack_bytes];

void* top_of_stack() { return child_stack + child_stack_bytes; }

int run_command(void* arg) {
  auto& start = *static_cast<command_start*>(arg);
  raw_call(SYS_setpgid, 0, 0);
  // The lock dies with dlock, so the command must too: it may not go on unprotected.
  raw_call(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
  if (raw_call(SYS_getppid) != start.parent) exit_child(exit_signal_base + SIGKILL);
  // Before exec, so there is no moment when the command could fork and dlock die with the
  // watchdog not knowing the group. The pipe is close-on-exec: the command has no copy.
  const pid_t self = static_cast<pid_t>(raw_call(SYS_getpid));
  raw_call(SYS_write, start.watchdog_fd, reinterpret_cast<long>(&self), sizeof self);
  // SIGTTOU is still blocked here, which lets a background group take the terminal.
  if (start.terminal >= 0) {
    raw_call(SYS_ioctl, start.terminal, TIOCSPGRP, reinterpret_cast<long>(&self));
  }
  raw_call(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(start.mask), 0,
           kernel_sigset_bytes);
  const long failed = raw_call(SYS_execve, reinterpret_cast<long>(start.program),
                               reinterpret_cast<long>(start.argv),
                               reinterpret_cast<long>(start.envp));
  start.exec_errno = static_cast<int>(-failed);  // dlock reads it once the child is gone
  exit_child(exit_not_found);
}

// The pipe's two ends, packed into one argument.
void* pack(int read_end, int write_end) {
  return reinterpret_cast<void*>((static_cast<unsigned long>(write_end) << 32) |
                                 static_cast<unsigned int>(read_end));
}

int watch(void* arg) {
  const auto packed = reinterpret_cast<unsigned long>(arg);
  const int fd = static_cast<int>(packed & 0xffffffffUL);
  raw_call(SYS_close, static_cast<long>(packed >> 32));  // else it never reads EOF
  // Signals meant for dlock's group (Ctrl-C, Ctrl-Z, a kill of the group) must not end it.
  const unsigned long all = ~0UL;
  raw_call(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&all), 0, kernel_sigset_bytes);
  // It never writes, and must not hold a pipe on dlock's output open after dlock exits
  // (dlock does not wait for it to end).
  for (int std_fd = 0; std_fd <= 2; ++std_fd) {
    if (std_fd != fd) raw_call(SYS_close, std_fd);
  }
  watch_group(fd);
  exit_child(0);
}

}  // namespace

pid_t start_command(command_start& start) {
  // CLONE_VFORK: dlock's thread waits until the child has exec'd or exited, so the child may
  // use the stack and write exec_errno, as posix_spawn does. posix_spawn itself cannot set
  // PR_SET_PDEATHSIG or tell the watchdog the group before exec.
  return libc_clone()(run_command, top_of_stack(), CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
}

namespace {

struct helper_start {
  const char* path;
  int read_end;
  int exec_errno = 0;
};

// The helper's child: the read end becomes its descriptor 0 (without close-on-exec), 1 and 2
// are closed (it must not hold a pipe on dlock's output open after dlock exits), every signal
// is blocked (Ctrl-C, Ctrl-Z or a kill of dlock's group must not end it), and it execs.
int exec_helper(void* arg) {
  auto& start = *static_cast<helper_start*>(arg);
  const unsigned long all = ~0UL;
  raw_call(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&all), 0, kernel_sigset_bytes);
  if (start.read_end == 0) {
    raw_call(SYS_fcntl, 0, F_SETFD, 0);
  } else {
    raw_call(SYS_dup3, start.read_end, 0, 0);
  }
  raw_call(SYS_close, 1);
  raw_call(SYS_close, 2);
  char* const argv[] = {const_cast<char*>("dlock-watchdog"), nullptr};
  char* const envp[] = {nullptr};
  const long failed = raw_call(SYS_execve, reinterpret_cast<long>(start.path),
                               reinterpret_cast<long>(argv), reinterpret_cast<long>(envp));
  start.exec_errno = static_cast<int>(-failed);
  exit_child(127);
}

}  // namespace

pid_t start_watchdog(int read_end, int write_end, const char* helper) {
  // The helper by clone(CLONE_VM | CLONE_VFORK) and exec, as the command: a fork copies dlock's
  // page tables and costs dlock a copy-on-write fault for each page it writes afterwards
  // (about 35 per run), which the exec of a libc-free static file does not.
  if (helper != nullptr) {
    helper_start start{.path = helper, .read_end = read_end};
    const pid_t pid =
        libc_clone()(exec_helper, top_of_stack(), CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
    if (pid > 0 && start.exec_errno == 0) return pid;
    if (pid > 0) {
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  }
  // No helper (dlock run from elsewhere than its installation): a fork. Never clone(CLONE_VM)
  // without exec: a watchdog sharing dlock's memory would die with it when the OOM killer chose
  // dlock (it kills every process of the victim's memory), and the command's group would go on.
  const pid_t pid = ::fork();
  if (pid == 0) exit_child(watch(pack(read_end, write_end)));
  return pid;
}

}  // namespace dlock::cli
