// A thread's stack bounds, found without allocating where that can be done:
// a thread's first malloc or free (pthread_getattr_np does both, for the
// affinity mask) makes glibc create a malloc arena for it, 64 MiB of address
// space that RLIMIT_AS counts and the program would not have had.
#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backends/stack_bounds.h"

namespace dlprof {
namespace {

uintptr_t PageSize() {
  const unsigned long page = getauxval(AT_PAGESZ);
  return page != 0 ? page : 4096;
}

uintptr_t PageDown(uintptr_t a, uintptr_t page) { return a & ~(page - 1); }
uintptr_t PageUp(uintptr_t a, uintptr_t page) { return (a + page - 1) & ~(page - 1); }

// The main thread's stack ends just above the executable's name that the
// kernel copies first, at the very top (AT_EXECFN, then one null word:
// fs/exec.c), and may grow down to RLIMIT_STACK. False where that does not
// hold: the name overwritten or across a page, no limit, or this thread
// running elsewhere (the child of a fork from another thread has the pid as
// its tid, and that thread's stack).
}  // namespace

bool MainThreadStackBounds(uintptr_t sp, StackBounds* b) {
  const uintptr_t page = PageSize();
  const uintptr_t execfn = getauxval(AT_EXECFN);
  if (execfn == 0) return false;
  const uintptr_t in_page = PageUp(execfn + 1, page) - execfn;  // reads stay in its page
  const size_t len = strnlen(reinterpret_cast<const char*>(execfn), in_page);
  if (len >= in_page) return false;
  const uintptr_t hi = execfn + len + 1 + sizeof(void*);
  if (hi % page != 0) return false;
  rlimit rl{};
  if (getrlimit(RLIMIT_STACK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return false;
  const uintptr_t size = PageDown(rl.rlim_cur, page);
  if (size == 0 || size >= hi || sp >= hi || hi - sp >= size) return false;
  b->lo = hi - size;
  b->hi = hi;
  return true;
}

// A thread started with a hint. A stack the program gave is the hint itself.
// On a stack glibc mapped (size plus a guard below it), the thread pointer
// is the thread descriptor at the top, less than a page from the end of the
// mapping (nptl/allocatestack.c), so the stack is the `size` bytes below the
// end: from one page above PageDown(self - size) (the guard, or none, below).
bool HintedStackBounds(const StackHint& hint, uintptr_t sp, StackBounds* b) {
  const uintptr_t page = PageSize();
  uintptr_t lo = 0, hi = 0;
  if (hint.user_lo != 0) {
    lo = hint.user_lo;
    hi = hint.user_lo + hint.size;
  } else {
    const uintptr_t self = reinterpret_cast<uintptr_t>(pthread_self());
    if (hint.size == 0 || self < hint.size) return false;
    hi = PageUp(self, page);
    lo = PageDown(self - hint.size, page) + page;
  }
  if (!(lo < sp && sp < hi)) return false;
  b->lo = lo;
  b->hi = hi;
  return true;
}

StackHint StackHintFor(const pthread_attr_t* attr) {
  StackHint h;
  pthread_attr_t defaults;
  if (attr == nullptr) {
    if (pthread_attr_init(&defaults) != 0) return h;
    attr = &defaults;
  }
  void* addr = nullptr;
  size_t size = 0;
  // pthread_attr_getstack gives addr + size == 0 when no stack was set.
  if (pthread_attr_getstack(attr, &addr, &size) == 0 &&
      reinterpret_cast<uintptr_t>(addr) + size != 0 && addr != nullptr) {
    h.user_lo = reinterpret_cast<uintptr_t>(addr);
    h.size = size;
  } else if (pthread_attr_getstacksize(attr, &size) == 0) {
    h.size = size;  // the default's when the attr sets none
  }
  if (attr == &defaults) pthread_attr_destroy(&defaults);
  return h;
}

StackBounds CurrentStackBounds(const StackHint* hint) {
  StackBounds b;
  const uintptr_t sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (gettid() == getpid() && MainThreadStackBounds(sp, &b)) return b;
  if (hint != nullptr && HintedStackBounds(*hint, sp, &b)) return b;
  return StackBoundsOf(pthread_self());
}

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
