// Reads of a thread's stack from the signal handler, checked against the
// thread's StackBounds first, so a corrupt frame chain ends a walk instead of
// faulting. Shared by the frame-pointer and CFI unwinders.
#ifndef DLPROF_BACKENDS_STACK_READER_H_
#define DLPROF_BACKENDS_STACK_READER_H_

#include <cstdint>

#include "backends/unwinder.h"

namespace dlprof {

// Above this no user-space code runs (x86_64 with 5-level paging: 2^57;
// aarch64: 2^52). A "return address" up there is data the walk misread
// (a frame pointer used as a general register), never a caller; kept, it
// would even read as a Python frame (DLPROF_PY_FRAME_BIT) in the reader.
constexpr uintptr_t kUserAddressLimit = uintptr_t{1} << 57;

// True when `pc` can be an address of user code. Async-signal-safe.
inline bool PlausibleUserPc(uintptr_t pc) { return pc != 0 && pc < kUserAddressLimit; }

class StackReader {
 public:
  explicit StackReader(const StackBounds& b)
      : lo_(b.lo), hi_(b.hi), alt_lo_(b.alt_lo), alt_hi_(b.alt_hi) {}
  bool usable() const {
    return (hi_ > lo_ && hi_ - lo_ >= 16) || (alt_hi_ > alt_lo_ && alt_hi_ - alt_lo_ >= 16);
  }
  // True (and *out set) if the aligned word at `addr` lies inside the bounds
  // (the thread's stack, or the signal stack beside it).
  // This function is safe to call from asynchronous signals.
  // Not instrumented by ASan: a frame pointer from code built without one
  // (libbz2, libc) points anywhere in the stack, often into an instrumented
  // frame's locals, and reading the word there is the walk's job (the bounds
  // keep it in the stack); ASan calls that a stack-buffer-overflow when the
  // word overlaps a redzone, and the profiled program died of it.
  __attribute__((no_sanitize("address"))) bool Read(uintptr_t addr, uintptr_t* out) const {
    if ((addr & 7) != 0) return false;
    const bool in_stack = hi_ >= sizeof(uintptr_t) && addr >= lo_ && addr <= hi_ - sizeof(uintptr_t);
    const bool in_alt = alt_hi_ >= sizeof(uintptr_t) && addr >= alt_lo_ &&
                        addr <= alt_hi_ - sizeof(uintptr_t);
    if (!in_stack && !in_alt) return false;
    *out = *reinterpret_cast<const uintptr_t*>(addr);
    return true;
  }
  // What a walk tells its reader (a tracing one keeps only the words that
  // decided the walk: backends/cfi_unwinder.cc): the last read was of a
  // saved %rbp; the %rbp a frame holds was used (as a CFA base or a frame
  // pointer). Nothing here. Async-signal-safe.
  void FpRead() const {}
  void FpUsed() const {}
  // Copies the stack from `from` (aligned down to a word) up to the end of
  // the range holding it, at most `max_bytes`, into `out`; returns the bytes
  // copied (0 if `from` is in neither range) and sets *copied_from. Word by
  // word through volatile loads: not turned into a call to memcpy, which
  // ASan would check against the redzones of instrumented frames.
  // This function is safe to call from asynchronous signals.
  __attribute__((no_sanitize("address"))) size_t Copy(uintptr_t from, size_t max_bytes,
                                                      uint8_t* out,
                                                      uintptr_t* copied_from) const {
    from &= ~uintptr_t{7};
    uintptr_t end = 0;
    if (from >= lo_ && from < hi_) {
      end = hi_;
    } else if (from >= alt_lo_ && from < alt_hi_) {
      end = alt_hi_;
    } else {
      return 0;
    }
    end &= ~uintptr_t{7};
    if (end <= from) return 0;
    size_t bytes = end - from < max_bytes ? end - from : max_bytes & ~size_t{7};
    const volatile uintptr_t* src = reinterpret_cast<const volatile uintptr_t*>(from);
    uintptr_t* dst = reinterpret_cast<uintptr_t*>(out);
    for (size_t i = 0; i < bytes / sizeof(uintptr_t); ++i) dst[i] = src[i];
    *copied_from = from;
    return bytes;
  }

 private:
  uintptr_t lo_;
  uintptr_t hi_;
  uintptr_t alt_lo_;
  uintptr_t alt_hi_;
};

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_STACK_READER_H_
