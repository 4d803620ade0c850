// The threads being sampled: one preallocated slot per live thread, holding
// everything the signal handler touches (so it never allocates).
#ifndef DLPROF_CORE_THREAD_REGISTRY_H_
#define DLPROF_CORE_THREAD_REGISTRY_H_

#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>

#include <dlprof/dlprof.h>

#include "backends/timer_source.h"
#include "backends/unwinder.h"
#include "core/word_ring.h"

namespace dlprof {

constexpr int kMaxThreads = 1024;
constexpr int kMaxStageDepth = DLPROF_MAX_STAGE_DEPTH;
constexpr size_t kSampleRingWords = 1 << 15;  // 256 KiB: > 100 ms of deep stacks at 1000 Hz
constexpr size_t kEventRingWords = 1 << 13;   // 64 KiB: 4096 events between drains
// The stack the signal handler samples on (core/signal_handler.cc): libunwind's
// slow path takes up to ~24 KiB, so 64 KiB leaves room for a program's own
// handler of another signal that lands while a sample is taken.
constexpr size_t kUnwindStackBytes = 64 << 10;

enum SlotState : int { kSlotFree = 0, kSlotClaimed = 1, kSlotLive = 2, kSlotExited = 3 };

struct ThreadSlot {
  std::atomic<int> state{kSlotFree};
  std::atomic<int> tid{0};
  StackBounds bounds;
  ThreadTimer timer;
  WordRing samples;  // written by the signal handler on this thread
  WordRing events;   // written by this thread's annotations

  // The stage stack, written only by the owning thread; read by its signal
  // handler and, racily but harmlessly, by the collector's wall ticks.
  std::atomic<uint32_t> depth{0};
  std::atomic<uint32_t> stages[kMaxStageDepth] = {};
  // Stage exits so far, written only by the owning thread (a load and a
  // store, no read-modify-write). Every change of stage path that a wall tick
  // cannot see, because it was undone before the tick, includes an exit.
  std::atomic<uint32_t> stage_exits{0};
  // Set (for good) by the handler at the first sample that stands for
  // periods which ended in the kernel: this thread spends CPU time where no
  // signal comes (system calls), and the ticks it loses there are given to
  // its next sample, whose stage may be another. From then on its stage
  // enters and exits are timestamped events, as in detailed mode, so that
  // the reader can share those periods among the stages they fell in
  // (readers/unsampled_ticks.h). A thread that stays in user mode never pays.
  std::atomic<bool> stage_events{false};

  std::atomic<int> in_handler{0};
  // The thread itself blocks SIGPROF (pthread_sigmask/sigprocmask, or a mask
  // inherited from its creator): its timer stays disarmed meanwhile, so none
  // of dlprof's ticks waits for the program's sigwait, signalfd or sigpending.
  std::atomic<bool> sigprof_blocked{false};
  // The thread disabled the time-stamp counter (prctl PR_SET_TSC): the
  // clock reads of the handler would fault there, so it is not sampled.
  std::atomic<bool> tsc_off{false};
  // Top of the slot's own unwind stack (core/stack_switch.h MapStack), 0 if it
  // could not be mapped (then the handler samples on the program's stack).
  // Mapped at the slot's first claim and never freed, like the rings; only
  // the slot's thread runs on it, inside its handler (in_handler set).
  uintptr_t unwind_stack = 0;
  // The thread's CPU time at its previous sample: the handler's, but set by
  // whoever arms the thread's timer (the collector, for other threads), just
  // before. A signal from an earlier arming may still be on its way then, so
  // this is atomic (relaxed: the value only weighs the next sample).
  std::atomic<int64_t> last_sample_cpu_ns{0};
  // The thread's CPython thread state, as the handler last found it
  // (core/python_frames.cc), 0 if none. Only the slot's thread writes it,
  // inside its handler; the collector reads it (relaxed) as a hint for the
  // walk of a blocked thread's Python frames, and checks it before use.
  std::atomic<uintptr_t> py_tstate{0};
  // Counters the handler and the thread bump; the collector reports them.
  std::atomic<uint64_t> samples_taken{0};
  std::atomic<uint64_t> dropped_ring{0};
  std::atomic<uint64_t> dropped_busy{0};
  std::atomic<uint64_t> handler_ns{0};
  std::atomic<uint64_t> events_dropped{0};
  // Written by the thread itself when it registers (before the slot is
  // published) and when it unregisters at exit (before the slot is marked
  // exited): the monotonic time and its CPU clock then, -1 = not known (a
  // thread registered by another, RegisterExistingThreads). The wall ticks
  // only measure between a thread's first and last tick; these give the
  // collector the time before the first and after the last, which a thread
  // that starts and ends its stage with its life (a feeder thread) lost
  // every time: up to a tick at each end, and 120 ms of 2 s once when the
  // collector waited for a core (CpuWait.AThreadThatMostlyWaitsForACore...).
  std::atomic<int64_t> born_ns{-1}, born_cpu_ns{-1};
  std::atomic<int64_t> exit_ns{-1}, exit_cpu_ns{-1};

  // Collector-only fields (never touched by the handler).
  int file_index = -1;     // thread index in the profile file, -1 = not yet written
  int64_t last_cpu_ns = -1;
  int64_t last_wall_ns = 0;
  // The kernel's run_delay (ns runnable but waiting for a core) at the last
  // read of /proc/self/task/<tid>/schedstat; -1 = never read.
  int64_t last_run_delay_ns = -1;
  bool run_delay_stale = false;  // a tick since it was read ran almost whole (not read)
  uint32_t last_stage_exits = 0;  // stage_exits at the previous wall tick
  // The open run of wall ticks with one stage path and state; written as one
  // DLPROF_CHUNK_WALL_STATES record when either changes, or at the next flush.
  uint32_t run_ticks = 0;  // 0 = no open run
  uint32_t run_path = 0;
  uint64_t run_state = 0;
  int64_t run_end_ns = 0, run_wall_ns = 0, run_cpu_ns = 0;
  int64_t run_wait_ns = 0;  // of run_wall_ns, runnable but waiting for a core
  uint32_t run_stack = 0;   // the open run's blocked stack id (0: none)
  // The state and stack the thread was last found blocked in, kept while it
  // uses no CPU (it cannot have left the call, nor changed its stack): a
  // long block is read and walked once. blocked_state 0: not known.
  uint64_t blocked_state = 0;
  uint32_t blocked_stack = 0;
  bool blocked_rewalk = false;  // the walk missed unwind tables: walk again
};

// The current thread's slot, or nullptr when it is not sampled. Initial-exec
// TLS so that reading it from the signal handler never calls __tls_get_addr.
extern __thread ThreadSlot* t_slot __attribute__((tls_model("initial-exec")));
// The kernel tid of the current thread as registered (0 before), so the
// handler can tell a stale t_slot from its own without a syscall.
extern __thread pid_t t_tid __attribute__((tls_model("initial-exec")));

ThreadSlot* SlotAt(int i);
// One past the highest slot index ever claimed (never decreases): every live
// slot is below it. This function is safe to call from asynchronous signals.
int SlotLimit();

// Claims a slot for `tid` (allocating its rings and unwind stack on first use;
// they are kept when a slot is reused, and never freed). Fills the stack bounds when `tid` is
// the calling thread (with `hint`, its creator's view of its stack, if known:
// CurrentStackBounds). nullptr when all slots are taken. Not signal-safe.
ThreadSlot* ClaimSlot(pid_t tid, const StackHint* hint = nullptr);
// Makes a claimed slot visible to the handler and the collector.
void PublishSlot(ThreadSlot* s);
// The slot of a live thread by tid, or nullptr.
// This function is safe to call from asynchronous signals.
ThreadSlot* FindSlot(pid_t tid);

// For a process attached to another's arena (core/shared_arena.h
// ArenaAttach): that process's slot table, its ArenaRoot::kSlots, is the one
// SlotAt, SlotLimit and FindSlot read from now on. Not signal-safe.
void UseSlotTableAt(void* table);

// Clears every counter and ring of a slot (claim time, or in a fork child).
void ResetSlot(ThreadSlot* s);

// The calling thread's kernel tid (defined with the backends, which need it too).
pid_t CurrentTid();

}  // namespace dlprof

#endif  // DLPROF_CORE_THREAD_REGISTRY_H_
