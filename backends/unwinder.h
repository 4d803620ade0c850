// Unwinder backends: turn the interrupted context of a signal into return addresses.
#ifndef DLPROF_BACKENDS_UNWINDER_H_
#define DLPROF_BACKENDS_UNWINDER_H_

#include <pthread.h>
#include <ucontext.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlprof {

// The memory a thread's stack occupies, [lo, hi). Unwinders never read stack
// memory outside it, so a corrupt frame chain ends the walk instead of faulting.
struct StackBounds {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  // A second range the walk may read, [alt_lo, alt_hi): the signal stack
  // (sigaltstack) the interrupted code runs on, when it is not on the
  // thread's stack; 0, 0 for none. The walk crosses from it to the thread's
  // stack through the signal frame.
  uintptr_t alt_lo = 0;
  uintptr_t alt_hi = 0;
};

// What the creating thread knows of a new thread's stack (its pthread_attr_t),
// for the new thread to find its own bounds without pthread_getattr_np.
struct StackHint {
  uintptr_t user_lo = 0;  // a stack the program gave (pthread_attr_setstack): [user_lo, +size)
  size_t size = 0;        // else the size glibc maps for it (attr or default); 0: unknown
};
// The creating thread's side, from the attr given to pthread_create (null: the
// default attr). Not signal-safe.
StackHint StackHintFor(const pthread_attr_t* attr);

// Bounds of the calling thread's stack (empty if it cannot tell). Not
// signal-safe: take them when the thread registers. Allocates nothing for the
// main thread (from the auxiliary vector and RLIMIT_STACK) nor for a thread
// started with a `hint` (from its thread pointer, which glibc puts at the top
// of the stack it runs on): a thread's first malloc or free makes glibc give
// it a malloc arena, 64 MiB of address space under RLIMIT_AS that the program
// would not have had. Other threads: pthread_getattr_np, which mallocs.
StackBounds CurrentStackBounds(const StackHint* hint = nullptr);
// The same for another live thread of this process (one that cannot exit
// meanwhile). Not signal-safe.
StackBounds StackBoundsOf(pthread_t thread);

class Unwinder {
 public:
  virtual ~Unwinder() = default;
  virtual const char* name() const = 0;

  // Writes up to `max` program counters into `pcs`, innermost first; pcs[0] is
  // the interrupted instruction, the rest are return addresses (not adjusted).
  // Returns how many were written (0 if nothing could be read).
  // This function is safe to call from asynchronous signals (but is not
  // re-entrant on one thread). It does not allocate, lock or fault.
  virtual int Unwind(const ucontext_t* uc, const StackBounds& bounds,
                     uintptr_t* pcs, int max) = 0;

  // Unwind, except that a walk reaching a frame whose unwind rows are not
  // built yet may stop there and leave the rest to the collector
  // (CfiFinishWalk, backends/cfi_unwinder.h): *deferred is then its handle,
  // else -1. Same contract as Unwind; the default never defers.
  virtual int UnwindDeferring(const ucontext_t* uc, const StackBounds& bounds, uintptr_t* pcs,
                              int max, int* deferred) {
    *deferred = -1;
    return Unwind(uc, bounds, pcs, max);
  }

  // Called once per process, on its first thread, outside any signal
  // handler: bind lazily-bound symbols, create process-wide state. Per-thread
  // caches are built by each thread's first Unwind() (the core no longer
  // warms every new thread: it cost ~80 us per pthread_create).
  virtual void PrepareThread() {}

  // True when Unwind() may hold a lock of its own while it runs (libunwind's
  // and gperftools' caches), which a fork() child would inherit held. The
  // core then unwinds by frame pointers while a fork is under way.
  virtual bool HoldsLocks() const { return true; }

  // Called by the collector thread on each of its ticks, off the signal
  // path: work the unwinder keeps out of the handler (the "cfi" unwinder
  // decodes the tables of newly loaded objects here). Only that one thread
  // calls it. Not signal-safe.
  virtual void Maintain() {}

  // True when Maintain() keeps the cfi tables (backends/cfi_tables.h), which
  // the collector's walks of blocked threads use whatever the unwinder; the
  // collector maintains them itself otherwise.
  virtual bool MaintainsCfiTables() const { return false; }

  // One line on the unwinder's state for the profile's process facts (empty:
  // nothing to say). Not signal-safe.
  virtual std::string Describe() const { return {}; }
};

// True when `return_address` lies in libunwind's code, once the libunwind
// unwinder has been made (false before, or without it). libunwind checks
// addresses it is unsure of by writing them into a pipe of its own, opened
// with the lowest free fd numbers and kept for the process's life: among
// the program's fds, where the program may close it, dup2 over it or reuse
// its numbers (then libunwind reads the program's pipe, or closes its fds).
// The pipe2 interposer moves that pipe to high numbers (core/hooks.cc).
// Async-signal-safe.
bool LibunwindCalledFrom(uintptr_t return_address);

struct BackendInfo {
  std::string kind;  // "unwinder" or "timer"
  std::string name;
  bool available = false;
  std::string note;  // why not available, or what it is
};

// Names of compiled-in unwinders, best first: "libunwind", "gperftools", "fp".
std::vector<BackendInfo> ListUnwinders();
// nullptr (and *error set) if the name is unknown or unusable here.
// Not async-signal-safe; call at start-up.
std::unique_ptr<Unwinder> MakeUnwinder(const std::string& name, std::string* error);

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_UNWINDER_H_
