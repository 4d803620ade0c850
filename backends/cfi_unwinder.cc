// "cfi": walks the stack with unwind rows decoded from each object's
// .eh_frame off the signal path (backends/cfi_tables.h), as async-profiler
// does. The handler does only bounded work: per frame, one word of the row
// cache (or, on a miss, two binary searches in read-only tables) and at most
// two stack reads, all checked against the
// thread's StackBounds. No lock, no allocation, no system call, no loader
// call (so nothing to fear from a fork child, a dlopen on another thread or
// glibc internals), and the same answers as libunwind on code without frame
// pointers: Debian's libc, libstdc++, zlib, and CPython's eval loop.
//
// A frame whose object has no rows yet (just loaded, or big and never
// sampled before) is walked by frame pointer, and its object's rows are
// asked for; so are frames with a rule the rows do not keep (a CFA
// expression: PLT stubs, stack realignment).
#include <ucontext.h>

#include <cstddef>
#include <cstring>
#include <limits>

#include "backends/backend_factories.h"
#include "backends/cfi_unwinder.h"
#include "backends/cfi_tables.h"
#include "backends/stack_reader.h"

namespace dlprof {
namespace {

#if defined(__x86_64__)
struct Regs {
  uintptr_t pc, sp, fp;
};

// The registers of a ucontext that lies on the stack (a signal frame the
// walk passes through); false if it is not all inside the bounds.
// This function is safe to call from asynchronous signals.
template <class Reader>
bool ReadSignalFrame(const Reader& stack, uintptr_t uc, Regs* r) {
  const uintptr_t gregs = uc + offsetof(ucontext_t, uc_mcontext.gregs);
  return stack.Read(gregs + REG_RIP * sizeof(greg_t), &r->pc) &&
         stack.Read(gregs + REG_RSP * sizeof(greg_t), &r->sp) &&
         stack.Read(gregs + REG_RBP * sizeof(greg_t), &r->fp);
}

// The walk from r (pcs[0] = r.pc already written, n = 1), shared by the
// signal handler (Reader = StackReader, the live stack) and the collector
// (CopyReader, a copy of a blocked thread's stack). `fp_known`: whether
// r.fp holds the frame's %rbp. *not_built counts frames whose object had
// no rows yet. This function is safe to call from asynchronous signals
// when Reader's reads are; it does not allocate or lock.
template <class Reader>
int Walk(Regs r, bool fp_known, const Reader& stack, const CfiSnapshot* snapshot,
         uintptr_t* pcs, int n, int max, int* not_built) {
  bool interrupted = true;  // r.pc is an interrupted instruction, not a return address
  while (n < max) {
    CfiRow row{};
    // A return address is the instruction after the call: its row is the
    // call's (the call may be the function's last instruction).
    const CfiFound found = CfiLookup(snapshot, interrupted ? r.pc : r.pc - 1, &row);
    if (found == CfiFound::kNotBuilt) ++*not_built;
    Regs next = r;
    if (found == CfiFound::kRow && (row.kind == kCfiSp || (row.kind == kCfiFp && fp_known))) {
      const uintptr_t cfa = (row.kind == kCfiSp ? r.sp : r.fp) + row.cfa_offset;
      if (!stack.Read(cfa - sizeof(uintptr_t), &next.pc)) break;
      if (row.fp_offset == std::numeric_limits<int16_t>::min()) {
        fp_known = false;
      } else if (row.fp_offset != 0) {
        if (!stack.Read(cfa + row.fp_offset, &next.fp)) break;
        fp_known = true;
      }
      next.sp = cfa;
    } else if (found == CfiFound::kRow && row.kind == kCfiOutermost) {
      break;
    } else if (found == CfiFound::kRow && row.kind == kCfiSignal) {
      // A signal trampoline: the frame below is the interrupted context,
      // whose ucontext the kernel left at the stack pointer.
      if (!ReadSignalFrame(stack, r.sp, &next) || !PlausibleUserPc(next.pc)) break;
      pcs[n++] = next.pc;
      r = next;
      fp_known = true;
      interrupted = true;
      continue;
    } else {
      // No rows here: the frame-pointer record, if %rbp still holds one.
      if (!fp_known || r.fp < r.sp || !stack.Read(r.fp, &next.fp) ||
          !stack.Read(r.fp + sizeof(uintptr_t), &next.pc)) {
        break;
      }
      next.sp = r.fp + 2 * sizeof(uintptr_t);
      fp_known = true;
    }
    // Stacks grow down: each caller's frame lies above its callee's.
    if (!PlausibleUserPc(next.pc) || next.sp <= r.sp) break;
    pcs[n++] = next.pc;
    r = next;
    interrupted = false;
  }
  return n;
}

// Reads of a copy of another thread's stack, [lo, lo + size) of its
// addresses: what lies outside ends the walk, as the bounds do for a live
// stack.
class CopyReader {
 public:
  explicit CopyReader(const CopiedStack& c) : c_(c) {}
  bool Read(uintptr_t addr, uintptr_t* out) const {
    if ((addr & 7) != 0 || addr < c_.lo || c_.size < sizeof(uintptr_t) ||
        addr - c_.lo > c_.size - sizeof(uintptr_t)) {
      return false;
    }
    std::memcpy(out, c_.bytes + (addr - c_.lo), sizeof(uintptr_t));
    return true;
  }

 private:
  const CopiedStack& c_;
};
#endif

class CfiUnwinder : public Unwinder {
 public:
  const char* name() const override { return "cfi"; }
  bool HoldsLocks() const override { return false; }
  void Maintain() override { CfiMaintain(); }
  bool MaintainsCfiTables() const override { return true; }
  std::string Describe() const override { return DescribeCfiStats(CfiTableStats()); }

  // This function is safe to call from asynchronous signals (and re-entrant).
  // It does not allocate, lock or fault.
  int Unwind(const ucontext_t* uc, const StackBounds& bounds, uintptr_t* pcs, int max) override {
    if (uc == nullptr || pcs == nullptr || max <= 0) return 0;
#if defined(__x86_64__)
    Regs r{static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]),
           static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]),
           static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RBP])};
    if (r.pc == 0) return 0;
    int n = 0;
    pcs[n++] = r.pc;
    const StackReader stack(bounds);
    if (!stack.usable()) return n;
    const CfiReadSection section;
    int not_built = 0;
    return Walk(r, /*fp_known=*/true, stack, section.snapshot(), pcs, n, max, &not_built);
#else
    (void)bounds;
    pcs[0] = ContextPc(uc);
    return pcs[0] == 0 ? 0 : 1;
#endif
  }
};

}  // namespace

bool ProbeCfiUnwinder(std::string* note) {
#if defined(__x86_64__)
  *note =
      "DWARF CFI from each object's .eh_frame, decoded off the signal path into compact "
      "tables: walks code without frame pointers, with no lock or loader call in the handler";
  return true;
#else
  *note = "the CFI tables are x86_64-only";
  return false;
#endif
}

std::unique_ptr<Unwinder> NewCfiUnwinder(std::string* error) {
#if defined(__x86_64__)
  (void)error;
  return std::make_unique<CfiUnwinder>();
#else
  *error = "the CFI tables are x86_64-only";
  return nullptr;
#endif
}

int CfiWalkCopiedStack(uintptr_t pc, uintptr_t sp, const CopiedStack& stack, uintptr_t* pcs,
                       int max, int* not_built) {
  *not_built = 0;
  if (pcs == nullptr || max <= 0 || !PlausibleUserPc(pc)) return 0;
  pcs[0] = pc;
#if defined(__x86_64__)
  // Only pc and sp are known: %rbp is not, so a frame whose CFA is %rbp
  // based ends the walk unless a callee's saved %rbp was restored first.
  Regs r{pc, sp, 0};
  const CopyReader reader(stack);
  const CfiReadSection section;
  // No tables yet (no sample walked before): the lookup starts them, and
  // the caller walks again once they are there.
  if (section.snapshot() == nullptr) ++*not_built;
  return Walk(r, /*fp_known=*/false, reader, section.snapshot(), pcs, 1, max, not_built);
#else
  (void)sp;
  (void)stack;
  return 1;
#endif
}

}  // namespace dlprof
