// The session's state machine and the collector's mailbox.
//
// A process's session is in one phase at a time, and every path that starts,
// steps aside or ends it goes through one table (NextPhase), applied by
// compare-and-swap: a signal handler, the exiting thread and the collector
// may race to end the session, and the first one wins. Requests to the
// collector (flush, end the file for an exec, re-arm, disarm, a worker id,
// pause) go through one mailbox: bits and a futex word the collector sleeps
// on. Both are constant-initialised and async-signal-safe, so the library
// constructor, signal handlers and fork children may use them at any time.
#ifndef DLPROF_CORE_SESSION_STATE_H_
#define DLPROF_CORE_SESSION_STATE_H_

#include <atomic>
#include <cstdint>

namespace dlprof {

enum class Phase : int {
  kOff,           // no session here: disabled, failed to start, or lost (a fork child)
  kBaseline,      // recording; timers unarmed until the baseline's steps are done
  kSampling,      // recording; timers armed
  kSteppedAside,  // recording stages, steps, buffers, wall time; CPU sampling off for good
  kEnding,        // an end was asked (exit, _exit, a fatal signal, seccomp); END is being written
  kEnded,         // the file has its END (or cannot be written): nothing more is collected
};

enum class PhaseEvent : int {
  kStart,             // Off -> Sampling
  kStartBaseline,     // Off -> Baseline
  kStartSteppedAside, // Off -> SteppedAside (SIGPROF had a handler before start)
  kBaselineDone,      // Baseline -> Sampling
  kStepAside,         // Baseline | Sampling -> SteppedAside
  kEnd,               // any recording phase -> Ending
  kEndWritten,        // Ending -> Ended
  kOutputFailed,      // any recording phase, or Ending -> Ended
  kLost,              // any recording phase -> Off (a fork child that cannot restart)
};

// The table: whether `event` moves `from`, and where to. Pure.
bool NextPhase(Phase from, PhaseEvent event, Phase* to);
const char* PhaseName(Phase phase);

inline bool IsRecording(Phase p) {
  return p == Phase::kBaseline || p == Phase::kSampling || p == Phase::kSteppedAside;
}

// Why CPU sampling is off for good (the first reason wins).
enum OffReason : int {
  kSamplingOn = 0,
  kProgramSigprof,      // the program installed a SIGPROF handler (interposed sigaction/signal)
  kSigprofBehindBack,   // ... by a path the interposer does not see, noticed by the collector
  kSigprofBeforeStart,  // SIGPROF had a handler before dlprof started
  kOutputFailed,        // the profile cannot be written (disk full, file size limit)
  kNoUnwinder,          // a fork child that cannot use its unwinder, and no fallback
  kSeccompFilter,       // the program installs a seccomp filter (dlprof steps aside)
  kCollectorOutOfMemory,  // the collector's own allocations failed (RLIMIT_AS)
};
const char* OffReasonText(int reason);

// Why the session ends (EndCause): a signal number (> 0), or one of these.
constexpr int kEndNone = 0;
constexpr int kEndQuickExit = -1;  // _exit(status)
constexpr int kEndSeccomp = -2;    // a seccomp filter is going in
constexpr int kEndExit = -3;       // exit(): the exiting thread writes END itself

// SessionState and Mailbox keep their words in a Data block: their own at
// first (constant-initialized, so any interposer may use them before the
// library's constructors ran), moved once into the shared arena
// (core/shared_arena.h) when the session starts (MoveTo), where a
// collector process can reach them.
// Counters of the runtime's own kept with the session's words, so that a
// collector process reads them too (as library globals they were left out
// of its files: a drop it could not see went unreported).
enum RuntimeCounter : int {
  kDroppedNoThread,  // signals on threads with no slot
  kForkSamples,      // samples unwound by frame pointers while a fork() was under way
  kForkFenceNs,      // how long forks kept libunwind out, in all
  kLoaderBusy,       // unwinder lookups given up: another thread held the loader's lock
  kRuntimeCounters,
};

class SessionState {
 public:
  struct Data {
    std::atomic<int> phase{static_cast<int>(Phase::kOff)};
    std::atomic<int> off_reason{kSamplingOn};
    std::atomic<int64_t> off_ns{0};
    std::atomic<int> end_cause{kEndNone};
    std::atomic<int> end_status{0};
    std::atomic<int64_t> end_ns{0};  // when the end began (BeginEnd)
    std::atomic<uint64_t> counters[kRuntimeCounters] = {};
  };
  constexpr SessionState() : data_(&own_) {}
  // Copies the words into `shared` (zeroed memory of sizeof(Data)) and uses
  // them from then on. Before any other thread can reach the session.
  void MoveTo(void* shared);
  // Uses the words at `shared` as they are: the collector process, after
  // attaching to the program's arena (collector/).
  void UseAt(void* shared) { data_.store(static_cast<Data*>(shared), std::memory_order_release); }

  // When the winning BeginEnd came (CLOCK_MONOTONIC), 0 before: a collector
  // that writes the END after the process is gone runs its threads' wall
  // time to there.
  int64_t end_ns() const { return d()->end_ns.load(std::memory_order_relaxed); }

  // The runtime's counters. Count is safe to call from asynchronous signals.
  void Count(RuntimeCounter c, uint64_t n = 1) {
    d()->counters[c].fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t counter(RuntimeCounter c) const {
    return d()->counters[c].load(std::memory_order_relaxed);
  }
  // In a fork child: the parent's counts are not the child's.
  void ResetCounters() {
    for (auto& c : d()->counters) c.store(0, std::memory_order_relaxed);
  }

  Phase phase() const { return static_cast<Phase>(d()->phase.load(std::memory_order_acquire)); }
  bool recording() const { return IsRecording(phase()); }

  // Moves by `event` if the table allows it from the phase now; returns
  // whether it moved (false: another path moved first, or the event does
  // not apply here). This function is safe to call from asynchronous signals.
  bool Apply(PhaseEvent event);

  // Steps CPU sampling aside for `reason` (first reason wins, with its time)
  // and, from Baseline or Sampling, moves to SteppedAside. Returns whether
  // this call set the reason. This function is safe to call from asynchronous signals.
  bool StepAside(OffReason reason, int64_t now_ns);
  int off_reason() const { return d()->off_reason.load(std::memory_order_seq_cst); }
  int64_t off_ns() const { return d()->off_ns.load(std::memory_order_relaxed); }

  // Asks for the end (cause as above; a status for _exit): the first cause
  // wins and moves a recording phase to Ending. Returns whether it did.
  // This function is safe to call from asynchronous signals.
  bool BeginEnd(int cause, int status = 0);
  int end_cause() const { return d()->end_cause.load(std::memory_order_acquire); }
  int end_status() const { return d()->end_status.load(std::memory_order_relaxed); }

 private:
  Data* d() const { return data_.load(std::memory_order_acquire); }
  Data own_;
  std::atomic<Data*> data_;
};

// Requests to the collector, as bits of one word.
enum Request : uint32_t {
  kRequestExecEnd = 1u << 0,  // an exec is about to replace the image: disarm, END "exec"
  kRequestRearm = 1u << 1,    // the exec failed: arm again
  kRequestDisarm = 1u << 2,   // a disarm that could not take the timer lock
  kRequestWorker = 1u << 3,   // dlprof_set_worker's id is waiting (TakeWorker)
  kRequestPause = 1u << 4,    // leave the loop (the thread ends) until started again
};

class Mailbox {
 public:
  static constexpr int kNoWorker = INT32_MIN;
  struct Data {
    std::atomic<uint32_t> bits{0};
    std::atomic<uint32_t> wake{0};  // futex: bumped by every Post
    std::atomic<int> worker{kNoWorker};
    std::atomic<uint64_t> flush_requested{0};
    std::atomic<uint64_t> flush_done{0};
    std::atomic<uint32_t> flush_seq{0};  // futex: bumped after each flush_done store
    std::atomic<uint32_t> exec_underway{0};  // 1 from BeforeExec until the exec fails
    std::atomic<uint32_t> maps_read{0};      // 1 once a collector process read the maps
  };
  constexpr Mailbox() : data_(&own_) {}
  // As SessionState::MoveTo and UseAt. The futexes are process-shared
  // ones: the collector process waits and wakes on them too.
  void MoveTo(void* shared);
  void UseAt(void* shared) { data_.store(static_cast<Data*>(shared), std::memory_order_release); }

  // Leaves `requests` (0: only wake) and wakes the collector at once, not at
  // its next tick. This function is safe to call from asynchronous signals
  // (errno is kept).
  void Post(uint32_t requests);
  // The collector: every request posted so far, cleared.
  uint32_t Take() { return d()->bits.exchange(0, std::memory_order_acq_rel); }
  uint32_t Pending() const { return d()->bits.load(std::memory_order_acquire); }
  // Takes back requests not served yet.
  void Withdraw(uint32_t requests) { d()->bits.fetch_and(~requests, std::memory_order_acq_rel); }
  // The collector: read before deciding to sleep; Sleep returns early (true)
  // once a Post came after that read, else at `deadline_ns` (CLOCK_MONOTONIC).
  uint32_t WakeCount() const { return d()->wake.load(std::memory_order_acquire); }
  bool Sleep(int64_t deadline_ns, uint32_t seen);

  // Whether the program's last exec is still under way (it fails or the
  // image is replaced): set before kRequestExecEnd is posted, cleared
  // before kRequestRearm. A collector that does not wait out each exec (the
  // process) may take both bits at once, and only this says which came last.
  // These are safe to call from asynchronous signals.
  void SetExecUnderway(bool on) { d()->exec_underway.store(on ? 1 : 0, std::memory_order_release); }
  bool ExecUnderway() const { return d()->exec_underway.load(std::memory_order_acquire) != 0; }

  // A collector process has read the program's maps (from outside, where
  // a process that is gone has none left): it says so once, the program's
  // exit asks (core/session.cc, OnExit). Safe to call from asynchronous
  // signals.
  void NoteMapsRead() { d()->maps_read.store(1, std::memory_order_release); }
  bool MapsRead() const { return d()->maps_read.load(std::memory_order_acquire) != 0; }

  // dlprof_set_worker: the id travels with kRequestWorker.
  void PostWorker(int id);
  bool TakeWorker(int* id);

  // Flushes are tickets: a waiter's flush is done once the collector has
  // published a count at least as large. A poster that needs a request
  // served before its flush is answered posts it first, then takes its
  // ticket; the collector reads flush_requested() before Take(). These are
  // safe to call from asynchronous signals.
  uint64_t NewFlushTicket();
  uint64_t flush_requested() const { return d()->flush_requested.load(std::memory_order_acquire); }
  uint64_t flush_done() const { return d()->flush_done.load(std::memory_order_acquire); }
  void PublishFlushDone(uint64_t requested);
  // Waits (at most timeout_ms) for `ticket`; gives up early once `answerer`
  // is false (nobody would answer).
  bool AwaitFlush(uint64_t ticket, int timeout_ms, const std::atomic<bool>& answerer);
  // Releases every AwaitFlush to look again (the collector is ending).
  void WakeFlushWaiters();

  // In a fork child: the parent's requests are not the child's.
  void ResetInForkChild();

 private:
  Data* d() const { return data_.load(std::memory_order_acquire); }
  Data own_;
  std::atomic<Data*> data_;
};

// This process's session and its collector's mailbox.
extern SessionState g_state;
extern Mailbox g_mailbox;

}  // namespace dlprof

#endif  // DLPROF_CORE_SESSION_STATE_H_
