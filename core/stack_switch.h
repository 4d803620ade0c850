// Running a function on another stack: the signal handler's way of keeping
// off the program's stack (core/signal_handler.cc).
#ifndef DLPROF_CORE_STACK_SWITCH_H_
#define DLPROF_CORE_STACK_SWITCH_H_

#include <cstddef>
#include <cstdint>

namespace dlprof {

// True where RunOnStack really switches stacks (x86_64, aarch64); elsewhere it
// calls the function on the current stack.
bool StackSwitchSupported();

// Calls fn(arg) with the stack pointer at `stack_top` (rounded down to 16
// bytes), then returns on the caller's stack. The switch is one assembly frame
// with call-frame information (the caller's stack pointer is kept in the frame
// pointer register, CFA = fp + 16), so debuggers, libunwind's fast trace and
// frame-pointer walkers go from fn's frames back to the caller's stack.
// `stack_top` 0 (no stack) or an unsupported architecture: fn(arg) right here.
// This function is safe to call from asynchronous signals.
void RunOnStack(void* arg, void (*fn)(void*), uintptr_t stack_top);

// Maps a stack of `bytes` (rounded up to pages) with an inaccessible guard
// page below it and returns its top, or 0 when the mapping fails. Never
// unmapped. Not signal-safe.
uintptr_t MapStack(size_t bytes);

}  // namespace dlprof

#endif  // DLPROF_CORE_STACK_SWITCH_H_
