// The "cfi" unwinder's walk for the collector: a blocked thread's native
// stack, from the pc and stack pointer the kernel reports for it
// (/proc/<tid>/syscall), over a copy of its stack. The thread is never
// signalled; it is the same walk as the signal handler's
// (backends/cfi_unwinder.cc), without %rbp.
#ifndef DLPROF_BACKENDS_CFI_UNWINDER_H_
#define DLPROF_BACKENDS_CFI_UNWINDER_H_

#include <cstddef>
#include <cstdint>

namespace dlprof {

// A copy of the stack addresses [lo, lo + size) of another thread.
struct CopiedStack {
  uintptr_t lo = 0;
  const uint8_t* bytes = nullptr;
  size_t size = 0;
};

// What a walk of a copied stack read (CfiWalkCopiedStack), in order: the
// walk is a function of its pc and sp, these words and the rows of the pcs
// it met. So a later walk from the same pc and sp, while every word still
// holds its value and no object was unloaded (`unloads`, the tables'
// count), gives the same frames: the collector then walks a thread blocked
// again where it was before without copying its stack. Only the words that
// decide the walk are kept: return addresses, and a saved %rbp only where a
// later frame uses it (whether one does follows from the rows alone).
// `complete` is false when that does not hold: a frame without rows, a read
// outside the copy, or more than kCfiWalkTraceReads reads.
constexpr int kCfiWalkTraceReads = 256;
struct CfiWalkTrace {
  uint32_t unloads = 0;
  bool complete = false;
  int reads = 0;
  uintptr_t addr[kCfiWalkTraceReads];
  uintptr_t value[kCfiWalkTraceReads];
  bool needed[kCfiWalkTraceReads];  // while walking: a saved %rbp not used yet is not
};
// The count of unloaded objects in the tables' current snapshot. Not for the
// signal path (collector only), though it neither allocates nor locks.
uint32_t CfiUnloadCount();

// Writes up to `max` pcs (pcs[0] = pc, the rest return addresses, not
// adjusted) and returns how many. Reads only the copy; frames whose CFA rule
// needs a register other than the stack pointer end the walk while %rbp is
// unknown (it becomes known where a frame restores it from the stack).
// *not_built: frames that met an object without decoded rows yet (they are
// asked for, as by the handler: a walk at a later tick can go further).
// x86_64 only; elsewhere, pc alone. Not signal-safe in spirit (collector
// only), though it neither allocates nor locks.
// *trace (if given): what the walk read.
int CfiWalkCopiedStack(uintptr_t pc, uintptr_t sp, const CopiedStack& stack, uintptr_t* pcs,
                       int max, int* not_built, CfiWalkTrace* trace = nullptr);

// Walks the signal handler left to the collector. When a sampled walk
// reaches a frame whose object or part has no rows yet, the handler keeps
// the registers at that frame and a copy of the stack above it (up to
// kCfiDeferredStackBytes) in one of kCfiDeferredWalks preallocated slots,
// and records the frames so far with the slot's handle
// (Unwinder::UnwindDeferring). The collector decodes the rows and finishes
// the walk from the copy. Without a free slot, or when the copy cannot be
// made, the handler walks on by frame pointer, as before.
constexpr int kCfiDeferredWalks = 16;
constexpr size_t kCfiDeferredStackBytes = size_t{32} << 10;

// Decodes the rows the kept walks need (CfiDecodeNow, round after round
// as each walk goes further). Collector only, outside any lock fork()
// takes (the tables' commit lock is taken by fork's atfork handler first).
// Not signal-safe.
void CfiPrepareDeferredWalks();
// Appends to pcs (up to `max`) the frames after the one the handler stopped
// at, walked with the rows there are, and frees the slot. Returns how many
// were appended; -1 (the slot kept) when CfiPrepareDeferredWalks has not
// seen the walk yet, unless `now`. Not signal-safe.
int CfiFinishWalk(int deferred, uintptr_t* pcs, int max, bool now);
// Frees a slot whose walk will never be finished (its record was dropped).
// Async-signal-safe.
void CfiDropDeferredWalk(int deferred);
// In a fork child: the parent's slots belong to records the child never
// reads. Async-signal-safe (stores only).
void CfiForgetDeferredWalks();

// Under the collector process the slots live in the shared arena, where
// the helper finishes the walks: the program maps CfiDeferredPoolBytes() of
// zeroed memory (fresh zero pages in a fork child: the parent's walks are
// not the child's) and both processes use it. Before any walk. Not
// signal-safe. False (no pool) off x86_64.
size_t CfiDeferredPoolBytes();
bool CfiUseDeferredPool(void* pool);

struct CfiDeferredStats {
  uint64_t deferred = 0;  // walks left to the collector
  uint64_t finished = 0;  // of those, finished (the rest: dropped or pending)
  uint64_t no_slot = 0;   // walks that would have been, but found no free slot
};
CfiDeferredStats CfiDeferredWalkStats();

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_CFI_UNWINDER_H_
