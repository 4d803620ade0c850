#include "core/session_state.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <new>

#include "core/shared_arena.h"
#include "core/signal_handler.h"  // MonotonicNs (by syscall where PR_SET_TSC forbids the vDSO)

namespace dlprof {

SessionState g_state;
Mailbox g_mailbox;

namespace {

timespec ToTimespec(int64_t ns) {
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

}  // namespace

bool NextPhase(Phase from, PhaseEvent event, Phase* to) {
  switch (event) {
    case PhaseEvent::kStart:
    case PhaseEvent::kStartBaseline:
    case PhaseEvent::kStartSteppedAside:
      if (from != Phase::kOff) return false;
      *to = event == PhaseEvent::kStart           ? Phase::kSampling
            : event == PhaseEvent::kStartBaseline ? Phase::kBaseline
                                                  : Phase::kSteppedAside;
      return true;
    case PhaseEvent::kBaselineDone:
      if (from != Phase::kBaseline) return false;
      *to = Phase::kSampling;
      return true;
    case PhaseEvent::kStepAside:
      if (from != Phase::kBaseline && from != Phase::kSampling) return false;
      *to = Phase::kSteppedAside;
      return true;
    case PhaseEvent::kEnd:
      if (!IsRecording(from)) return false;
      *to = Phase::kEnding;
      return true;
    case PhaseEvent::kEndWritten:
      if (from != Phase::kEnding) return false;
      *to = Phase::kEnded;
      return true;
    case PhaseEvent::kOutputFailed:
      if (!IsRecording(from) && from != Phase::kEnding) return false;
      *to = Phase::kEnded;
      return true;
    case PhaseEvent::kLost:
      if (!IsRecording(from)) return false;
      *to = Phase::kOff;
      return true;
  }
  return false;
}

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kOff: return "off";
    case Phase::kBaseline: return "baseline";
    case Phase::kSampling: return "sampling";
    case Phase::kSteppedAside: return "stepped aside";
    case Phase::kEnding: return "ending";
    case Phase::kEnded: return "ended";
  }
  return "?";
}

const char* OffReasonText(int reason) {
  switch (reason) {
    case kProgramSigprof: return "off: the program installed its own SIGPROF handler";
    case kSigprofBehindBack: return "off: the program replaced dlprof's SIGPROF handler";
    case kSigprofBeforeStart: return "off: SIGPROF had a handler before dlprof started";
    case kOutputFailed: return "off: the profile could not be written";
    case kNoUnwinder: return "off: no unwinder usable in this fork child";
    case kSeccompFilter: return "off: the program installs a seccomp filter";
    case kCollectorOutOfMemory: return "off: the collector ran out of memory";
    default: return "on";
  }
}

bool SessionState::Apply(PhaseEvent event) {
  int from = d()->phase.load(std::memory_order_acquire);
  for (;;) {
    Phase to;
    if (!NextPhase(static_cast<Phase>(from), event, &to)) return false;
    if (d()->phase.compare_exchange_weak(from, static_cast<int>(to), std::memory_order_acq_rel)) {
      return true;
    }
  }
}

bool SessionState::StepAside(OffReason reason, int64_t now_ns) {
  int expected = kSamplingOn;
  if (!d()->off_reason.compare_exchange_strong(expected, reason, std::memory_order_seq_cst)) {
    return false;
  }
  d()->off_ns.store(now_ns, std::memory_order_relaxed);
  Apply(PhaseEvent::kStepAside);
  return true;
}

bool SessionState::BeginEnd(int cause, int status) {
  if (!recording()) return false;
  int expected = kEndNone;
  // The status first: the collector reads it once it sees the cause.
  if (cause == kEndQuickExit) d()->end_status.store(status & 0xff, std::memory_order_relaxed);
  if (!d()->end_cause.compare_exchange_strong(expected, cause, std::memory_order_acq_rel)) return false;
  d()->end_ns.store(MonotonicNs(), std::memory_order_relaxed);
  return Apply(PhaseEvent::kEnd);
}

void Mailbox::Post(uint32_t requests) {
  // A child of a fork that ran no atfork handler: the words are still its
  // parent's (core/shared_arena.h), and its requests are not the parent's.
  if (!ArenaOwned()) return;
  const int saved_errno = errno;
  if (requests != 0) d()->bits.fetch_or(requests, std::memory_order_acq_rel);
  d()->wake.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &d()->wake, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  errno = saved_errno;
}

bool Mailbox::Sleep(int64_t deadline_ns, uint32_t seen) {
  const timespec ts = ToTimespec(deadline_ns);
  for (;;) {
    if (d()->wake.load(std::memory_order_acquire) != seen) return true;
    if (MonotonicNs() >= deadline_ns) return false;
    // FUTEX_WAIT_BITSET: an absolute CLOCK_MONOTONIC deadline, so EINTR and
    // spurious returns just go round again.
    syscall(SYS_futex, &d()->wake, FUTEX_WAIT_BITSET, seen, &ts, nullptr,
            FUTEX_BITSET_MATCH_ANY);
  }
}

void Mailbox::PostWorker(int id) {
  d()->worker.store(id, std::memory_order_release);
  Post(kRequestWorker);
}

bool Mailbox::TakeWorker(int* id) {
  const int taken = d()->worker.exchange(kNoWorker, std::memory_order_acq_rel);
  if (taken == kNoWorker) return false;
  *id = taken;
  return true;
}

uint64_t Mailbox::NewFlushTicket() {
  const uint64_t ticket = d()->flush_requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  Post(0);
  return ticket;
}

void Mailbox::WakeFlushWaiters() {
  d()->flush_seq.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &d()->flush_seq, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void Mailbox::PublishFlushDone(uint64_t requested) {
  // Unchanged (no flush was asked since the last): a waiter still waits for
  // a later ticket, so there is no one to release. The collector publishes
  // at every tick; the wake was a system call of each.
  if (d()->flush_done.exchange(requested, std::memory_order_acq_rel) == requested) return;
  WakeFlushWaiters();
}

bool Mailbox::AwaitFlush(uint64_t ticket, int timeout_ms, const std::atomic<bool>& answerer) {
  // On a futex the collector bumps (not in 1 ms sleeps: each exec and _exit
  // waited at least that long, 12 ms a process in an exec-heavy script).
  const int64_t deadline = MonotonicNs() + timeout_ms * 1000000LL;
  for (;;) {
    const uint32_t seq = d()->flush_seq.load(std::memory_order_acquire);
    if (d()->flush_done.load(std::memory_order_acquire) >= ticket) return true;
    if (!answerer.load()) return false;
    const int64_t left = deadline - MonotonicNs();
    if (left <= 0) return false;
    const timespec wait = ToTimespec(left);
    syscall(SYS_futex, &d()->flush_seq, FUTEX_WAIT, seq, &wait, nullptr, 0);
  }
}

namespace {

// Copies every word of `from` into `to`, the same layout of atomics.
template <typename Data>
void CopyWords(const Data& from, Data* to);

template <>
void CopyWords(const SessionState::Data& from, SessionState::Data* to) {
  to->phase.store(from.phase.load());
  to->off_reason.store(from.off_reason.load());
  to->off_ns.store(from.off_ns.load());
  to->end_cause.store(from.end_cause.load());
  to->end_status.store(from.end_status.load());
  to->end_ns.store(from.end_ns.load());
  for (int i = 0; i < kRuntimeCounters; ++i) to->counters[i].store(from.counters[i].load());
}

template <>
void CopyWords(const Mailbox::Data& from, Mailbox::Data* to) {
  to->bits.store(from.bits.load());
  to->wake.store(from.wake.load());
  to->worker.store(from.worker.load());
  to->flush_requested.store(from.flush_requested.load());
  to->flush_done.store(from.flush_done.load());
  to->flush_seq.store(from.flush_seq.load());
  to->exec_underway.store(from.exec_underway.load());
}

}  // namespace

void SessionState::MoveTo(void* shared) {
  auto* to = new (shared) Data;
  CopyWords(*d(), to);
  data_.store(to, std::memory_order_release);
}

void Mailbox::MoveTo(void* shared) {
  auto* to = new (shared) Data;
  CopyWords(*d(), to);
  data_.store(to, std::memory_order_release);
}

void Mailbox::ResetInForkChild() {
  d()->bits.store(0);
  d()->worker.store(kNoWorker);
  d()->exec_underway.store(0);
  d()->maps_read.store(0);  // the parent's helper read the parent's
}

}  // namespace dlprof
