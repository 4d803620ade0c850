// dlprof's SIGSEGV and SIGBUS handler, which makes SafeLoad (core/safe_load.h)
// safe: a fault at SafeLoad's load instruction resumes as "faulted"; every
// other fault goes to the program's own action (the chained view of
// core/signals.h), as it would without dlprof: its handler is called with the
// same arguments and its sa_mask, SIG_DFL ends the process with the signal
// (and its core dump) at the same instruction, SIG_IGN ignores a sent signal.
// Installed only where it is needed (a Python process, core/python_frames.h):
// nothing changes for other programs.
#ifndef DLPROF_CORE_FAULT_HANDLER_H_
#define DLPROF_CORE_FAULT_HANDLER_H_

namespace dlprof {

// Installs the handler for SIGSEGV and SIGBUS (once per process; a fork child
// inherits it). False, with nothing installed, if either could not be.
// Not signal-safe.
bool InstallFaultHandler();

// True while SafeLoad is safe: the handler is in for both signals. The signal
// handler asks before each walk. Async-signal-safe (two atomic loads).
bool SafeLoadsAllowed();

// The profiling signal's handler brackets each sample with these. A SIGSEGV
// or SIGBUS another thread or process sends (kill, tgkill, sigqueue) while
// the thread is between them does not run the program's handler inside the
// sample, on dlprof's stack: the handler keeps it, and
// EndDeferringSentFaults sends it to the thread again, with the same code,
// sender and value, blocked until the profiling handler returns. The
// program's handler then runs with the program's own mask and stack, as
// without dlprof. Faults (SafeLoad's, or dlprof's own) are not deferred.
// Async-signal-safe: thread-local flags, and two system calls per deferred
// signal.
void BeginDeferringSentFaults();
void EndDeferringSentFaults();

// The collector's check, each tick: the program may have replaced the handler
// by a path the interposer does not see (a raw rt_sigaction). Then SafeLoad
// is not safe any more: returns true once, and SafeLoadsAllowed() is false
// from then on. Not signal-safe.
bool FaultHandlerLost();

}  // namespace dlprof

#endif  // DLPROF_CORE_FAULT_HANDLER_H_
