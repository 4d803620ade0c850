// The stack pointer of the calling code, for the tests that measure how
// much of a thread's stack the signal handler uses.
#ifndef DLPROF_TESTS_SUPPORT_STACK_POINTER_H_
#define DLPROF_TESTS_SUPPORT_STACK_POINTER_H_

#include <cstdint>

namespace dlprof::testing {

inline __attribute__((always_inline)) uintptr_t StackPointer() {
  uintptr_t sp;
#if defined(__x86_64__)
  asm volatile("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
  asm volatile("mov %0, sp" : "=r"(sp));
#else
  sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
#endif
  return sp;
}

}  // namespace dlprof::testing

#endif  // DLPROF_TESTS_SUPPORT_STACK_POINTER_H_
