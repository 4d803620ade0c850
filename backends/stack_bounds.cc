#include <pthread.h>

#include "backends/unwinder.h"

namespace dlprof {

StackBounds CurrentStackBounds() { return StackBoundsOf(pthread_self()); }

StackBounds StackBoundsOf(pthread_t thread) {
  StackBounds b;
  pthread_attr_t attr;
  if (pthread_getattr_np(thread, &attr) != 0) return b;
  void* addr = nullptr;
  size_t size = 0;
  if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
    b.lo = reinterpret_cast<uintptr_t>(addr);
    b.hi = b.lo + size;
  }
  pthread_attr_destroy(&attr);
  return b;
}

}  // namespace dlprof
