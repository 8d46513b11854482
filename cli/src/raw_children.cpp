#include "raw_children.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/futex.h>

#include <cerrno>
#include <cstring>

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

// The watchdog's child runs beside dlock's thread until it execs (no CLONE_VFORK), so it has
// a stack and a start record of its own, both static: nothing dlock's thread frees or reuses.
constexpr std::size_t watchdog_stack_bytes = 16 * 1024;
alignas(16) char watchdog_stack[watchdog_stack_bytes];
struct {
  char path[4096];
  int read_end;
  int write_end;
} helper_start;

// Nonzero (the watchdog child's tid, CLONE_PARENT_SETTID) from the watchdog's clone until its
// child has exec'd or exited: the kernel then clears it and wakes its futex
// (CLONE_CHILD_CLEARTID), as it does for a thread's join.
int watchdog_sharing_memory = 0;
// Set by the watchdog's child when neither its exec nor its fork worked: there is no watchdog.
int watchdog_failed = 0;

// Waits until the watchdog has memory of its own. Until it execs it shares dlock's, and the OOM
// killer, choosing dlock, would end it too: the command must not run (and fork) before that.
void wait_for_watchdog_exec() {
  for (;;) {
    const int tid = __atomic_load_n(&watchdog_sharing_memory, __ATOMIC_ACQUIRE);
    if (tid == 0) return;
    // Not FUTEX_PRIVATE: the kernel's wake at exec is a shared one.
    raw_call(SYS_futex, reinterpret_cast<long>(&watchdog_sharing_memory), FUTEX_WAIT, tid, 0);
  }
}

int run_command(void* arg) {
  auto& start = *static_cast<command_start*>(arg);
  wait_for_watchdog_exec();
  if (__atomic_load_n(&watchdog_failed, __ATOMIC_ACQUIRE) != 0) {
    start.unwatched = true;  // dlock reads it once the child is gone
    exit_child(exit_os_error);
  }
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

// The watchdog's child: the read end becomes its descriptor 0 (without close-on-exec), 1 and 2
// are closed (it must not hold a pipe on dlock's output open after dlock exits), every signal
// is blocked (Ctrl-C, Ctrl-Z or a kill of dlock's group must not end it), and it execs the
// helper. If the exec fails, a raw fork (no libc at-fork handlers run in memory shared with
// dlock) watches instead, with its own copy of dlock's memory.
int exec_helper(void*) {
  const unsigned long all = ~0UL;
  raw_call(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&all), 0, kernel_sigset_bytes);
  if (helper_start.read_end == 0) {
    raw_call(SYS_fcntl, 0, F_SETFD, 0);
  } else {
    raw_call(SYS_dup3, helper_start.read_end, 0, 0);
  }
  raw_call(SYS_close, 1);
  raw_call(SYS_close, 2);
  char* const argv[] = {const_cast<char*>("dlock-watchdog"), nullptr};
  char* const envp[] = {nullptr};
  raw_call(SYS_execve, reinterpret_cast<long>(helper_start.path), reinterpret_cast<long>(argv),
           reinterpret_cast<long>(envp));
  const long forked = raw_call(SYS_clone, SIGCHLD, 0, 0, 0);
  if (forked == 0) watch(pack(0, helper_start.write_end));
  if (forked < 0) __atomic_store_n(&watchdog_failed, 1, __ATOMIC_RELEASE);
  exit_child(0);
}

}  // namespace

pid_t start_watchdog(int read_end, int write_end, const char* helper) {
  // The helper by clone(CLONE_VM) and exec: a fork copies dlock's page tables and costs dlock
  // a copy-on-write fault for each page it writes afterwards (about 40 per run), which the exec
  // of a libc-free static file does not. Without CLONE_VFORK dlock's thread goes on at once,
  // and the exec overlaps with its preparation of the command, whose child waits for it.
  if (helper != nullptr && std::strlen(helper) < sizeof helper_start.path &&
      ::access(helper, X_OK) == 0) {
    std::strcpy(helper_start.path, helper);
    helper_start.read_end = read_end;
    helper_start.write_end = write_end;
    const pid_t pid = libc_clone()(
        exec_helper, watchdog_stack + watchdog_stack_bytes,
        CLONE_VM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, nullptr,
        &watchdog_sharing_memory, nullptr, &watchdog_sharing_memory);
    if (pid > 0) return pid;
    watchdog_sharing_memory = 0;
  }
  // No helper (dlock run from elsewhere than its installation): a fork. Never clone(CLONE_VM)
  // without exec: a watchdog sharing dlock's memory would die with it when the OOM killer chose
  // dlock (it kills every process of the victim's memory), and the command's group would go on.
  const pid_t pid = ::fork();
  if (pid == 0) exit_child(watch(pack(read_end, write_end)));
  return pid;
}

}  // namespace dlock::cli
