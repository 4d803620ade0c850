// The signals dlprof installs handlers for (SIGPROF for sampling, SIGTERM and
// SIGINT to end the profile when the program has no handler), and the
// program's own view of them.
//
// libdlprof exports sigaction() and signal(), so the program's calls reach
// this file first (as pthread_create reaches core/session_threads.cc). While dlprof
// owns a signal:
//   - a query (act == NULL) returns what the program last set, or what was
//     installed before dlprof started (SIG_DFL, usually): never dlprof's handler;
//   - SIGPROF set to SIG_DFL or SIG_IGN only changes that view (dlprof keeps
//     sampling, and applies the view to SIGPROFs it did not send: see
//     ProgramSigprofDisposition);
//   - SIGPROF set to a handler makes dlprof step aside: sampling stops (every
//     timer disarmed) BEFORE the program's handler is installed for real, so
//     none of dlprof's ticks reaches it;
//   - SIGTERM/SIGINT set to anything are installed for real (dlprof lets go);
//   - SIGSEGV/SIGBUS (owned only in a Python process, for its fault-safe
//     reads) set to anything only change the view: dlprof's fault handler
//     stays in and hands every fault that is not its own to that action.
// Not owned: calls go straight to glibc.
#ifndef DLPROF_CORE_SIGNALS_H_
#define DLPROF_CORE_SIGNALS_H_

#include <signal.h>
#include <stdint.h>

namespace dlprof {

// Finds the next sigaction()/signal() after libdlprof's (glibc's, or a
// sanitizer runtime's), and the first sigaction() that is not libdlprof's.
// Call once at start, before any handler can run.
void ResolveSignalFunctions();

// What dlprof itself installs and queries its handlers with: the first
// sigaction in the lookup order that is not the interposer (a sanitizer
// runtime's interceptor when one comes first, as the program's calls reach
// it; else the next one after the interposer). Never seen by the interposer
// as the program's call. Async-signal-safe once resolved (a thread-local flag
// and an atomic load), as far as a sanitizer's interceptor in front is: under
// TSan, which defers signals, handlers run at its safe points anyway.
int RealSigaction(int signo, const struct sigaction* act, struct sigaction* old);

// dlprof has installed `ours` (a sa_sigaction or, for SIGTERM/SIGINT, a
// sa_handler) for `signo`; `program_view` is what was there before. Call
// after installing. Not signal-safe.
void OwnSignal(int signo, const struct sigaction& program_view, void* ours);

// Gives `signo` back (dlprof will not touch it again). Async-signal-safe.
void ReleaseSignal(int signo);

// True while dlprof owns `signo`. Async-signal-safe.
bool OwnsSignal(int signo);

// While dlprof owns SIGPROF: what the program set for it, SIG_DFL or SIG_IGN.
// Async-signal-safe (one atomic load).
void (*ProgramSigprofDisposition())(int);

// Checks that SIGPROF's real handler is still dlprof's; if the program
// replaced it by a path the interposer does not see (sigset(), a raw
// syscall, a library's own sigaction symbol), releases SIGPROF and returns
// true. The collector calls it every tick. Not signal-safe.
bool SigprofTakenBehindOurBack();

// pthread_sigmask as glibc (or the sanitizer in front) has it, for dlprof's
// own use: the exported one is the program's (ProgramSigmaskCall).
// Async-signal-safe.
int RealPthreadSigmask(int how, const sigset_t* set, sigset_t* old);

// The program's pthread_sigmask (pthread_style) or sigprocmask (core/hooks.cc),
// called from `caller` (a return address): the call itself, then, when it
// changed whether this thread blocks SIGPROF, AfterProgramMask
// (core/session.h), unless a sanitizer runtime called it. Same result and
// errno as the call. Async-signal-safe, as the call is.
int ProgramSigmaskCall(int how, const sigset_t* set, sigset_t* old, bool pthread_style,
                       uintptr_t caller);

// Takes every SIGPROF pending for this thread (or the process) that dlprof
// sent; one of the program's own is raised again. True if there was one.
// Async-signal-safe.
bool TakeOwnPendingSigprof();

// Right before an exec, after every timer is disarmed: no tick of dlprof's
// stays pending into the new image (where SIGPROF's default action would
// kill it), and SIG_IGN, if that is the program's view, is put in for real so
// the new image inherits it. Returns whether SIG_IGN was put in; pass that to
// AfterFailedExecSigprof, which puts dlprof's handler back.
// Async-signal-safe.
bool PrepareSigprofForExec();
void AfterFailedExecSigprof(bool ignored_for_exec);

// SIGSEGV and SIGBUS, once dlprof's fault handler is in (core/fault_handler.h),
// are chained rather than owned: the program's sigaction() only changes the
// view, which the fault handler calls for every fault that is not a SafeLoad
// (core/safe_load.h). This is the view, as last set. Async-signal-safe (no
// lock: a copy published atomically). nullptr for other signals.
const struct sigaction* ChainedProgramAction(int signo);
// The program's action had SA_RESETHAND and is being delivered: the view
// becomes SIG_DFL, as the kernel would do. Async-signal-safe.
void ResetChainedActionOnDelivery(int signo);
// Checks that `signo`'s real handler is still dlprof's while dlprof owns
// it; when a path the interposer does not see replaced it, lets the signal
// go and returns true (SigprofTakenBehindOurBack then steps aside; the fault
// handler turns SafeLoads off). Not signal-safe.
bool SignalTakenBehindOurBack(int signo);

// In a fork child: the lock guarding the views may have been held by a thread
// that does not exist here.
void ResetSignalLockInForkChild();

}  // namespace dlprof

#endif  // DLPROF_CORE_SIGNALS_H_
