// The profiling signal handler: one sample of the interrupted thread into its
// ring. Everything it reads is set up before the signal is installed.
#ifndef DLPROF_CORE_SIGNAL_HANDLER_H_
#define DLPROF_CORE_SIGNAL_HANDLER_H_

#include <signal.h>

#include <atomic>
#include <cstdint>

#include "backends/timer_source.h"
#include "backends/unwinder.h"

namespace dlprof {

constexpr int kMaxFrames = 512;

// Sample record in a thread's sample ring:
//   word 0: kSampleTag << 56 | Python frame count (8 bits) << 48 |
//           weight-1 (16 bits) << 32 | stage depth << 16 | frame count
//   word 1: CLOCK_MONOTONIC ns
//   ceil(depth / 2) words: stage ids, two per word, outermost first
//   frame count words: pcs, leaf first
//   with kSampleDeferredBit in word 0, one word: the handle of the walk's
//   rest, which the collector finishes (CfiFinishWalk)
//   kPyFrameWords words per Python frame, innermost first (core/python_frames.h)
constexpr uint64_t kSampleTag = 0xD1;
constexpr uint64_t kSampleDeferredBit = uint64_t{1} << 15;  // in the frame count's 16 bits

struct SamplerState {
  Unwinder* unwinder = nullptr;
  TimerSource* timer = nullptr;
  int max_frames = 128;
  bool weigh_by_cpu_time = false;  // TimerSource::CpuTimeWeighted()
  int64_t period_ns = 10000000;    // 1e9 / hz
  std::atomic<bool> active{false};  // false: the handler records nothing
  // Non-zero while a fork() is under way: the handler unwinds with
  // fork_unwinder, which takes no lock the child could inherit held
  // (core/session_fork.cc LockForFork).
  std::atomic<int> fork_fence{0};
  Unwinder* fork_unwinder = nullptr;        // used while the fence is up (frame pointers)
  // (Its samples and time are counted in g_state: kForkSamples, kForkFenceNs.)
  // Called (from the handler) for a SIGPROF the timer source did not send.
  void (*on_foreign)(int signo, siginfo_t* info, void* ucontext) = nullptr;
};
extern SamplerState g_sampler;

// True when `info` describes a signal of the timer source in use
// (TimerSource::IsOwnSignal); false before a source is set.
// This function is safe to call from asynchronous signals.
bool IsOwnSignal(const siginfo_t* info);

// Installs HandleProfilingSignal for `signo` with SA_RESTART | SA_SIGINFO.
// While it runs, every signal but SIGSYS is blocked (a sent one waits for
// the sample's end; the Python walk opens SIGSEGV and SIGBUS around its
// fault-safe reads: core/fault_handler.h). Not signal-safe; call before any
// timer is armed.
bool InstallSignalHandler(int signo);
void RestoreSignalHandler(int signo);

// This function is safe to call from asynchronous signals (not re-entrant on a
// thread: a nested call drops its sample and counts it). Saves and restores
// errno; never allocates, locks or blocks; a full ring drops and counts.
// Stack: on the program's stack it only finds the slot and sets in_handler
// (~100 bytes below the kernel's signal frame, at most 2 KiB, whatever the
// unwinder: tests/signal_stack_test.cc); the unwind and the ring writes run on
// the slot's unwind stack (ThreadSlot::unwind_stack, core/stack_switch.h).
// It changes no per-thread state the program can see (no sigaltstack).
// A sample with Python code the collector has not met wakes the
// collector (one futex wake, at most one a millisecond per process:
// core/python_codes_seen.h), so that it names that code before it is freed.
void HandleProfilingSignal(int signo, siginfo_t* info, void* ucontext);

// CLOCK_MONOTONIC in ns. This function is safe to call from asynchronous
// signals. Through the vDSO, unless the thread disabled the time-stamp
// counter (PR_SET_TSC), where the vDSO's RDTSC faults: then by syscall.
int64_t MonotonicNs();
extern __thread bool t_clock_by_syscall __attribute__((tls_model("initial-exec")));

}  // namespace dlprof

#endif  // DLPROF_CORE_SIGNAL_HANDLER_H_
