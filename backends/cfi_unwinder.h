// The "cfi" unwinder's walk for the collector: a blocked thread's native
// stack, from the pc and stack pointer the kernel reports for it
// (/proc/<tid>/syscall), over a copy of its stack. The thread is never
// signalled; it is the same walk as the signal handler's
// (backends/cfi_unwinder.cc), without %rbp.
#ifndef DLPROF_BACKENDS_CFI_UNWINDER_H_
#define DLPROF_BACKENDS_CFI_UNWINDER_H_

#include <cstddef>
#include <cstdint>

namespace dlprof {

// A copy of the stack addresses [lo, lo + size) of another thread.
struct CopiedStack {
  uintptr_t lo = 0;
  const uint8_t* bytes = nullptr;
  size_t size = 0;
};

// Writes up to `max` pcs (pcs[0] = pc, the rest return addresses, not
// adjusted) and returns how many. Reads only the copy; frames whose CFA rule
// needs a register other than the stack pointer end the walk while %rbp is
// unknown (it becomes known where a frame restores it from the stack).
// *not_built: frames that met an object without decoded rows yet (they are
// asked for, as by the handler: a walk at a later tick can go further).
// x86_64 only; elsewhere, pc alone. Not signal-safe in spirit (collector
// only), though it neither allocates nor locks.
int CfiWalkCopiedStack(uintptr_t pc, uintptr_t sp, const CopiedStack& stack, uintptr_t* pcs,
                       int max, int* not_built);

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_CFI_UNWINDER_H_
