// The profiling session of this process, as the rest of the runtime sees
// it: whether it records, and the calls that change it (the program's exit,
// exec, signals, masks, credentials, seccomp). Its files are listed in
// core/session_internal.h.
#ifndef DLPROF_CORE_SESSION_H_
#define DLPROF_CORE_SESSION_H_

#include <atomic>
#include <cstdint>

#include "core/session_state.h"
#include "core/thread_registry.h"

namespace dlprof {

// True while this process's session records: Baseline, Sampling or Stepped
// aside (core/session_state.h). Read on every annotation: one load.
inline bool SessionRecording() { return g_state.recording(); }
// True in DLPROF_MODE=detailed: stage enter/exit become timeline events.
extern bool g_session_detailed;

// The calling thread's slot, registering the thread if it is new to dlprof
// (a thread that existed before start, or one not made by pthread_create).
// nullptr when not sampling. Not signal-safe.
ThreadSlot* AdoptCurrentThread();

// Appends an annotation event to the thread's event ring (drops and counts
// when full). Not signal-safe (the owning thread only).
void PushEvent(ThreadSlot* s, uint64_t kind, uint32_t stage);

// Asks the collector to write everything now; waits at most timeout_ms.
// Returns true when written.
bool RequestFlush(int timeout_ms);

void SetWorker(int worker_id);

// The program took SIGPROF for itself (behind_back: by a path the sigaction
// interposer does not see, noticed afterwards): stop sampling for good, disarm
// every timer, say so once on stderr and in the profile. Stages, steps,
// buffers and wall ticks go on. Safe to call with every signal blocked, from
// any thread but the collector's while it holds its lock.
void StepAsideFromSigprof(bool behind_back);
// _exit() / _Exit() (core/exit_exec.cc): the process ends without atexit
// handlers. Has the collector end the file (END chunk, "end" = "_exit N"),
// waiting at most a second. Nothing in a vfork child. This function is safe to
// call from asynchronous signals.
void BeforeQuickExit(int status);
// An exec*() is about to replace the image: the collector disarms the timers
// (a setitimer timer would outlive the exec and kill the new image with
// SIGPROF) and ends the file ("end" = "exec", file kept open), waiting at most
// a second. Nothing is written after that END until AfterFailedExec, when
// the exec returned, re-arms the timers: the file
// goes on and ends again at exit (a reader takes the last END). Nothing in a
// vfork child. These functions are safe to call from asynchronous signals.
void BeforeExec();
void AfterFailedExec();
// The calling thread now blocks SIGPROF (or no longer does), by its own
// pthread_sigmask/sigprocmask (core/signals.h). Blocked: its timer is
// disarmed and dlprof's pending ticks taken back, so none reaches the
// program's sigwait/signalfd/sigpending; one line on stderr, once per
// process, unless the thread blocks every signal (`blocks_all`: a helper
// thread, not sampled and not worth a line). Unblocked: sampled again. This
// function is safe to call from asynchronous signals, as far as the timer
// lock allows (see TimerLock).
void AfterProgramMask(bool sigprof_blocked, bool blocks_all);

// The program is about to change its user or group ids (setuid, ...): the
// profile file is kept open from now on, since the new ids may not open it.
// Not signal-safe.
void BeforeCredentialChange();
// The same for a change of root directory (chroot), after which the run
// folder's path names another folder, or none. Not signal-safe.
void BeforeRunFolderLost();

// Stops the collector thread and waits (at most 2 s) until its task is
// gone, so the process is single-threaded again if the program is: for
// unshare(CLONE_NEWUSER) and setns, which refuse a multi-threaded process.
// Pauses from several threads nest: the first stops the collector, the last
// ResumeCollector starts it again if it ran. Pass the result (false: no
// session here, nothing to resume) to ResumeCollector. Samples wait in the
// rings meanwhile. Not signal-safe.
bool PauseCollector();
void ResumeCollector(bool paused);

// Whether the collector thread, if one runs, holds the calling thread's
// credentials (uids, gids, groups, capabilities: the lines of their
// /proc/<tid>/status), so that a set*id call glibc runs on every thread
// succeeds or fails on it as on the caller. False when unreadable.
bool CollectorHasCallersCredentials();

// The program is about to install a seccomp filter, which may forbid (and
// kill the process for) what dlprof does next: sampling stops, the profile
// is ended (END, "end" = "seccomp"), the collector thread is gone, one line
// on stderr. Not signal-safe.
void BeforeSeccompFilter();

// The calling thread disabled the TSC (prctl PR_SET_TSC, PR_TSC_SIGSEGV):
// it is not sampled from now on; one line on stderr, once.
void AfterTscDisabled();

// Counts a finished step (ends the unprofiled baseline when one is asked for).
void OnStepEnd();

}  // namespace dlprof

#endif  // DLPROF_CORE_SESSION_H_
