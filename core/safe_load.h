// Reads of memory that may not be there, for the signal handler's walk of
// another runtime's structures (CPython's frames) and for the collector's
// reads of its objects. A read that faults (SIGSEGV, SIGBUS) returns
// "faulted" instead of killing the process: dlprof's fault handler
// (core/fault_handler.h) recognises the one load instruction below and
// resumes after it. Any other fault goes to the program's own action, as
// without dlprof.
#ifndef DLPROF_CORE_SAFE_LOAD_H_
#define DLPROF_CORE_SAFE_LOAD_H_

#include <ucontext.h>

#include <cstddef>
#include <cstdint>

namespace dlprof {

struct SafeWord {
  uint64_t value;    // 0 when faulted
  uint64_t faulted;  // 1 when the address could not be read
};

// The 8 bytes at `p` (aligned or not). Only safe while the fault handler is
// installed (FaultHandlerInstalled()); without it a bad address kills the
// process as any load would. This function is safe to call from asynchronous
// signals: one load, no lock, no system call.
SafeWord SafeLoad(const void* p);

// Convenience forms. Each is safe to call from asynchronous signals.
inline bool SafeLoadU64(uintptr_t address, uint64_t* out) {
  const SafeWord w = SafeLoad(reinterpret_cast<const void*>(address));
  *out = w.value;
  return w.faulted == 0;
}
inline bool SafeLoadPtr(uintptr_t address, uintptr_t* out) {
  uint64_t v;
  const bool ok = SafeLoadU64(address, &v);
  *out = static_cast<uintptr_t>(v);
  return ok;
}
bool SafeLoadU32(uintptr_t address, uint32_t* out);
bool SafeLoadU8(uintptr_t address, uint8_t* out);
// `n` bytes from `address` into `out`, word by word (reads never run past
// the last 8-byte word that holds a wanted byte). False if any read faulted.
bool SafeCopy(uintptr_t address, void* out, size_t n);

// For the fault handler: when `uc` stopped at SafeLoad's load instruction,
// makes it return "faulted" and returns true. Async-signal-safe.
bool RecoverSafeLoad(ucontext_t* uc);

}  // namespace dlprof

#endif  // DLPROF_CORE_SAFE_LOAD_H_
