// "libunwind": the nongnu libunwind (libunwind.so.8), local unwinding with
// DWARF call-frame information, so it walks through code built without frame
// pointers. (/usr/lib/.../libunwind.so.1 is LLVM's unrelated unwinder;
// pkg-config's libunwind is the one we want.)
//
// Two paths, because a plain unw_step() loop is far too slow on Debian 12:
// its libunwind 1.6 is built without --enable-per-thread-cache, so
// UNW_CACHE_PER_THREAD silently becomes the global cache, and every step takes
// a mutex with all signals blocked: two sigprocmask() syscalls per frame,
// 2-4 us per frame here (bench/unwinder_bench.cc).
//
//  * Fast path (x86_64, live signal frame): unw_backtrace() from inside the
//    handler. It runs libunwind's tdep_trace(), which keeps a per-thread cache
//    of each pc's frame layout and, once warm, reads a couple of stack words
//    per frame with no lock and no syscall (~15 ns per frame). It starts at
//    our own frame, on the slot's unwind stack (core/signal_handler.cc),
//    crosses the stack switch (core/stack_switch.cc: a standard
//    frame-pointer frame to tdep_trace, cached like any other) and the
//    kernel's signal frame, and continues into the interrupted code; we keep
//    what follows the interrupted pc. It does not take StackBounds: frames are
//    found through the CFI.
//  * Slow path (a context that is not the live signal frame, e.g. from
//    getcontext(); other architectures; or a trace we cannot line up):
//    unw_init_local2(UNW_INIT_SIGNAL_FRAME) + unw_step(). When the bounds hold
//    the interrupted stack pointer it stops as soon as a caller's stack
//    pointer leaves them.
//
// Signal safety, as far as libunwind gives it: once a thread's caches are warm
// neither path allocates. A pc seen for the first time costs a DWARF lookup
// under libunwind's global lock (taken with all signals blocked, so never
// held by an interrupted thread) and a dl_iterate_phdr() under glibc's
// recursive loader lock: a sample that interrupts dlopen() on another thread
// waits for it, one that interrupts dlopen() on the same thread may read a
// half-updated module list. PrepareThread() builds the thread's trace cache
// (256 KiB of mmap per thread, grown with mmap when more than 8192 distinct
// pcs are seen) and touches libunwind's thread-locals outside any handler.
// Not re-entrant with the program's own unw_backtrace()/backtrace() on the
// same thread (Debian's libunwind exports a weak backtrace()).
//
// libunwind is loaded only when this unwinder is asked for: dlopen'ed, local
// (RTLD_LOCAL: its weak backtrace() never joins the program's symbols), its
// entry points kept in `g_api`. Linked as a dependency, every process
// started under DLPROF_SAMPLE=1 loaded libunwind and liblzma for a backend
// that is not the default (~0.15 ms of each start here, measured with
// LD_PRELOAD=libunwind.so.8 on an unprofiled program).
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "backends/backend_factories.h"
#include "backends/code_range.h"

namespace dlprof {
namespace {

// The libunwind entry points this file uses, by their exported names (the
// header's unw_* are macros for _ULx86_64_* and the like).
struct LibunwindApi {
  int (*backtrace)(void**, int);
  int (*init_local2)(unw_cursor_t*, unw_context_t*, int);
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*);
  int (*step)(unw_cursor_t*);
  int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
  unw_addr_space_t* local_addr_space;
};
// Set once by LoadLibunwind() before any unwinder of this kind exists; read
// (plain loads) in the handler.
const LibunwindApi* g_api = nullptr;

#define DLPROF_UNW_NAME2(x) #x
#define DLPROF_UNW_NAME(x) DLPROF_UNW_NAME2(x)

// dlopen()s libunwind once; nullptr with *error set if it is not there.
// Not signal-safe (the loader).
const LibunwindApi* LoadLibunwind(std::string* error) {
  static std::once_flag once;
  static LibunwindApi api;
  static std::string failure;
  std::call_once(once, [] {
    void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      failure = std::string("libunwind.so.8 cannot be loaded: ") + (why ? why : "unknown error");
      return;
    }
    bool all = true;
    auto find = [&](const char* name) {
      void* sym = dlsym(lib, name);
      if (sym == nullptr) {
        all = false;
        if (failure.empty()) failure = std::string("libunwind.so.8 has no ") + name;
      }
      return sym;
    };
    api.backtrace = reinterpret_cast<int (*)(void**, int)>(find("unw_backtrace"));
    api.init_local2 = reinterpret_cast<int (*)(unw_cursor_t*, unw_context_t*, int)>(
        find(DLPROF_UNW_NAME(unw_init_local2)));
    api.get_reg = reinterpret_cast<int (*)(unw_cursor_t*, unw_regnum_t, unw_word_t*)>(
        find(DLPROF_UNW_NAME(unw_get_reg)));
    api.step = reinterpret_cast<int (*)(unw_cursor_t*)>(find(DLPROF_UNW_NAME(unw_step)));
    api.set_caching_policy = reinterpret_cast<int (*)(unw_addr_space_t, unw_caching_policy_t)>(
        find(DLPROF_UNW_NAME(unw_set_caching_policy)));
    api.local_addr_space =
        static_cast<unw_addr_space_t*>(find(DLPROF_UNW_NAME(unw_local_addr_space)));
    if (all) g_api = &api;  // (kept loaded for the life of the process)
  });
  if (g_api == nullptr && error != nullptr) *error = failure;
  return g_api;
}

// Frames between unw_backtrace() and the interrupted code: our Unwind, the
// caller's sample function, the stack switch, the signal handler, the kernel's
// trampoline, with room to spare.
constexpr int kHandlerFrames = 32;
// Largest trace we ask for, kept on the stack the handler unwinds on: 2.5 KiB.
constexpr int kBufferFrames = 320;

class LibunwindUnwinder : public Unwinder {
 public:
  const char* name() const override { return "libunwind"; }

  // This function is safe to call from asynchronous signals (but is not
  // re-entrant on one thread); see the file comment for libunwind's limits.
  int Unwind(const ucontext_t* uc, const StackBounds& bounds, uintptr_t* pcs, int max) override {
    if (uc == nullptr || pcs == nullptr || max <= 0) return 0;
    const int n = FromLiveSignalFrame(uc, pcs, max);
    if (n > 0) return n;
    return Step(uc, bounds, pcs, max);
  }

  void PrepareThread() override {
    void* frames[8];
    g_api->backtrace(frames, 8);
    ucontext_t uc;
    if (getcontext(&uc) != 0) return;
    uintptr_t pcs[8];
    Step(&uc, StackBounds{}, pcs, 8);
  }

 private:
  // The fast path; 0 if it does not apply.
  // This function is safe to call from asynchronous signals.
  static int FromLiveSignalFrame(const ucontext_t* uc, uintptr_t* pcs, int max) {
#if defined(__x86_64__)
    const uintptr_t pc = ContextPc(uc);
    void* frames[kBufferFrames];
    const int got = g_api->backtrace(frames, std::min(max + kHandlerFrames, kBufferFrames));
    int at = -1;
    for (int i = 1; i < got; ++i) {
      if (reinterpret_cast<uintptr_t>(frames[i]) == pc) {
        at = i;
        break;
      }
    }
    // The pc is on our own call chain only if `uc` is the signal frame we are
    // running on, and then the kernel's rt_sigframe puts the handler's return
    // address (sa_restorer, the trampoline) right below the ucontext. The
    // entry before the pc is that trampoline, raw (libunwind 1.6, and its
    // unw_step fallback) or minus one (newer tdep_trace reports every return
    // address minus one, except right after a signal frame); which one tells
    // us how to undo it for the frames above.
    if (at < 0) return 0;
    const uintptr_t trampoline = reinterpret_cast<const uintptr_t*>(uc)[-1];
    const uintptr_t before = reinterpret_cast<uintptr_t>(frames[at - 1]);
    uintptr_t adjust;
    if (before == trampoline) {
      adjust = 0;
    } else if (before + 1 == trampoline) {
      adjust = 1;
    } else {
      return 0;
    }
    int n = 0;
    pcs[n++] = pc;
    for (int i = at + 1; i < got && n < max; ++i) {
      pcs[n++] = reinterpret_cast<uintptr_t>(frames[i]) + adjust;
    }
    return n;
#else
    (void)uc;
    (void)pcs;
    (void)max;
    return 0;
#endif
  }

  // The slow path.
  // This function is safe to call from asynchronous signals.
  static int Step(const ucontext_t* uc, const StackBounds& bounds, uintptr_t* pcs, int max) {
    const uintptr_t pc = ContextPc(uc);
    unw_cursor_t cursor;
    // On x86_64 and aarch64 unw_context_t is ucontext_t. libunwind only reads
    // it here (we never unw_set_reg), so dropping the const is harmless.
    // UNW_INIT_SIGNAL_FRAME: the pc is the interrupted instruction itself, not
    // a return address, so its unwind row is looked up at pc, not pc - 1.
    auto* ctx = const_cast<unw_context_t*>(reinterpret_cast<const unw_context_t*>(uc));
    if (g_api->init_local2(&cursor, ctx, UNW_INIT_SIGNAL_FRAME) < 0) {
      if (pc == 0) return 0;
      pcs[0] = pc;
      return 1;
    }
    // Bounds that do not hold the interrupted stack pointer describe some
    // other stack (a fiber, a corrupt slot): then libunwind goes by CFI alone.
    const uintptr_t sp = ContextSp(uc);
    const bool bounded = bounds.hi > bounds.lo && sp >= bounds.lo && sp < bounds.hi;
    int n = 0;
    while (n < max) {
      unw_word_t ip = 0;
      if (g_api->get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      if (n > 0 && bounded) {
        unw_word_t caller_sp = 0;
        if (g_api->get_reg(&cursor, UNW_REG_SP, &caller_sp) < 0 || caller_sp < bounds.lo ||
            caller_sp >= bounds.hi) {
          break;
        }
      }
      pcs[n++] = static_cast<uintptr_t>(ip);
      if (g_api->step(&cursor) <= 0) break;
    }
    if (n == 0 && pc != 0) pcs[n++] = pc;
    return n;
  }
};

// libunwind's code: see LibunwindCalledFrom().
CodeRange g_libunwind_text;

void FindTextOnce() {
  static std::once_flag once;
  std::call_once(once,
                 [] { g_libunwind_text.FindObjectOf(reinterpret_cast<void*>(g_api->backtrace)); });
}

void SetCachingPolicyOnce() {
  static std::once_flag once;
  // Per-thread caches where libunwind was built with them (the global cache
  // takes a lock with signals blocked on every step); a no-op request on
  // Debian's build.
  std::call_once(
      once, [] { g_api->set_caching_policy(*g_api->local_addr_space, UNW_CACHE_PER_THREAD); });
}

}  // namespace

bool ProbeLibunwindUnwinder(std::string* note) {
  if (LoadLibunwind(note) == nullptr) return false;
  *note = "DWARF CFI via libunwind " + std::to_string(UNW_VERSION_MAJOR) + "." +
          std::to_string(UNW_VERSION_MINOR) +
          " (cached fast trace from the live signal frame): walks code without frame pointers";
  return true;
}

bool LibunwindCalledFrom(uintptr_t return_address) {
  return g_libunwind_text.Contains(return_address);
}

std::unique_ptr<Unwinder> NewLibunwindUnwinder(std::string* error) {
  if (LoadLibunwind(error) == nullptr) return nullptr;
  FindTextOnce();  // first: libunwind's first call sets up (and opens) its pipe
  SetCachingPolicyOnce();
  return std::make_unique<LibunwindUnwinder>();
}

}  // namespace dlprof
