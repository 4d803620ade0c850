// fork(): every dlprof lock is held across it (pthread_atfork), samples in
// flight are fenced off, and the child starts its own profile as a worker.
// The fork interposer only takes the collector thread out of Python 3.12+'s
// count of threads around an os.fork() (core/python_fork.h).
#include <time.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "backends/cfi_unwinder.h"
#include "core/annotations.h"
#include "core/hooks.h"
#include "core/proc_maps.h"
#include "core/python_fork.h"
#include "core/session.h"
#include "core/collector_process.h"
#include "core/session_internal.h"
#include "core/shared_arena.h"
#include "core/signal_handler.h"
#include "core/signals.h"

namespace dlprof {

namespace {


// No sample may be inside libunwind on another thread when fork() copies the
// process: it could hold libunwind's lock, which the child would then inherit
// held, with no thread to release it. While the fence is up, new samples
// unwind by frame pointers (no lock, no loader); this waits (bounded) for
// the ones already running.
// Samples never wait (the loader is only tried, see proc_maps.h), so this
// takes microseconds; the bound is for a handler preempted on a crowded
// machine. If it runs out, the child cannot trust libunwind's lock and
// unwinds by frame pointers (ResetInForkChild).
bool g_fence_timed_out = false;  // for the child: read right after fork
__thread int64_t t_fence_start_ns __attribute__((tls_model("initial-exec"))) = 0;
void FenceSignalHandlers() {
  t_fence_start_ns = MonotonicNs();
  g_sampler.fork_fence.fetch_add(1, std::memory_order_seq_cst);
  ThreadSlot* self = t_slot;
  g_fence_timed_out = true;
  // At most 2 s of the clock (counting rounds of sleeps, a loaded machine
  // stretched the bound).
  const int64_t deadline = t_fence_start_ns + 2000000000LL;
  while (MonotonicNs() < deadline) {
    bool busy = false;
    for (int i = 0, limit = SlotLimit(); i < limit && !busy; ++i) {
      ThreadSlot* s = SlotAt(i);
      busy = s != self && s->in_handler.load(std::memory_order_seq_cst) != 0;
    }
    if (!busy) {
      g_fence_timed_out = false;
      return;
    }
    const timespec pause{0, 100000};
    nanosleep(&pause, nullptr);
  }
}

using ForkFn = pid_t (*)();
using ForkptyFn = pid_t (*)(int*, char*, const struct termios*, const struct winsize*);
std::atomic<ForkFn> g_next_fork{nullptr};
std::atomic<ForkptyFn> g_next_forkpty{nullptr};

void ResumeCollectorAfterPythonFork() { ResumeCollector(true); }

// Makes one fork (`call`) with the collector out of Python's count of the
// process's threads, when Python 3.12+ makes one (core/python_fork.h).
// Before every fork handler: the cfi tables' takes a lock the collector's
// last tick may wait for.
template <typename Call>
pid_t AroundPythonFork(Call call) {
  const bool left = ForkCountsPythonThreads() && PauseCollector();
  const pid_t pid = call();
  if (left && pid != 0) {  // the parent; a child starts a collector of its own
    const int saved = errno;
    if (pid < 0 || !ResumeAfterPythonFork(ResumeCollectorAfterPythonFork)) ResumeCollector(true);
    errno = saved;
  }
  return pid;
}

}  // namespace

void ResolveFork() {
  NextDefinition(&g_next_fork, "fork");
  NextDefinition(&g_next_forkpty, "forkpty");
}

pid_t ProgramFork() {
  const ForkFn next = NextDefinition(&g_next_fork, "fork");
  if (next == nullptr) return NoNextDefinition();
  return AroundPythonFork([&] { return next(); });
}

// glibc's forkpty forks by its own internal call, not through fork().
pid_t ProgramForkpty(int* amaster, char* name, const struct termios* termp, const struct winsize* winp) {
  const ForkptyFn next = NextDefinition(&g_next_forkpty, "forkpty");
  if (next == nullptr) return NoNextDefinition();
  return AroundPythonFork([&] { return next(amaster, name, termp, winp); });
}

// A fork by a process whose session is not its own: a child of _Fork() or a
// raw fork syscall, which ran no fork handler. Its dlprof locks may be held
// by threads of its parent's that it does not have: taking them would wait
// forever (a hostile review's raw-fork child that forked again hung). Such
// a fork takes none, and its child stops recording. Per thread: set by the
// prepare handler, read by the others on the same thread.
__thread bool t_fork_foreign __attribute__((tls_model("initial-exec"))) = false;

// Every dlprof lock is held across fork(), so the child gets each of them
// free and its data consistent: the stage and buffer tables (a child interns
// stages too), the collector, the timers.
void LockForFork() {
  t_fork_foreign = g_session_pid.load(std::memory_order_relaxed) != getpid();
  if (t_fork_foreign) return;
  LockAnnotationsForFork();
  pthread_mutex_lock(&g_collector_mu);
  LockTimersForFork();
  // The loader's count for the child's helper (it takes the lock below).
  if (CollectorIsProcess()) NoteLoaderGenerationAtFork();
  // After the collector's lock, which the collector holds around its own
  // walks of the loaded objects (the maps).
  LockLoaderCallsForFork();
  G->fork_seq = G->forks++;
  // A child's helper is orphaned to this process if it is a child
  // subreaper, however it became one (a raw prctl syscall passes no
  // interposer): the child, whose own flag is clear, learns it from here.
  if (CollectorIsProcess()) NoteIfChildSubreaper();
  // Last: concurrent forks queue on the locks above, and the fence should
  // only cover this fork's own clone.
  FenceSignalHandlers();
}

void UnlockAfterFork() {
  if (t_fork_foreign) return;
  UnlockLoaderCallsAfterFork();
  UnlockTimersAfterFork();
  pthread_mutex_unlock(&g_collector_mu);
  UnlockAnnotationsAfterFork();
  g_sampler.fork_fence.fetch_sub(1, std::memory_order_seq_cst);
  g_state.Count(kForkFenceNs, static_cast<uint64_t>(MonotonicNs() - t_fence_start_ns));
}

// In a fork()ed child: only the forking thread survives. Forget the parent's
// threads, timers, pending samples and file; start this process's own profile.
void ResetInForkChild() {
  // First: until then the slots and rings are shared with the parent.
  ArenaPrivatizeInForkChild();
  ForgetPythonForkInChild();
  if (t_fork_foreign) {
    // Not taken for this fork: threads of the parent's may have held them.
    g_collector_mu = PTHREAD_MUTEX_INITIALIZER;
    ResetLoaderCallsInForkChild();
    ResetTimerLockInForkChild();
  } else {
    // This thread took them in LockForFork: released as taken. (Writing
    // them over left them held for ThreadSanitizer, which then saw every
    // lock the child took as taken inside the timers' lock: a lock-order
    // inversion with LockForFork's order, in each forked worker.)
    UnlockLoaderCallsAfterFork();
    UnlockTimersAfterFork();
    pthread_mutex_unlock(&g_collector_mu);
  }
  if (t_fork_foreign) {
    // A grandchild through a raw-fork child: no profile of its own (its
    // stage and buffer locks were not taken for the fork, and are left
    // alone; a session that is off does not use them).
    t_fork_foreign = false;
    g_collector_running.store(false);
    g_state.Apply(PhaseEvent::kLost);
    return;
  }
  UnlockAnnotationsAfterFork();
  ResetSignalLockInForkChild();
  g_sampler.fork_fence.store(0);
  CfiForgetDeferredWalks();  // they belong to the parent's records
  g_collector_running.store(false);
  ForgetParentCollector();
  ForgetCollectorProcess();  // the parent's helper serves the parent
  g_mailbox.ResetInForkChild();  // the parent's requests, not ours
  if (!g_state.recording()) return;
  Collector* parent_collector = g_collector;  // the parent's; leaked on purpose
  if (parent_collector != nullptr) parent_collector->Abandon();
  g_collector = nullptr;
  ThreadSlot* self = t_slot;
  for (int i = 0, limit = SlotLimit(); i < limit; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load() == kSlotFree) continue;
    G->timer->ForgetInherited(&s->timer);
    if (s != self) {
      ResetSlot(s);
      s->state.store(kSlotFree);
    }
  }
  g_state.ResetCounters();
  g_session_pid.store(getpid(), std::memory_order_relaxed);
  ResetBufferStats();
  ResetAnnotationCounters();
  // Forked while another thread held the loader's lock: it stays held here.
  // libunwind would wait for it forever from the signal handler on its next
  // lookup; frame pointers need no loader.
  const bool loader_held = LoaderLockInheritedHeld();
  if (loader_held || g_fence_timed_out) {
    if (loader_held) MarkLoaderUnusable();
    std::string fp_error;
    if (std::unique_ptr<Unwinder> fp = MakeUnwinder("fp", &fp_error)) {
      G->unwinder = std::move(fp);
      g_sampler.unwinder = G->unwinder.get();
      g_sampler.fork_unwinder = G->unwinder.get();
    } else {
      StopSampling(kNoUnwinder);
    }
  }
  G->role = "worker";
  G->worker = G->fork_seq;
  std::string error;
  if (!G->timer->Start(kProfilingSignal, G->config.hz, &error)) {
    Warn("dlprof: forked child cannot restart its timer: " + error);
    g_sampler.active.store(false);
    g_state.Apply(PhaseEvent::kLost);
    return;
  }
  if (self != nullptr) {
    ResetSlot(self);
    t_tid = CurrentTid();
    self->tid.store(t_tid);
    self->timer = ThreadTimer{};
  }
  // Its file waits for the collector's first tick (EnsureCollectorFile): a
  // child that execs first, as a shell's and subprocess's children do, has
  // nothing of its own to keep, and its new image starts a file of its own.
  // Creating it cost more than anything else of a fork and exec under dlprof
  // (BENCHMARKS.md, "Start-up costs").
  // A collector process of its own is started without an allocation (the
  // arguments the parent prepared): a fork from a signal handler that
  // interrupted malloc leaves this child's heap mid-operation. Where the
  // child has a fact of its own to record, the allocating way.
  if (G->collector_process && !loader_held && !g_fence_timed_out) {
    if (self != nullptr && Armed()) ArmSlot(self);
    if (StartCollectorProcessInForkChild(G->worker)) {
      UseLoaderGenerationOfFork();
      return;
    }
    g_collector = NewCollector();
    StartCollector(/*fork_child=*/true);
    return;
  }
  g_collector = NewCollector();
  if (parent_collector != nullptr) g_collector->InheritMaps(*parent_collector);
  if (loader_held) {
    g_collector->SetProcessField("loader_lock",
                                 "inherited held at fork: frame-pointer stacks, no build-ids");
  } else if (g_fence_timed_out) {
    g_collector->SetProcessField("fork_fence",
                                 "a sample was still being taken at fork: frame-pointer stacks");
  }
  if (self != nullptr && Armed()) ArmSlot(self);
  StartCollector(/*fork_child=*/true);
}

bool EnsureCollectorFile() {
  if (g_collector == nullptr) return false;
  if (!g_collector->file_pending()) return true;
  if (CreateCollectorFile(g_collector)) return true;
  StopSampling(kOutputFailed);
  g_state.Apply(PhaseEvent::kOutputFailed);
  return false;
}

}  // namespace dlprof
