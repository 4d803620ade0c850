#include "core/stack_switch.h"

#include <sys/mman.h>
#include <unistd.h>

// dlprof_call_on_stack(arg, fn, stack_top): saves the caller's frame pointer
// on the caller's stack, keeps the caller's stack pointer in the frame pointer
// register, moves the stack pointer to stack_top and calls fn(arg). The CFA
// rule (fp + 16, saved fp at CFA - 16, return address at CFA - 8) is the
// ordinary frame-pointer frame, so a walker needs nothing special to cross it:
// libunwind's tdep_trace caches it as a standard frame.
#if defined(__x86_64__)
asm(R"(
  .text
  .p2align 4
  .globl dlprof_call_on_stack
  .hidden dlprof_call_on_stack
  .type dlprof_call_on_stack, @function
dlprof_call_on_stack:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  andq $-16, %rdx
  movq %rdx, %rsp
  callq *%rsi
  movq %rbp, %rsp
  .cfi_def_cfa_register %rsp
  popq %rbp
  .cfi_def_cfa_offset 8
  .cfi_restore %rbp
  retq
  .cfi_endproc
  .size dlprof_call_on_stack, .-dlprof_call_on_stack
  .section .note.GNU-stack,"",@progbits
  .text
)");
#define DLPROF_HAVE_STACK_SWITCH 1
#elif defined(__aarch64__)
asm(R"(
  .text
  .p2align 2
  .globl dlprof_call_on_stack
  .hidden dlprof_call_on_stack
  .type dlprof_call_on_stack, %function
dlprof_call_on_stack:
  .cfi_startproc
  stp x29, x30, [sp, #-16]!
  .cfi_def_cfa_offset 16
  .cfi_offset x29, -16
  .cfi_offset x30, -8
  mov x29, sp
  .cfi_def_cfa_register x29
  and x2, x2, #~15
  mov sp, x2
  blr x1
  mov sp, x29
  .cfi_def_cfa_register sp
  ldp x29, x30, [sp], #16
  .cfi_def_cfa_offset 0
  .cfi_restore x29
  .cfi_restore x30
  ret
  .cfi_endproc
  .size dlprof_call_on_stack, .-dlprof_call_on_stack
  .section .note.GNU-stack,"",%progbits
  .text
)");
#define DLPROF_HAVE_STACK_SWITCH 1
#endif

#ifdef DLPROF_HAVE_STACK_SWITCH
extern "C" void dlprof_call_on_stack(void* arg, void (*fn)(void*), uintptr_t stack_top);
#endif

namespace dlprof {

bool StackSwitchSupported() {
#ifdef DLPROF_HAVE_STACK_SWITCH
  return true;
#else
  return false;
#endif
}

void RunOnStack(void* arg, void (*fn)(void*), uintptr_t stack_top) {
#ifdef DLPROF_HAVE_STACK_SWITCH
  if (stack_top != 0) {
    dlprof_call_on_stack(arg, fn, stack_top);
    return;
  }
#else
  (void)stack_top;
#endif
  fn(arg);
}

uintptr_t MapStack(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bytes = (bytes + page - 1) / page * page;
  void* p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) return 0;
  if (mprotect(p, page, PROT_NONE) != 0) {
    munmap(p, bytes + page);
    return 0;
  }
  return reinterpret_cast<uintptr_t>(p) + page + bytes;
}

}  // namespace dlprof
