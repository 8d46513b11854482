// dlock-watchdog: the process that kills the command's group if dlock dies
// (supervised_child.hpp). dlock starts it with clone(CLONE_VM) and exec (raw_children.cpp;
// without CLONE_VFORK, so dlock goes on while it starts): once exec'd it has its own memory (the OOM killer, choosing dlock, kills every process
// sharing dlock's), and starting it copies none of dlock's page tables, as a fork would. So that
// the exec is cheap it has no libc, no loader and no C++ runtime: a few raw system calls, linked
// static (cli/CMakeLists.txt). Its descriptor 0 is the read end of dlock's pipe; dlock closed
// 1 and 2 and blocked every signal before the exec.
#include "watchdog_watch.hpp"

extern "C" [[noreturn]] void dlock_watchdog_main() {
  dlock::cli::watch_group(0);
  for (;;) dlock::cli::raw_call(SYS_exit, 0);
}

// The entry point: the stack aligned as the ABI wants it at a call, and nothing else set up.
#if defined(__x86_64__)
asm(".globl _start\n_start:\n  xor %rbp, %rbp\n  and $-16, %rsp\n  call dlock_watchdog_main\n");
#elif defined(__aarch64__)
asm(".globl _start\n_start:\n  mov x29, #0\n  mov x30, #0\n  bl dlock_watchdog_main\n");
#else
#error "dlock-watchdog: no entry point for this architecture (cli/CMakeLists.txt skips it)"
#endif
