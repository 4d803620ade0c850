// The two ways CurrentStackBounds (backends/unwinder.h) finds a stack without
// allocating, on their own for the tests. Not signal-safe.
#ifndef DLPROF_BACKENDS_STACK_BOUNDS_H_
#define DLPROF_BACKENDS_STACK_BOUNDS_H_

#include <cstdint>

#include "backends/unwinder.h"

namespace dlprof {

// The main thread's stack, from the auxiliary vector and RLIMIT_STACK, when
// `sp` (the caller's stack pointer) is in it. False where it cannot tell.
bool MainThreadStackBounds(uintptr_t sp, StackBounds* b);

// The calling thread's stack from its creator's `hint` and its thread
// pointer, when `sp` is in it. False where it cannot tell.
bool HintedStackBounds(const StackHint& hint, uintptr_t sp, StackBounds* b);

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_STACK_BOUNDS_H_
