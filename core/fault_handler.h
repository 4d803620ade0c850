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

// SIGSEGV and SIGBUS are blocked in dlprof's SIGPROF handler and in its
// threads; these open them around fault-safe reads (SafeLoad) only, whose
// faults must reach the handler above. A SIGSEGV or SIGBUS another thread or
// process *sends* (kill, tgkill, sigqueue) while they are open does not run
// the program's handler there, on dlprof's stack or thread: the handler
// keeps the first copy of each, and CloseFaultsForSafeLoads blocks them again
// and sends it once more, with the same code, sender and value where the
// kernel allows:
// - kThisThread (the profiling handler): queued to this thread, blocked
//   until the handler returns; the program's handler then runs with the
//   program's own mask and stack, as without dlprof;
// - kProcess (a thread of dlprof's, which blocks it): queued to the process,
//   for a program thread to take (as kill() from this process where the
//   kernel refuses the original code).
// Faults (SafeLoad's, or dlprof's own) are not kept. Async-signal-safe:
// thread-local flags, two system calls per window and two per copy kept.
enum class FaultsReturnTo { kThisThread, kProcess };
void OpenFaultsForSafeLoads();
void CloseFaultsForSafeLoads(FaultsReturnTo to);

// The collector's check, each tick: the program may have replaced the handler
// by a path the interposer does not see (a raw rt_sigaction). Then SafeLoad
// is not safe any more: returns true once, and SafeLoadsAllowed() is false
// from then on. Not signal-safe.
bool FaultHandlerLost();

}  // namespace dlprof

#endif  // DLPROF_CORE_FAULT_HANDLER_H_
