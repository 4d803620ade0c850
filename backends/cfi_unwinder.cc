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
// A frame whose object or part has no rows yet (just loaded, or never
// sampled before) asks for them, and the rest of the walk is left to the
// collector, from a copy of the stack (cfi_unwinder.h); without a free slot
// for it, the frame is walked by frame pointer, as are frames with a rule the
// rows do not keep (a CFA expression: PLT stubs, stack realignment).
#include <ucontext.h>

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <limits>

#include "backends/backend_factories.h"
#include "backends/cfi_region.h"
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

// Where a walk stopped for rows not built yet: the frame's registers (its
// pc is the last one written).
struct WalkStop {
  bool hit = false;
  Regs r{};
  bool fp_known = false;
  bool interrupted = false;
};

// The walk from r (pcs[n - 1] = r.pc already written), shared by the
// signal handler (Reader = StackReader, the live stack) and the collector
// (CopyReader, a copy of a stack). `fp_known`: whether r.fp holds the
// frame's %rbp; `interrupted`: r.pc is an interrupted instruction, not a
// return address. *not_built counts frames whose object or part had no
// rows yet; with `stop`, the walk ends at the first of them, and *stop says
// where. *no_object (if given) counts frames in no object the tables know.
// This function is safe to call from asynchronous signals when Reader's
// reads are; it does not allocate or lock.
template <class Reader>
int Walk(Regs r, bool fp_known, bool interrupted, const Reader& stack,
         const CfiSnapshot* snapshot, uintptr_t* pcs, int n, int max, int* not_built,
         WalkStop* stop, int* no_object = nullptr) {
  while (n < max) {
    CfiRow row{};
    // A return address is the instruction after the call: its row is the
    // call's (the call may be the function's last instruction).
    const CfiFound found = CfiLookup(snapshot, interrupted ? r.pc : r.pc - 1, &row);
    if (found == CfiFound::kNotBuilt) ++*not_built;
    if (found == CfiFound::kNoObject && no_object != nullptr) ++*no_object;
    // No rows yet, or an object the tables do not list yet (loaded since
    // the collector's last scan, or the tables not started): the collector
    // may know more by its next tick.
    if (stop != nullptr && found != CfiFound::kRow) {
      *stop = WalkStop{true, r, fp_known, interrupted};
      return n;
    }
    Regs next = r;
    if (found == CfiFound::kRow && (row.kind == kCfiSp || (row.kind == kCfiFp && fp_known))) {
      if (row.kind == kCfiFp) stack.FpUsed();
      const uintptr_t cfa = (row.kind == kCfiSp ? r.sp : r.fp) + row.cfa_offset;
      if (!stack.Read(cfa - sizeof(uintptr_t), &next.pc)) break;
      if (row.fp_offset == std::numeric_limits<int16_t>::min()) {
        fp_known = false;
      } else if (row.fp_offset != 0) {
        if (!stack.Read(cfa + row.fp_offset, &next.fp)) break;
        stack.FpRead();
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
      if (fp_known) stack.FpUsed();
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
  void FpRead() const {}
  void FpUsed() const {}

 private:
  const CopiedStack& c_;
};

// A CopyReader that writes each read into a trace (CfiWalkTrace): a read
// outside the copy, or past the trace's room, leaves it incomplete.
class TracingReader {
 public:
  TracingReader(const CopiedStack& c, CfiWalkTrace* trace) : copy_(c), trace_(trace) {}
  bool Read(uintptr_t addr, uintptr_t* out) const {
    if (!copy_.Read(addr, out)) {
      trace_->complete = false;
      return false;
    }
    if (trace_->reads == kCfiWalkTraceReads) {
      trace_->complete = false;
    } else {
      trace_->addr[trace_->reads] = addr;
      trace_->value[trace_->reads] = *out;
      trace_->needed[trace_->reads] = true;
      ++trace_->reads;
    }
    return true;
  }
  // A saved %rbp (the last read) decides the walk only if a frame uses it:
  // until then it is not needed, and the %rbp frames hold is that one.
  void FpRead() const {
    fp_source_ = trace_->reads - 1;
    if (fp_source_ >= 0) trace_->needed[fp_source_] = false;
  }
  void FpUsed() const {
    if (fp_source_ >= 0) trace_->needed[fp_source_] = true;
  }

 private:
  CopyReader copy_;
  CfiWalkTrace* trace_;
  mutable int fp_source_ = -1;
};

// The deferred walks' slots (cfi_unwinder.h), mapped when the unwinder is
// made: pages are touched only when a slot is used.
// A slot's states: the handler takes a free one and fills it; the
// collector decodes the rows its walk needs (prepared), then finishes it
// and frees it.
enum : uint32_t { kFree = 0, kFilling, kFilled, kPrepared };
struct DeferredWalk {
  std::atomic<uint32_t> taken;
  Regs r;
  bool fp_known;
  bool interrupted;
  uintptr_t lo;  // the copy holds the stack [lo, lo + size)
  size_t size;
  alignas(8) uint8_t bytes[kCfiDeferredStackBytes];
};
// The slots and their counts, in one block: the library's private memory
// under the collector thread, an arena extent under the collector process
// (CfiUseDeferredPool), which finishes the walks from there.
struct DeferredPool {
  std::atomic<uint64_t> deferred, finished, no_slot;
  DeferredWalk walks[kCfiDeferredWalks];
};
std::atomic<DeferredPool*> g_pool{nullptr};
constexpr int kCfiMaxFinishedFrames = 512;  // core's kMaxFrames

void MapDeferredWalks() {
  if (g_pool.load(std::memory_order_acquire) != nullptr) return;
  // A collector process maintains the tables: its pool is the arena's
  // (CfiUseDeferredPool), or there is none.
  if (CfiActiveRegion() != nullptr) return;
  void* p = mmap(nullptr, sizeof(DeferredPool), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;  // walks are never deferred, then
  DeferredPool* expected = nullptr;
  if (!g_pool.compare_exchange_strong(expected, static_cast<DeferredPool*>(p))) {
    munmap(p, sizeof(DeferredPool));
  }
}

// A free slot holding the rest of the walk from *stop; -1 if none is free or
// the stack there cannot be copied. This function is safe to call from
// asynchronous signals.
int DeferWalk(const WalkStop& stop, const StackReader& stack) {
  DeferredPool* block = g_pool.load(std::memory_order_acquire);
  if (block == nullptr) return -1;
  DeferredWalk* pool = block->walks;
  for (int k = 0; k < kCfiDeferredWalks; ++k) {
    uint32_t expected = kFree;
    if (pool[k].taken.load(std::memory_order_relaxed) != kFree ||
        !pool[k].taken.compare_exchange_strong(expected, kFilling, std::memory_order_acquire)) {
      continue;
    }
    DeferredWalk& d = pool[k];
    uintptr_t from = 0;
    const size_t size = stack.Copy(stop.r.sp, kCfiDeferredStackBytes, d.bytes, &from);
    if (size == 0) {
      d.taken.store(kFree, std::memory_order_release);
      return -1;
    }
    d.r = stop.r;
    d.fp_known = stop.fp_known;
    d.interrupted = stop.interrupted;
    d.lo = from;
    d.size = size;
    d.taken.store(kFilled, std::memory_order_release);
    block->deferred.fetch_add(1, std::memory_order_relaxed);
    return k;
  }
  block->no_slot.fetch_add(1, std::memory_order_relaxed);
  return -1;
}
#endif

class CfiUnwinder : public Unwinder {
 public:
  const char* name() const override { return "cfi"; }
  bool HoldsLocks() const override { return false; }
  void Maintain() override { CfiMaintain(); }
  void PrepareThread() override {
#if defined(__x86_64__)
    MapDeferredWalks();
#endif
  }
  bool MaintainsCfiTables() const override { return true; }
  std::string Describe() const override {
    const CfiDeferredStats d = CfiDeferredWalkStats();
    return DescribeCfiStats(CfiTableStats()) + "; " + std::to_string(d.deferred) +
           " walks left to the collector, " + std::to_string(d.finished) + " finished, " +
           std::to_string(d.no_slot) + " without a free slot";
  }

  // This function is safe to call from asynchronous signals (and re-entrant).
  // It does not allocate, lock or fault.
  int Unwind(const ucontext_t* uc, const StackBounds& bounds, uintptr_t* pcs, int max) override {
    return Sample(uc, bounds, pcs, max, nullptr);
  }

  // This function is safe to call from asynchronous signals. It does not
  // allocate, lock or fault.
  int UnwindDeferring(const ucontext_t* uc, const StackBounds& bounds, uintptr_t* pcs, int max,
                      int* deferred) override {
    return Sample(uc, bounds, pcs, max, deferred);
  }

 private:
  // The walk from a signal's context; with `deferred`, it may be left to
  // the collector at the first frame without rows (*deferred: the slot).
  int Sample(const ucontext_t* uc, const StackBounds& bounds, uintptr_t* pcs, int max,
             int* deferred) {
    if (deferred != nullptr) *deferred = -1;
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
    WalkStop stop;
    n = Walk(r, /*fp_known=*/true, /*interrupted=*/true, stack, section.snapshot(), pcs, n, max,
             &not_built, deferred != nullptr ? &stop : nullptr);
    if (!stop.hit) return n;
    *deferred = DeferWalk(stop, stack);
    if (*deferred >= 0) return n;
    // No slot: on by frame pointer from the frame without rows.
    return Walk(stop.r, stop.fp_known, stop.interrupted, stack, section.snapshot(), pcs, n, max,
                &not_built, nullptr);
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
                       int max, int* not_built, CfiWalkTrace* trace) {
  *not_built = 0;
  if (trace != nullptr) *trace = CfiWalkTrace{};
  if (pcs == nullptr || max <= 0 || !PlausibleUserPc(pc)) return 0;
  pcs[0] = pc;
#if defined(__x86_64__)
  // Only pc and sp are known: %rbp is not, so a frame whose CFA is %rbp
  // based ends the walk unless a callee's saved %rbp was restored first.
  Regs r{pc, sp, 0};
  const CfiReadSection section;
  // No tables yet (no sample walked before): the lookup starts them, and
  // the caller walks again once they are there.
  if (section.snapshot() == nullptr) ++*not_built;
  if (trace == nullptr) {
    return Walk(r, /*fp_known=*/false, /*interrupted=*/true, CopyReader(stack), section.snapshot(),
                pcs, 1, max, not_built, nullptr);
  }
  trace->complete = section.snapshot() != nullptr;
  trace->unloads = section.snapshot() != nullptr ? section.snapshot()->unloads : 0;
  int no_object = 0;
  const int n = Walk(r, /*fp_known=*/false, /*interrupted=*/true, TracingReader(stack, trace),
                     section.snapshot(), pcs, 1, max, not_built, nullptr, &no_object);
  if (*not_built != 0 || no_object != 0) trace->complete = false;
  // Only the words that decided the walk: a saved %rbp no frame used (code
  // built without frame pointers keeps data there, new at each call) would
  // make every later check fail (in a DataLoader worker, 4 of 5).
  int kept = 0;
  for (int i = 0; i < trace->reads; ++i) {
    if (!trace->needed[i]) continue;
    trace->addr[kept] = trace->addr[i];
    trace->value[kept] = trace->value[i];
    trace->needed[kept] = true;
    ++kept;
  }
  trace->reads = kept;
  return n;
#else
  (void)sp;
  (void)stack;
  return 1;
#endif
}

uint32_t CfiUnloadCount() {
  const CfiReadSection section;
  return section.snapshot() != nullptr ? section.snapshot()->unloads : 0;
}

}  // namespace dlprof

namespace dlprof {

void CfiPrepareDeferredWalks() {
#if defined(__x86_64__)
  DeferredPool* block = g_pool.load(std::memory_order_acquire);
  if (block == nullptr) return;
  DeferredWalk* pool = block->walks;
  for (int k = 0; k < kCfiDeferredWalks; ++k) {
    DeferredWalk& d = pool[k];
    if (d.taken.load(std::memory_order_acquire) != kFilled) continue;
    const CopiedStack copy{d.lo, d.bytes, d.size};
    const CopyReader reader(copy);
    uintptr_t frames[kCfiMaxFinishedFrames + 1];
    frames[0] = d.r.pc;
    int n = 1;
    WalkStop at{true, d.r, d.fp_known, d.interrupted};
    // Each round decodes the rows the walk stopped for and goes on, until
    // it ends or stops where no rows are to be had.
    for (int round = 0; round < 64 && n <= kCfiMaxFinishedFrames; ++round) {
      CfiDecodeNow(at.interrupted ? at.r.pc : at.r.pc - 1);
      const CfiReadSection section;
      int not_built = 0;
      WalkStop next;
      const int before = n;
      n = Walk(at.r, at.fp_known, at.interrupted, reader, section.snapshot(), frames, n,
               kCfiMaxFinishedFrames + 1, &not_built, &next);
      if (!next.hit || n == before) break;
      at = next;
    }
    uint32_t filled = kFilled;
    d.taken.compare_exchange_strong(filled, kPrepared, std::memory_order_release);
  }
#endif
}

int CfiFinishWalk(int deferred, uintptr_t* pcs, int max, bool now) {
#if defined(__x86_64__)
  DeferredPool* block = g_pool.load(std::memory_order_acquire);
  if (block == nullptr || deferred < 0 || deferred >= kCfiDeferredWalks) return 0;
  DeferredWalk& d = block->walks[deferred];
  const uint32_t state = d.taken.load(std::memory_order_acquire);
  if (state == kFree) return 0;
  if (state != kPrepared && !now) return -1;
  int appended = 0;
  if (pcs != nullptr && max > 0) {
    const CopiedStack copy{d.lo, d.bytes, d.size};
    const CopyReader reader(copy);
    // frames[0] is the frame the handler stopped at (already recorded).
    uintptr_t frames[kCfiMaxFinishedFrames + 1];
    const int limit = 1 + (max < kCfiMaxFinishedFrames ? max : kCfiMaxFinishedFrames);
    frames[0] = d.r.pc;
    const CfiReadSection section;
    int not_built = 0;
    // With the rows there are; a frame still without them is walked by
    // frame pointer, as the handler would have.
    const int n = Walk(d.r, d.fp_known, d.interrupted, reader, section.snapshot(), frames, 1,
                       limit, &not_built, nullptr);
    appended = n - 1;
    for (int i = 0; i < appended; ++i) pcs[i] = frames[i + 1];
  }
  block->finished.fetch_add(1, std::memory_order_relaxed);
  d.taken.store(kFree, std::memory_order_release);
  return appended;
#else
  (void)deferred;
  (void)pcs;
  (void)max;
  (void)now;
  return 0;
#endif
}

void CfiDropDeferredWalk(int deferred) {
#if defined(__x86_64__)
  DeferredPool* block = g_pool.load(std::memory_order_acquire);
  if (block == nullptr || deferred < 0 || deferred >= kCfiDeferredWalks) return;
  block->walks[deferred].taken.store(kFree, std::memory_order_release);
#else
  (void)deferred;
#endif
}

void CfiForgetDeferredWalks() {
#if defined(__x86_64__)
  DeferredPool* block = g_pool.load(std::memory_order_acquire);
  if (block == nullptr) return;
  // Read first: each slot has pages of its own, and a store to a page the
  // parent never wrote would copy it for nothing (16 faults a fork).
  for (int k = 0; k < kCfiDeferredWalks; ++k) {
    if (block->walks[k].taken.load(std::memory_order_relaxed) != kFree) {
      block->walks[k].taken.store(kFree, std::memory_order_relaxed);
    }
  }
  // (A store to the counts' page only where they are not 0 already: an
  // arena pool is fresh zero pages in a fork child.)
  for (auto* count : {&block->deferred, &block->finished, &block->no_slot}) {
    if (count->load(std::memory_order_relaxed) != 0) count->store(0, std::memory_order_relaxed);
  }
#endif
}

size_t CfiDeferredPoolBytes() {
#if defined(__x86_64__)
  return sizeof(DeferredPool);
#else
  return 0;
#endif
}

bool CfiUseDeferredPool(void* pool) {
#if defined(__x86_64__)
  if (pool == nullptr) return false;
  g_pool.store(static_cast<DeferredPool*>(pool), std::memory_order_release);
  return true;
#else
  (void)pool;
  return false;
#endif
}

CfiDeferredStats CfiDeferredWalkStats() {
  CfiDeferredStats s;
#if defined(__x86_64__)
  if (const DeferredPool* block = g_pool.load(std::memory_order_acquire)) {
    s.deferred = block->deferred.load(std::memory_order_relaxed);
    s.finished = block->finished.load(std::memory_order_relaxed);
    s.no_slot = block->no_slot.load(std::memory_order_relaxed);
  }
#endif
  return s;
}

}  // namespace dlprof
