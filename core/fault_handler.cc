#include "core/fault_handler.h"

#include <errno.h>
#include <signal.h>
#include <ucontext.h>

#include <atomic>

#include "core/safe_load.h"
#include "core/signals.h"

namespace dlprof {
namespace {

std::atomic<bool> g_installed{false};

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
