// The executable segment of a loaded object, found off the signal path, so
// that an interposer can tell by a return address who called it (libunwind,
// a sanitizer runtime) with one comparison, safely from a signal handler.
#ifndef DLPROF_BACKENDS_CODE_RANGE_H_
#define DLPROF_BACKENDS_CODE_RANGE_H_

#include <atomic>
#include <cstdint>

namespace dlprof {

class CodeRange {
 public:
  // The executable PT_LOAD segment of the object that defines `symbol`
  // (nothing if `symbol` is null or unknown). Not signal-safe.
  void FindObjectOf(const void* symbol);
  // This function is safe to call from asynchronous signals.
  bool Contains(uintptr_t address) const {
    const uintptr_t start = start_.load(std::memory_order_acquire);
    return start != 0 && address >= start && address < end_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<uintptr_t> start_{0}, end_{0};
};

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_CODE_RANGE_H_
