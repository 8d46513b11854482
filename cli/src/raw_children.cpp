#include "raw_children.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "exit_codes.hpp"

namespace dlock::cli {
namespace {

// A system call that leaves errno alone: errno lives in the thread-local storage of the
// dlock thread that made the child, which a CLONE_VM child shares. (The watchdog, a fork,
// makes the same calls: it too may only make async-signal-safe ones.)
#if defined(__x86_64__)
[[gnu::always_inline]] inline long raw_call(long number, long a = 0, long b = 0, long c = 0,
                                            long d = 0) {
  long result;
  register long r10 asm("r10") = d;
  asm volatile("syscall"
               : "=a"(result)
               : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10)
               : "rcx", "r11", "memory");
  return result;
}
#elif defined(__aarch64__)
[[gnu::always_inline]] inline long raw_call(long number, long a = 0, long b = 0, long c = 0,
                                            long d = 0) {
  register long x8 asm("x8") = number;
  register long x0 asm("x0") = a;
  register long x1 asm("x1") = b;
  register long x2 asm("x2") = c;
  register long x3 asm("x3") = d;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  return x0;
}
#else
// Elsewhere libc's syscall(), which sets errno on failure: harmless in the command's child,
// since dlock's thread is suspended until it execs.
inline long raw_call(long number, long a = 0, long b = 0, long c = 0, long d = 0) {
  const long result = ::syscall(number, a, b, c, d);
  return result == -1 ? -errno : result;
}
#endif

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

void* map_stack() {
  void* stack = ::mmap(nullptr, child_stack_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  return stack == MAP_FAILED ? nullptr : stack;
}

void* top_of(void* stack) { return static_cast<char*>(stack) + child_stack_bytes; }

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

bool read_fully(int fd, void* into, long size) {
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
  pid_t group = 0;
  if (!read_fully(fd, &group, sizeof group)) exit_child(0);  // no command was started
  char verdict = 0;
  if (!read_fully(fd, &verdict, 1)) raw_call(SYS_kill, -group, SIGKILL);  // dlock died
  exit_child(0);
}

}  // namespace

pid_t start_command(command_start& start) {
  void* stack = map_stack();
  if (!stack) return -1;
  // CLONE_VFORK: dlock's thread waits until the child has exec'd or exited, so the child may
  // use this stack and write exec_errno, as posix_spawn does. posix_spawn itself cannot set
  // PR_SET_PDEATHSIG or tell the watchdog the group before exec.
  const pid_t pid =
      libc_clone()(run_command, top_of(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
  const int err = errno;
  ::munmap(stack, child_stack_bytes);
  errno = err;
  return pid;
}

pid_t start_watchdog(int read_end, int write_end) {
  // fork, not clone(CLONE_VM): a watchdog sharing dlock's memory would die with it when the
  // OOM killer chose dlock (it kills every process of the victim's memory), and the command's
  // group would go on. Tried: the shared one saved about 45 page faults per run.
  const pid_t pid = ::fork();
  if (pid == 0) exit_child(watch(pack(read_end, write_end)));
  return pid;
}

}  // namespace dlock::cli
