#include "core/signal_handler.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>

#include <cstring>

#include "backends/backend_factories.h"
#include "backends/cfi_unwinder.h"
#include "core/proc_maps.h"
#include "core/python_codes_seen.h"
#include "core/python_frames.h"
#include "core/raw_syscall.h"
#include "core/session_state.h"
#include "core/shared_arena.h"
#include "core/signals.h"
#include "core/stack_switch.h"
#include "core/thread_registry.h"

namespace dlprof {

SamplerState g_sampler;

namespace {
struct sigaction g_previous_action;
}

__thread bool t_clock_by_syscall __attribute__((tls_model("initial-exec"))) = false;

int64_t MonotonicNs() {
  timespec ts;
  if (t_clock_by_syscall) {
    RawSyscall6(SYS_clock_gettime, CLOCK_MONOTONIC, reinterpret_cast<long>(&ts), 0, 0, 0, 0);
  } else {
    clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no syscall, signal-safe
  }
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool IsOwnSignal(const siginfo_t* info) {
  const TimerSource* timer = g_sampler.timer;
  return timer != nullptr && timer->IsOwnSignal(info);
}

namespace {

// The profiling signal's action. Every other signal waits until the sample
// is taken: a handler of the program's that ran inside it would run on
// dlprof's 64 KiB stack (a handler with 64 KiB of locals died of SIGSEGV),
// and one that leaves by siglongjmp would leave the thread marked "in
// dlprof's handler" for good (every fork then waited 2 s for it). SIGSYS
// stays open: a seccomp filter's trap (a sandbox's own handler) is forced
// through, and blocked it would kill. A fault of dlprof's own code (SIGSEGV,
// SIGBUS, SIGFPE, SIGILL, SIGTRAP) is forced through anyway; blocked, only
// copies other processes send wait. The Python walk's fault-safe reads open
// SIGSEGV and SIGBUS around themselves (core/fault_handler.h).
struct sigaction ProfilingAction() {
  struct sigaction sa {};
  sa.sa_sigaction = HandleProfilingSignal;
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  sigfillset(&sa.sa_mask);
  sigdelset(&sa.sa_mask, SIGSYS);
  return sa;
}

}  // namespace

bool InstallSignalHandler(int signo) {
  const struct sigaction sa = ProfilingAction();
  return RealSigaction(signo, &sa, &g_previous_action) == 0;
}

void RestoreSignalHandler(int signo) { RealSigaction(signo, &g_previous_action, nullptr); }

namespace {

struct SampleCall {
  ThreadSlot* slot;
  siginfo_t* info;
  const ucontext_t* uc;
};

// The thread's stack bounds, and, when the interrupted code runs on the
// thread's signal stack (a handler installed with SA_ONSTACK), that stack
// too: the walk reads both (StackBounds::alt_lo). One sigaltstack() call,
// only when the stack pointer is outside the thread's known stack.
// This function is safe to call from asynchronous signals.
StackBounds BoundsAt(StackBounds bounds, const ucontext_t* uc) {
  const uintptr_t sp = ContextSp(uc);
  // Unknown bounds (a slot registered from another thread) stay unknown: no
  // system call on every sample of such a thread.
  if (sp == 0 || bounds.hi <= bounds.lo || (sp >= bounds.lo && sp < bounds.hi)) return bounds;
  stack_t alt{};
  if (RawSyscall6(SYS_sigaltstack, 0, reinterpret_cast<long>(&alt), 0, 0, 0, 0) != 0) return bounds;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(alt.ss_sp);
  if ((alt.ss_flags & SS_DISABLE) == 0 && alt.ss_size > 0 && sp >= lo && sp - lo < alt.ss_size) {
    bounds.alt_lo = lo;
    bounds.alt_hi = lo + alt.ss_size;
  }
  return bounds;
}

// The sample itself, on the slot's unwind stack (or, without one, on the
// program's): unwind, weigh, write the ring. The caller holds in_handler.
// This function is safe to call from asynchronous signals.
__attribute__((noinline)) void TakeSample(void* arg) {
  const SampleCall* call = static_cast<const SampleCall*>(arg);
  ThreadSlot* s = call->slot;
  Unwinder* unwinder = g_sampler.unwinder;
  if (g_sampler.fork_fence.load(std::memory_order_seq_cst) != 0 &&
      g_sampler.fork_unwinder != nullptr) {
    unwinder = g_sampler.fork_unwinder;
    g_state.Count(kForkSamples);
  }
  const int64_t start = MonotonicNs();

  uintptr_t pcs[kMaxFrames];
  t_in_unwind = true;  // the loader is only tried, never waited for (proc_maps.h)
  int deferred = -1;
  int frames = unwinder->UnwindDeferring(call->uc, BoundsAt(s->bounds, call->uc), pcs,
                                         g_sampler.max_frames, &deferred);
  t_in_unwind = false;
  if (frames < 0) frames = 0;
  const size_t deferred_words = deferred >= 0 ? 1 : 0;
  uint64_t py[kPyFrameWords * kMaxPythonFrames];
  const int py_frames = WalkPythonFrames(s, py, kMaxPythonFrames);
  uint32_t depth = s->depth.load(std::memory_order_relaxed);
  if (depth > static_cast<uint32_t>(kMaxStageDepth)) depth = kMaxStageDepth;
  int extra = g_sampler.timer->Overrun(call->info);
  if (extra < 0) extra = 0;
  int64_t preempted_ns = 0;
  if (g_sampler.weigh_by_cpu_time) {
    // Periods that ended in the kernel raised no signal; this sample stands
    // for them too (clock_gettime is async-signal-safe).
    timespec cpu;
    const int64_t before = MonotonicNs();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    // A real system call: the scheduler may run others right here, which is
    // not time spent sampling. Leave it out of handler_ns.
    preempted_ns = MonotonicNs() - before;
    int64_t now = static_cast<int64_t>(cpu.tv_sec) * 1000000000 + cpu.tv_nsec;
    const int64_t last = s->last_sample_cpu_ns.load(std::memory_order_relaxed);
    if (last > 0) {
      int64_t periods = (now - last + g_sampler.period_ns / 2) / g_sampler.period_ns;
      if (periods > 1) extra += static_cast<int>(periods < 0x10000 ? periods - 1 : 0xfffe);
    }
    s->last_sample_cpu_ns.store(now, std::memory_order_relaxed);
  }
  if (extra > 0xfffe) extra = 0xfffe;
  if (extra > 0 && !s->stage_events.load(std::memory_order_relaxed)) {
    s->stage_events.store(true, std::memory_order_relaxed);
  }

  const size_t stage_words = (depth + 1) / 2;
  const size_t n = 2 + stage_words + static_cast<size_t>(frames) + deferred_words +
                   static_cast<size_t>(kPyFrameWords * py_frames);
  uint64_t pos = s->samples.Reserve(n);
  if (pos == UINT64_MAX) {
    s->dropped_ring.fetch_add(1, std::memory_order_relaxed);
    if (deferred >= 0) CfiDropDeferredWalk(deferred);
  } else {
    // Word by word: no memcpy inside the signal handler.
    s->samples.Put(pos, kSampleTag << 56 | static_cast<uint64_t>(py_frames) << 48 |
                            static_cast<uint64_t>(extra) << 32 |
                            static_cast<uint64_t>(depth) << 16 |
                            (deferred >= 0 ? kSampleDeferredBit : 0) |
                            static_cast<uint64_t>(frames));
    s->samples.Put(pos + 1, static_cast<uint64_t>(start));
    for (size_t w = 0; w < stage_words; ++w) {
      uint64_t lo = s->stages[2 * w].load(std::memory_order_relaxed);
      uint64_t hi = 2 * w + 1 < depth ? s->stages[2 * w + 1].load(std::memory_order_relaxed) : 0;
      s->samples.Put(pos + 2 + w, lo | hi << 32);
    }
    for (int f = 0; f < frames; ++f) s->samples.Put(pos + 2 + stage_words + f, pcs[f]);
    if (deferred >= 0) {
      s->samples.Put(pos + 2 + stage_words + frames, static_cast<uint64_t>(deferred));
    }
    const uint64_t py_pos = pos + 2 + stage_words + static_cast<uint64_t>(frames) + deferred_words;
    for (int w = 0; w < kPyFrameWords * py_frames; ++w) s->samples.Put(py_pos + w, py[w]);
    s->samples.Commit(pos, n);
    s->samples_taken.fetch_add(1, std::memory_order_relaxed);
    // Code the collector has not met: it may be freed within milliseconds
    // (a module's, once its import ran, and it is often an outer frame:
    // the module imports others), so the collector drains now, not at its
    // next tick (core/python_codes_seen.h).
    if (HasUnseenPyCode(py, py_frames) && TakePyCodeWake(start)) g_mailbox.Post(0);
  }
  const int64_t spent = MonotonicNs() - start - preempted_ns;
  s->handler_ns.fetch_add(static_cast<uint64_t>(spent > 0 ? spent : 0), std::memory_order_relaxed);
}

}  // namespace

void HandleProfilingSignal(int signo, siginfo_t* info, void* ucontext) {
  const int saved_errno = errno;
  if (info != nullptr && !IsOwnSignal(info)) {
    // The program's own SIGPROF (raise, kill, its timer): not a sample.
    if (g_sampler.on_foreign != nullptr) g_sampler.on_foreign(signo, info, ucontext);
    errno = saved_errno;
    return;
  }
  if (!ArenaOwned()) {  // a fork child's slots are still its parent's memory
    errno = saved_errno;
    return;
  }
  ThreadSlot* s = t_slot;
  if (s != nullptr && (s->tid.load(std::memory_order_relaxed) != t_tid ||
                       s->state.load(std::memory_order_acquire) != kSlotLive)) {
    s = nullptr;  // the slot was freed (thread exiting) or given to another thread
    t_slot = nullptr;
  }
  if (s == nullptr) {
    // A thread that existed before start, or one the process-wide timer chose:
    // find its slot once (then remember it).
    pid_t tid = CurrentTid();
    s = FindSlot(tid);
    if (s != nullptr) {
      t_tid = tid;
      t_slot = s;
    }
  }
  if (s == nullptr) {
    g_state.Count(kDroppedNoThread);
    errno = saved_errno;
    return;
  }
  // in_handler first, then the switches: a fork() that raises its fence and
  // then finds in_handler clear knows this sample will not start (seq_cst).
  if (s->in_handler.exchange(1, std::memory_order_seq_cst) != 0) {
    s->dropped_busy.fetch_add(1, std::memory_order_relaxed);
    errno = saved_errno;
    return;
  }
  if (!g_sampler.active.load(std::memory_order_seq_cst)) {
    s->in_handler.store(0, std::memory_order_release);
    errno = saved_errno;
    return;
  }
  // The rest runs on the slot's unwind stack: the program's stack may have
  // little room left (a PTHREAD_STACK_MIN thread deep in a recursion), and
  // unwinding takes up to ~24 KiB (libunwind's slow path).
  SampleCall call{s, info, static_cast<const ucontext_t*>(ucontext)};
  RunOnStack(&call, TakeSample, s->unwind_stack);
  s->in_handler.store(0, std::memory_order_release);
  errno = saved_errno;
}

}  // namespace dlprof
