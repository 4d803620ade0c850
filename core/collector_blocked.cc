// The collector's walks of blocked threads (Collector::WalkBlocked and its
// parts): the stack of a thread that sleeps in a system call, read without
// signalling it, in this process or from the collector process, and the
// walks taken again while what they read is unchanged (NativeWalk,
// PythonWalk). Split from core/collector.cc, which keeps the ticks, the
// drains and the file.
#include <errno.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <algorithm>
#include <memory>

#include "backends/cfi_tables.h"
#include "backends/cfi_unwinder.h"
#include "backends/own_memory.h"
#include "core/collector.h"
#include "core/fault_handler.h"
#include "core/memory_view.h"
#include "core/python_frames.h"
#include "core/safe_load.h"

namespace dlprof {
namespace {

// The words at `addresses` of process `pid`, in one system call (one remote
// piece each); false unless every one was read.
bool CopyWordsOutside(pid_t pid, const uintptr_t* addresses, int count, uintptr_t* out) {
  if (count <= 0) return true;
  iovec remote[kCfiWalkTraceReads];
  if (count > kCfiWalkTraceReads) return false;
  for (int i = 0; i < count; ++i) remote[i] = iovec{reinterpret_cast<void*>(addresses[i]), 8};
  iovec local{out, static_cast<size_t>(count) * 8};
  ssize_t got;
  do {
    got = process_vm_readv(pid, &local, 1, remote, static_cast<unsigned long>(count), 0);
  } while (got < 0 && errno == EINTR);
  return got == static_cast<ssize_t>(count) * 8;
}

// The most of a blocked thread's stack copied for its walk, from its stack
// pointer up: deeper frames are not walked.
constexpr size_t kBlockedStackCopyBytes = 256 << 10;

}  // namespace

// The Python frames of blocked thread `s` (into py, kPyFrameWords each):
// read in place, or through the program's memory from outside, where the
// last walk is taken again while everything it read is unchanged
// (PythonWalk).
int Collector::BlockedPythonFrames(ThreadSlot* s, pid_t tid, uint64_t* py, bool* differs) {
  *differs = false;
  if (outside_pid_ == 0) {
    return Python() != nullptr ? WalkBlockedPythonFrames(s, tid, py, kMaxPythonFrames) : 0;
  }
  if (outside_python_ == nullptr || outside_memory_ == nullptr) return 0;
  ++python_walks_;
  const uintptr_t hint = s->py_tstate.load(std::memory_order_relaxed);
  std::unique_ptr<PythonWalk>& last = last_python_walks_[s];
  if (last == nullptr) last = std::make_unique<PythonWalk>();
  PythonWalk* w = last.get();
  // (SameAsTraced is false for an incomplete trace.)
  const bool reused = w->hint == hint && outside_memory_->SameAsTraced(w->trace);
  if (reused) {
    ++python_walks_reused_;
    std::copy(w->py, w->py + kPyFrameWords * w->frames, py);
    if (!check_reused_walks_) return w->frames;
  }
  // Walked anew (and, checked, compared with the walk taken again).
  ReadTrace* trace = reused ? nullptr : &w->trace;
  if (trace != nullptr) trace->Clear();
  const BlockCachedView memory(*outside_memory_, trace);  // this walk's reads, by the block
  uint64_t fresh[kPyFrameWords * kMaxPythonFrames];
  const int m = WalkBlockedPythonFramesOf(memory, *outside_python_, hint, tid, fresh,
                                          kMaxPythonFrames);
  if (reused) {
    // Counted by the caller only if the thread stayed in its call all along.
    *differs = m != w->frames || !std::equal(fresh, fresh + kPyFrameWords * m, w->py);
    return w->frames;
  }
  std::copy(fresh, fresh + kPyFrameWords * m, py);
  std::copy(fresh, fresh + kPyFrameWords * m, w->py);
  w->frames = m;
  w->hint = hint;
  return m;
}

void Collector::DropPythonWalk(const ThreadSlot* s) {
  const auto it = last_python_walks_.find(s);
  if (it != last_python_walks_.end()) it->second->trace.complete = false;
}

// Whether the thread stayed in the call all along: not a nanosecond of CPU
// since `cpu_ns` (WalkBlocked says why).
bool Collector::CpuUnchanged(pid_t tid, int64_t cpu_ns) {
  if (outside_pid_ == 0) return ThreadCpuNs(tid) == cpu_ns;
  // From outside the CPU time is schedstat's, which has a slice still
  // running only once it ends: a thread that woke during the walk and runs
  // now looked unchanged, and its new stack was taken for the blocked one
  // (an ASan run of ...NeverGivesAThreadThatWakesMidWalkAWrongStack). The
  // count of slices run is raised when one starts.
  int64_t cpu = -1;
  uint64_t slices = 0;
  if (proc_.Schedstat(tid, &cpu, &slices) < 0 || cpu != cpu_ns) return false;
  const auto it = slices_at_tick_.find(tid);
  return it != slices_at_tick_.end() && it->second == slices;
}

// A blocked thread's stack without a native walk: the leaf `pc` the kernel
// reports (0: none) and the thread's Python frames (from outside without
// the helper's unwind tables, or without the thread's registers).
uint32_t Collector::WalkBlockedLeaf(ThreadSlot* s, pid_t tid, uintptr_t pc, int64_t cpu_ns,
                                    int64_t start, bool* rewalk) {
  uint64_t py[kPyFrameWords * kMaxPythonFrames];
  bool py_differs = false;
  const int m = BlockedPythonFrames(s, tid, py, &py_differs);
  const bool same = CpuUnchanged(tid, cpu_ns);
  if (!same) {
    ++blocked_walks_dropped_;
    *rewalk = true;
    DropPythonWalk(s);
  } else if (py_differs) {
    ++python_walks_reuse_mismatched_;
  }
  uint32_t id = 0;
  if (same && (pc != 0 || m > 0)) {
    uint64_t words[1 + kMaxPythonFrames];
    int n = 0;
    if (pc != 0) words[n++] = pc;
    const PythonRuntime* python = Python();
    for (int i = 0; i < m; ++i) {
      const uint64_t* f = py + kPyFrameWords * i;
      words[n++] = py_codes_.FrameWord(*python, f[0], f[1], f[2], start);
    }
    id = InternStack(words, static_cast<uint32_t>(n));
  }
  blocked_walk_ns_ += static_cast<uint64_t>(MonotonicNs() - start);
  return id;
}

Collector::StackCopy::~StackCopy() {
  if (data != nullptr) munmap(data, kBlockedStackCopyBytes);
}

uint32_t Collector::WalkBlocked(ThreadSlot* s, pid_t tid, uintptr_t sp, uintptr_t pc,
                                int64_t cpu_ns, bool* rewalk) {
  *rewalk = false;
  const int64_t start = MonotonicNs();
  ++blocked_walks_;
  // The native stack: the last walk's (NativeWalk), or walked over a copy
  // of [sp, top) of the thread's own stack (or the signal stack it runs
  // on): the copy fails or stops short where memory is gone (the thread
  // exited meanwhile) instead of faulting. From outside, only with the
  // cfi tables the helper builds (ReadStacksFromOutside); else the leaf pc
  // alone.
  const bool outside = outside_pid_ != 0;
  if (sp == 0 || pc == 0 || (outside && !outside_stacks_)) {
    return WalkBlockedLeaf(s, tid, pc, cpu_ns, start, rewalk);
  }
  std::unique_ptr<NativeWalk>& last = native_walks_[s];
  if (last == nullptr) last = std::make_unique<NativeWalk>();
  NativeWalk* w = last.get();
  const uintptr_t* pcs = w->pcs;
  int n = 0, not_built = 0;
  bool differs = false;  // from the walk anew, when checked
  const bool reused = SameNativeWalk(*w, sp, pc);
  if (reused) {
    n = w->frames;
    ++blocked_walks_reused_;
  }
  if (!reused || check_reused_walks_) {
    // Checked (DLPROF_CHECK_REUSED_WALKS): the walk anew goes to a side copy.
    NativeWalk* into = w;
    std::unique_ptr<NativeWalk> fresh;
    if (reused) {
      fresh = std::make_unique<NativeWalk>();
      into = fresh.get();
    }
    const StackBounds b = s->bounds;
    uintptr_t lo = 0, hi = 0;
    if (sp >= b.lo && sp < b.hi) {
      lo = sp, hi = b.hi;
    } else if (sp >= b.alt_lo && sp < b.alt_hi) {
      lo = sp, hi = b.alt_hi;
    }
    size_t copied = 0;
    if (hi > lo) {
      if (stack_copy_.data == nullptr) {
        void* p = mmap(nullptr, kBlockedStackCopyBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) stack_copy_.data = static_cast<uint8_t*>(p);
      }
      if (stack_copy_.data != nullptr) {
        const size_t want = std::min<uintptr_t>(hi - lo, kBlockedStackCopyBytes);
        copied = outside ? CopyFromProcess(outside_pid_, stack_copy_.data, lo, want)
                         : CopyOwnMemory(stack_copy_.data, lo, want);
      }
    }
    const CopiedStack copy{lo, stack_copy_.data, copied};
    const int walked = CfiWalkCopiedStack(pc, sp, copy, into->pcs, kMaxFrames, &not_built,
                                          &into->trace);
    into->sp = sp;
    into->pc = pc;
    into->frames = walked;
    if (!reused) {
      n = walked;
    } else {
      differs = walked != n || !std::equal(w->pcs, w->pcs + n, into->pcs);
    }
  }
  // The Python frames, read in place (SafeLoads) or from outside.
  uint64_t py[kPyFrameWords * kMaxPythonFrames];
  const PythonRuntime* python = Python();
  bool py_differs = false;
  const int m = BlockedPythonFrames(s, tid, py, &py_differs);
  // Whether the thread stayed in the call all along: not a nanosecond of
  // CPU since the tick's clock read, which came before the read of its
  // call, sp and pc (a thread that wakes and blocks again at the same
  // place, as a loop of sleeps from different Python functions does, still
  // uses some; a running thread's clock includes its current slice). Else
  // its stack may have changed under the walk, and none is better than a
  // wrong one. (The call, sp and pc read again after the walk added nothing
  // to this, for a second /proc read per walk.)
  const bool same = CpuUnchanged(tid, cpu_ns);
  if (same && differs) ++blocked_walks_reuse_mismatched_;
  if (same && py_differs) ++python_walks_reuse_mismatched_;
  uint32_t id = 0;
  if (!same || n <= 0) {
    ++blocked_walks_dropped_;
    *rewalk = true;
    w->trace.complete = false;  // read while the thread ran: not to be trusted again
    DropPythonWalk(s);
  } else {
    uint64_t words[kMaxFrames + kMaxPythonFrames];
    for (int i = 0; i < n; ++i) words[i] = pcs[i];
    for (int i = 0; i < m; ++i) {
      const uint64_t* f = py + kPyFrameWords * i;
      words[n + i] = py_codes_.FrameWord(*python, f[0], f[1], f[2], start);
    }
    id = InternStack(words, static_cast<uint32_t>(n + m));
    *rewalk = not_built > 0;
  }
  blocked_walk_ns_ += static_cast<uint64_t>(MonotonicNs() - start);
  return id;
}

bool Collector::SameNativeWalk(const NativeWalk& w, uintptr_t sp, uintptr_t pc) const {
  if (!w.trace.complete || w.sp != sp || w.pc != pc || w.frames <= 0 ||
      w.trace.unloads != CfiUnloadCount()) {
    return false;
  }
  const int n = w.trace.reads;
  if (outside_pid_ != 0) {
    uintptr_t now[kCfiWalkTraceReads];
    return CopyWordsOutside(outside_pid_, w.trace.addr, n, now) &&
           std::equal(now, now + n, w.trace.value);
  }
  if (SafeLoadsAllowed()) {  // a Python process: in place, no system call
    bool same = true;
    OpenFaultsForSafeLoads();  // on the collector, which blocks every signal
    for (int i = 0; i < n && same; ++i) {
      uintptr_t value = 0;
      same = SafeLoadPtr(w.trace.addr[i], &value) && value == w.trace.value[i];
    }
    CloseFaultsForSafeLoads(FaultsReturnTo::kProcess);
    return same;
  }
  uintptr_t now[kCfiWalkTraceReads];
  return CopyOwnWords(w.trace.addr, n, now) &&
         std::equal(now, now + n, w.trace.value);
}

}  // namespace dlprof
