// "fp": walks the frame-pointer chain from the interrupted registers.
//
// Fast (a few loads per frame, no tables), but it only sees frames that keep a
// frame pointer: a function built with -fomit-frame-pointer (most of Debian's
// libc, libstdc++, libz...) hides its caller, and one that uses the frame
// register for data ends the walk. Every stack read is checked against the
// thread's StackBounds first, and frame pointers must strictly increase, so a
// corrupt chain ends the walk instead of faulting or looping.
#include <unistd.h>

#include <cstring>

#include "backends/backend_factories.h"
#include "backends/stack_reader.h"

namespace dlprof {
namespace {

struct Regs {
  uintptr_t pc = 0;
  uintptr_t sp = 0;
  uintptr_t fp = 0;
};

// This function is safe to call from asynchronous signals.
Regs ReadRegs(const ucontext_t* uc) {
  Regs r;
#if defined(__x86_64__)
  r.pc = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  r.sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  r.fp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RBP]);
#elif defined(__aarch64__)
  r.pc = static_cast<uintptr_t>(uc->uc_mcontext.pc);
  r.sp = static_cast<uintptr_t>(uc->uc_mcontext.sp);
  r.fp = static_cast<uintptr_t>(uc->uc_mcontext.regs[29]);
#else
  (void)uc;  // Unknown architecture: no walk, ContextPc() gives 0 as well.
#endif
  return r;
}

#if defined(__x86_64__) && !defined(DLPROF_UNDER_TSAN)  // see Unwind
// Where the return address sits when the interrupted instruction is one at
// which the frame pointer does not yet (or no longer) describe this function:
// its entry (endbr64 / push %rbp), just after the push (mov %rsp,%rbp), or a
// ret. Returns the offset from %rsp, or -1 if the frame chain is right as is.
// Reads at most 4 code bytes at the pc, never past the pc's page: the page
// holds the instruction being executed, so it is mapped (we assume readable,
// which holds unless the code was mapped execute-only with protection keys).
// This function is safe to call from asynchronous signals.
int LeafReturnSlot(uintptr_t pc) {
  const auto* code = reinterpret_cast<const unsigned char*>(pc);
  const uintptr_t left_in_page = 4096 - (pc & 4095);
  if (code[0] == 0x55 || code[0] == 0xc3) return 0;  // push %rbp / ret
  if (left_in_page >= 3 && code[0] == 0x48 && code[1] == 0x89 && code[2] == 0xe5) {
    return 8;  // mov %rsp,%rbp: the saved %rbp is on top, the return address above.
  }
  if (left_in_page >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e &&
      code[3] == 0xfa) {
    return 0;  // endbr64 at a CET-enabled entry
  }
  return -1;
}
#endif

class FpUnwinder : public Unwinder {
 public:
  const char* name() const override { return "fp"; }
  bool HoldsLocks() const override { return false; }

  // This function is safe to call from asynchronous signals (but is not
  // re-entrant on one thread). It does not allocate, lock or fault.
  int Unwind(const ucontext_t* uc, const StackBounds& bounds, uintptr_t* pcs, int max) override {
    if (uc == nullptr || pcs == nullptr || max <= 0) return 0;
    const Regs regs = ReadRegs(uc);
    if (regs.pc == 0) return 0;
    int n = 0;
    pcs[n++] = regs.pc;
    const StackReader stack(bounds);
    if (!stack.usable()) return n;

    // Not under TSan: it delivers a signal at its next safe point with a copy
    // of the context taken when the signal came, so the pc may be code that
    // is gone by then (dlclose: the program died of SIGSEGV reading it), and
    // the leaf's frame long left anyway. (Reading code there also died of
    // SIGBUS under ulimit -f: TSan maps the shadow of read-only memory from a
    // file it writes in /tmp, which the limit cuts short.)
#if defined(__x86_64__) && !defined(DLPROF_UNDER_TSAN)
    const int slot = LeafReturnSlot(regs.pc);
    if (slot >= 0 && n < max) {
      uintptr_t ret = 0;
      if (stack.Read(regs.sp + slot, &ret) && PlausibleUserPc(ret)) pcs[n++] = ret;
    }
#endif

    // A frame record is {saved frame pointer, return address}; records lie
    // above the interrupted stack pointer and each caller's above its callee's.
    uintptr_t fp = regs.fp;
    uintptr_t floor = regs.sp;
    while (n < max) {
      if (fp < floor) break;
      uintptr_t next = 0;
      uintptr_t ret = 0;
      if (!stack.Read(fp, &next) || !stack.Read(fp + sizeof(uintptr_t), &ret)) break;
      // The outermost frame (_start, clone) zeroes it; misread data can be
      // anything.
      if (!PlausibleUserPc(ret)) break;
      pcs[n++] = ret;
      if (next <= fp) break;
      floor = fp + 2 * sizeof(uintptr_t);
      fp = next;
    }
    return n;
  }
};

}  // namespace

uintptr_t ContextPc(const ucontext_t* uc) { return uc == nullptr ? 0 : ReadRegs(uc).pc; }

uintptr_t ContextSp(const ucontext_t* uc) { return uc == nullptr ? 0 : ReadRegs(uc).sp; }

pid_t CurrentTid() { return gettid(); }

bool ProbeFpUnwinder(std::string* note) {
#if defined(__x86_64__) || defined(__aarch64__)
  *note =
      "frame-pointer walk: fastest, but skips callers of code built without frame "
      "pointers (e.g. most system libraries)";
  return true;
#else
  *note = "no frame-pointer walk for this architecture (returns only the pc)";
  return true;
#endif
}

std::unique_ptr<Unwinder> NewFpUnwinder(std::string* error) {
  (void)error;
  return std::make_unique<FpUnwinder>();
}

}  // namespace dlprof
