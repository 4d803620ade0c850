#include "core/fault_handler.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include <atomic>

#include "core/raw_syscall.h"
#include "core/safe_load.h"
#include "core/signals.h"

namespace dlprof {
namespace {

std::atomic<bool> g_installed{false};

// What a sent SIGSEGV or SIGBUS carried, kept while a sample runs: the
// fields kill(), tgkill() and sigqueue() fill (no memcpy of a siginfo_t on
// the signal path).
struct SentFault {
  int code, errnum, pid;
  unsigned uid;
  sigval value;
};
__thread bool t_deferring __attribute__((tls_model("initial-exec"))) = false;
__thread unsigned t_deferred __attribute__((tls_model("initial-exec"))) = 0;  // bit per index
__thread SentFault t_sent[2] __attribute__((tls_model("initial-exec")));

int FaultIndex(int signo) { return signo == SIGSEGV ? 0 : signo == SIGBUS ? 1 : -1; }

// SIG_DFL for real, and the signal is no longer dlprof's.
void LetGo(int signo) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ReleaseSignal(signo);
  RealSigaction(signo, &dfl, nullptr);
}

void HandleFault(int signo, siginfo_t* info, void* ucontext) {
  // Sent by kill(), raise(), tgkill() or sigqueue(), not by a fault: returning
  // does not repeat it. Only a fault is a fault-safe read's: a signal sent
  // while the pc was at the load would otherwise turn it into a failed read
  // and be lost to the program.
  const bool sent = info != nullptr && info->si_code <= 0;
  if (!sent && RecoverSafeLoad(static_cast<ucontext_t*>(ucontext))) return;
  if (const int i = FaultIndex(signo); sent && t_deferring && i >= 0) {
    // Inside dlprof's fault-safe reads (a sample, on dlprof's stack): the
    // program's handler runs after them (CloseFaultsForSafeLoads). A second
    // copy merges into the first, as the kernel merges a pending standard
    // signal.
    if ((t_deferred & (1u << i)) == 0) {
      t_sent[i] = SentFault{info->si_code, info->si_errno, info->si_pid, info->si_uid,
                            info->si_value};
      t_deferred |= 1u << i;
    }
    return;
  }
  const struct sigaction* view = ChainedProgramAction(signo);
  if (view == nullptr || view->sa_handler == SIG_DFL ||
      (view->sa_handler == SIG_IGN && !sent)) {
    // The default action (a fault cannot be ignored: the kernel would kill
    // the process): put SIG_DFL in and let the instruction fault again, or
    // send the signal again, so that the process ends exactly as without
    // dlprof, core dump included.
    const int saved_errno = errno;
    LetGo(signo);
    if (sent) raise(signo);  // our handler has SA_NODEFER: delivered now
    errno = saved_errno;
    return;
  }
  if (view->sa_handler == SIG_IGN) return;
  // The program's handler, as the kernel would call it: its mask on top of
  // the current one (plus the signal itself unless SA_NODEFER), the action
  // reset first for SA_RESETHAND. A copy: the view may change meanwhile.
  const struct sigaction action = *view;
  if (action.sa_flags & SA_RESETHAND) ResetChainedActionOnDelivery(signo);
  sigset_t mask = action.sa_mask, saved;
  if ((action.sa_flags & SA_NODEFER) == 0) sigaddset(&mask, signo);
  RealPthreadSigmask(SIG_BLOCK, &mask, &saved);
  if (action.sa_flags & SA_SIGINFO) {
    action.sa_sigaction(signo, info, ucontext);
  } else {
    action.sa_handler(signo);
  }
  RealPthreadSigmask(SIG_SETMASK, &saved, nullptr);
}

bool InstallOne(int signo) {
  struct sigaction before {};
  if (RealSigaction(signo, nullptr, &before) != 0) return false;
  struct sigaction sa {};
  sa.sa_sigaction = HandleFault;
  // SA_ONSTACK: on the thread's alternate stack when it has one, as the
  // program's handler may need (a stack overflow); SA_NODEFER: a signal
  // sent again from the handler is delivered at once.
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (RealSigaction(signo, &sa, nullptr) != 0) return false;
  OwnSignal(signo, before, reinterpret_cast<void*>(HandleFault));
  return true;
}

}  // namespace

namespace {

// Whether SIGSEGV and SIGBUS were blocked when the window opened: they are
// blocked again at its close only then (a caller outside a handler and
// dlprof's threads, such as a test, keeps its mask).
__thread bool t_faults_were_blocked __attribute__((tls_model("initial-exec"))) = false;

sigset_t FaultSignals() {
  sigset_t faults;
  sigemptyset(&faults);
  sigaddset(&faults, SIGSEGV);
  sigaddset(&faults, SIGBUS);
  return faults;
}

}  // namespace

void OpenFaultsForSafeLoads() {
  t_deferring = true;
  const sigset_t faults = FaultSignals();
  sigset_t old;
  sigemptyset(&old);
  RawSyscall6(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&faults),
              reinterpret_cast<long>(&old), _NSIG / 8, 0, 0);
  t_faults_were_blocked = sigismember(&old, SIGSEGV) == 1 || sigismember(&old, SIGBUS) == 1;
}

void CloseFaultsForSafeLoads(FaultsReturnTo to) {
  if (t_faults_were_blocked) {
    const sigset_t faults = FaultSignals();
    RawSyscall6(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&faults), 0, _NSIG / 8, 0,
                0);
  }
  t_deferring = false;
  const unsigned deferred = t_deferred;
  if (deferred == 0) return;
  t_deferred = 0;
  const long pid = RawSyscall6(SYS_getpid, 0, 0, 0, 0, 0, 0);
  const long tid = RawSyscall6(SYS_gettid, 0, 0, 0, 0, 0, 0);
  for (int i = 0; i < 2; ++i) {
    if ((deferred & (1u << i)) == 0) continue;
    const int signo = i == 0 ? SIGSEGV : SIGBUS;
    siginfo_t again{};
    again.si_signo = signo;
    again.si_errno = t_sent[i].errnum;
    again.si_code = t_sent[i].code;
    again.si_pid = t_sent[i].pid;
    again.si_uid = t_sent[i].uid;
    again.si_value = t_sent[i].value;
    if (to == FaultsReturnTo::kThisThread) {
      // Blocked (above) until the handler returns, when the kernel puts back
      // the mask the program had: then it is delivered on the program's
      // stack, or stays pending if the program blocks it, as without dlprof.
      // The kernel takes any code a thread queues to itself.
      RawSyscall6(SYS_rt_tgsigqueueinfo, pid, tid, signo, reinterpret_cast<long>(&again), 0, 0);
    } else if (RawSyscall6(SYS_rt_sigqueueinfo, pid, signo, reinterpret_cast<long>(&again), 0, 0,
                           0) != 0) {
      // To the process, for a thread that does not block it. The kernel
      // refuses kill()'s and tgkill()'s codes from another thread than the
      // one they name: then as kill() from this process.
      RawSyscall6(SYS_kill, pid, signo, 0, 0, 0, 0);
    }
  }
}

bool InstallFaultHandler() {
  if (g_installed.load(std::memory_order_acquire)) return SafeLoadsAllowed();
  if (!InstallOne(SIGSEGV)) return false;
  if (!InstallOne(SIGBUS)) {
    // Give SIGSEGV back as it was: nothing half-installed.
    const struct sigaction* view = ChainedProgramAction(SIGSEGV);
    struct sigaction back = *view;
    ReleaseSignal(SIGSEGV);
    RealSigaction(SIGSEGV, &back, nullptr);
    return false;
  }
  g_installed.store(true, std::memory_order_release);
  return true;
}

bool SafeLoadsAllowed() {
  return g_installed.load(std::memory_order_acquire) && OwnsSignal(SIGSEGV) && OwnsSignal(SIGBUS);
}

bool FaultHandlerLost() {
  if (!g_installed.load(std::memory_order_acquire)) return false;
  const bool lost = SignalTakenBehindOurBack(SIGSEGV) | SignalTakenBehindOurBack(SIGBUS);
  if (!lost) return false;
  g_installed.store(false, std::memory_order_release);
  return true;
}

}  // namespace dlprof
