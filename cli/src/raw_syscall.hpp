// raw_call: a system call that leaves errno alone, for code that runs where errno must not
// be touched (raw_children.cpp) or where there is no libc at all (watchdog_main.cpp).
#pragma once

#if !defined(__x86_64__) && !defined(__aarch64__)
#include <unistd.h>

#include <cerrno>
#endif

// errno lives in the thread-local storage of the dlock thread that made a CLONE_VM child,
// which the child shares; a child made by fork may only make async-signal-safe calls.
namespace dlock::cli {

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

}  // namespace dlock::cli
