// A system call without going through any function: for code that runs
// before a sanitizer has set up the thread (the pthread_create hand-over in
// core/session_threads.cc), where even libdlprof's own syscall() interposer
// (core/hooks.cc), being instrumented, must not be called.
#ifndef DLPROF_CORE_RAW_SYSCALL_H_
#define DLPROF_CORE_RAW_SYSCALL_H_

#include <unistd.h>

namespace dlprof {

// Returns the kernel's result (-errno on failure; errno is not set).
// This function is safe to call from asynchronous signals.
__attribute__((always_inline, no_sanitize("address", "thread", "undefined"))) inline long
RawSyscall6(long n, long a, long b, long c, long d, long e, long f) {
#if defined(__x86_64__)
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
#else
  const long rc = syscall(n, a, b, c, d, e, f);
  return rc < 0 ? -errno : rc;
#endif
}

}  // namespace dlprof

#endif  // DLPROF_CORE_RAW_SYSCALL_H_
