#include "core/signals.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include <dlprof/dlprof.h>

#include "backends/code_range.h"
#include "core/hooks.h"
#include "core/proc_maps.h"
#include "core/session.h"
#include "core/signal_handler.h"

// glibc's own entry points, for when the next definitions cannot be found.
extern "C" int __sigaction(int signo, const struct sigaction* act, struct sigaction* old);
extern "C" void (*bsd_signal(int signo, void (*handler)(int)))(int);

namespace dlprof {
namespace {

using SignalFn = void (*(*)(int, void (*)(int)))(int);

// The next sigaction()/signal() after ours in the lookup order: glibc's, or a
// sanitizer runtime's (ASan and TSan intercept both; TSan wraps handlers to
// deliver signals safely, so nothing here may go around it).
std::atomic<SigactionFn> g_next_sigaction{nullptr};
std::atomic<SignalFn> g_next_signal{nullptr};
using SigmaskFn = int (*)(int, const sigset_t*, sigset_t*);
std::atomic<SigmaskFn> g_next_pthread_sigmask{nullptr};
std::atomic<SigmaskFn> g_next_sigprocmask{nullptr};
// A sanitizer runtime's code (none without one). TSan delivers signals
// itself and blocks each one around its handler, as the kernel would,
// through the next pthread_sigmask: libdlprof's, when it follows TSan.
// That is no mask of the program's.
CodeRange g_sanitizer_text;

// Resolved once at start (ResolveSignalFunctions), never from a handler.
SigmaskFn NextMaskFunction(std::atomic<SigmaskFn>* slot, const char* name) {
  return NextDefinition(slot, name);
}

SigactionFn NextSigaction() {
  SigactionFn f = g_next_sigaction.load(std::memory_order_acquire);
  if (f == nullptr) {  // only before ResolveSignalFunctions(): not from a signal handler
    f = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
    if (f == nullptr) f = __sigaction;
    g_next_sigaction.store(f, std::memory_order_release);
  }
  return f;
}

// What dlprof installs and queries its own handlers with: the first
// sigaction() in the global lookup order that is not libdlprof's, the one the
// program's calls reach first. RTLD_NEXT alone is not that when a sanitizer
// runtime precedes libdlprof (a sanitized program linked with libdlprof): it
// is glibc's, and a handler installed there runs behind TSan's back, in the
// middle of whatever TSan was doing on that thread ("the handler will run
// synchronously and corrupt tsan per-thread state", says TSan's sigaction).
// When libdlprof itself is first (preloaded, or no sanitizer) the global
// lookup finds the interposer, and the next definition is the one. The
// sanitizer's interceptor calls its REAL(sigaction), which is the interposer
// again when libdlprof follows it: t_own_call lets that call through.
std::atomic<SigactionFn> g_first_sigaction{nullptr};

SigactionFn FirstSigaction() {
  SigactionFn f = g_first_sigaction.load(std::memory_order_acquire);
  if (f == nullptr) {  // only before ResolveSignalFunctions(): not from a signal handler
    f = reinterpret_cast<SigactionFn>(dlsym(RTLD_DEFAULT, "sigaction"));
    if (f == nullptr || f == OwnSigactionAddress()) f = NextSigaction();
    g_first_sigaction.store(f, std::memory_order_release);
  }
  return f;
}

// Set while dlprof itself calls FirstSigaction(): the interposer forwards such
// a call untouched (it is not the program's). Initial-exec: read from signal
// handlers, never allocates.
__thread bool t_own_call __attribute__((tls_model("initial-exec"))) = false;

SignalFn NextSignal() {
  SignalFn f = g_next_signal.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<SignalFn>(dlsym(RTLD_NEXT, "signal"));
    if (f == nullptr) f = bsd_signal;
    g_next_signal.store(f, std::memory_order_release);
  }
  return f;
}

// Constant-initialised (no dynamic initializer: the library constructor may
// run before this file's). Indexed by Slot().
struct Owned {
  std::atomic<bool> owned;
  std::atomic<void*> ours;                 // dlprof's handler, as installed
  // The handler that NextSigaction() reports right after dlprof installed
  // `ours`: `ours` itself, or the wrapper of a sanitizer that dlprof installed
  // it through (TSan puts its own in the kernel and keeps ours in a table).
  std::atomic<void*> ours_below;
  struct sigaction ours_action;  // dlprof's, as installed (under g_lock)
  std::atomic<void (*)(int)> disposition;  // the view's handler, readable from a signal handler
  struct sigaction view;                   // under g_lock
  // Chained signals (SIGSEGV, SIGBUS): copies of the view for the fault
  // handler, which cannot take g_lock (the fault may be on a thread that
  // holds it). Written under g_lock into the next copy, then published.
  struct sigaction copies[4];
  std::atomic<int> current_copy;
};
Owned g_owned[5];

// Guards the views. Held with every signal blocked, so a handler on the same
// thread can never spin on it.
std::atomic_flag g_lock = ATOMIC_FLAG_INIT;

Owned* Slot(int signo) {
  switch (signo) {
    case SIGPROF: return &g_owned[0];
    case SIGTERM: return &g_owned[1];
    case SIGINT: return &g_owned[2];
    case SIGSEGV: return &g_owned[3];
    case SIGBUS: return &g_owned[4];
    default: return nullptr;
  }
}

class ViewLock {
 public:
  ViewLock() {
    sigset_t all;
    sigfillset(&all);
    RealPthreadSigmask(SIG_BLOCK, &all, &saved_);
    while (g_lock.test_and_set(std::memory_order_acquire)) sched_yield();
  }
  ~ViewLock() {
    g_lock.clear(std::memory_order_release);
    RealPthreadSigmask(SIG_SETMASK, &saved_, nullptr);
  }
  ViewLock(const ViewLock&) = delete;
  ViewLock& operator=(const ViewLock&) = delete;

 private:
  sigset_t saved_;
};

void* HandlerOf(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(sa.sa_sigaction)
                                    : reinterpret_cast<void*>(sa.sa_handler);
}

bool IsHandler(const struct sigaction& sa) {
  return sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
}

// Still dlprof's handler for the signal? (Under the lock.) Asked below any
// sanitizer that precedes libdlprof: the program's own sigaction() reaches
// the interposer after that sanitizer has already recorded the program's
// handler as the one it dispatches to, so asking through it would mistake
// the program's call in progress for a handler installed behind our back.
bool StillOurs(int signo, Owned* o) {
  struct sigaction real {};
  if (NextSigaction()(signo, nullptr, &real) != 0) return true;
  void* const now = HandlerOf(real);
  return now == o->ours.load(std::memory_order_relaxed) ||
         now == o->ours_below.load(std::memory_order_relaxed);
}

void Release(Owned* o) { o->owned.store(false, std::memory_order_release); }

// SIGSEGV and SIGBUS stay dlprof's whatever the program sets: its action
// is kept as the view and the fault handler forwards to it.
bool IsChained(int signo) { return signo == SIGSEGV || signo == SIGBUS; }

// Under g_lock.
void PublishView(Owned* o) {
  const int next = (o->current_copy.load(std::memory_order_relaxed) + 1) & 3;
  o->copies[next] = o->view;
  o->current_copy.store(next, std::memory_order_release);
}

// The program's sigaction() on a signal dlprof owns (see signals.h).
int ProgramSigaction(int signo, Owned* o, const struct sigaction* act, struct sigaction* old) {
  bool behind_back = false;
  int rc = 0;
  {
    ViewLock lock;
    if (!o->owned.load(std::memory_order_acquire)) return NextSigaction()(signo, act, old);
    if (!StillOurs(signo, o)) {
      // Replaced behind our back: the program's handler is the real one now.
      Release(o);
      behind_back = signo == SIGPROF;
      rc = NextSigaction()(signo, act, old);
    } else {
      const struct sigaction prev = o->view;
      if (act == nullptr) {
        if (old != nullptr) *old = prev;
        return 0;
      }
      const struct sigaction next = *act;
      if (IsChained(signo)) {
        o->view = next;
        PublishView(o);
        if (old != nullptr) *old = prev;
        // As for SIGPROF below: a sanitizer in front keeps its own table.
        if (FirstSigaction() != NextSigaction()) RealSigaction(signo, &o->ours_action, nullptr);
        return 0;
      }
      if (signo == SIGPROF && !IsHandler(next)) {
        o->view = next;
        o->disposition.store(next.sa_handler, std::memory_order_release);
        if (old != nullptr) *old = prev;
        // A sanitizer in front of libdlprof that dispatches signals itself
        // (TSan) recorded SIG_IGN or SIG_DFL as SIGPROF's handler before it
        // called this, and would drop or die of dlprof's ticks: put dlprof's
        // handler back there (it only changes the sanitizer's table).
        if (FirstSigaction() != NextSigaction()) RealSigaction(signo, &o->ours_action, nullptr);
        return 0;
      }
      if (signo == SIGPROF) {
        // Sampling stops, every timer disarmed, before the program's handler
        // goes in: no tick of ours can reach it. A tick raised just before
        // the disarm may be pending here; a SIGPROF of the program's own is
        // raised again, and, every signal being blocked (ViewLock), is
        // delivered when the mask comes back, to the handler installed now.
        Release(o);
        StepAsideFromSigprof(false);
        TakeOwnPendingSigprof();
      }
      rc = NextSigaction()(signo, &next, nullptr);
      if (rc == 0) {
        Release(o);
        if (old != nullptr) *old = prev;
      }
    }
  }
  if (behind_back) StepAsideFromSigprof(true);
  return rc;
}

}  // namespace

void ResolveSignalFunctions() {
  NextSigaction();
  NextSignal();
  FirstSigaction();
  NextMaskFunction(&g_next_pthread_sigmask, "pthread_sigmask");
  NextMaskFunction(&g_next_sigprocmask, "sigprocmask");
  // Every sanitizer runtime exports this one.
  g_sanitizer_text.FindObjectOf(dlsym(RTLD_DEFAULT, "__sanitizer_print_stack_trace"));
}

int RealPthreadSigmask(int how, const sigset_t* set, sigset_t* old) {
  SigmaskFn f = g_next_pthread_sigmask.load(std::memory_order_acquire);
  if (f == nullptr) {  // not resolved (a failed dlsym): the kernel's, as glibc's does
    const int rc = static_cast<int>(syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8));
    return rc == 0 ? 0 : errno;
  }
  return f(how, set, old);
}

int ProgramSigmaskCall(int how, const sigset_t* set, sigset_t* old, bool pthread_style,
                       uintptr_t caller) {
  SigmaskFn f = NextMaskFunction(pthread_style ? &g_next_pthread_sigmask : &g_next_sigprocmask,
                                 pthread_style ? "pthread_sigmask" : "sigprocmask");
  sigset_t before;
  const int rc = f(how, set, old != nullptr ? old : &before);
  // libunwind's lock blocks every signal around its steps: that is dlprof's
  // own doing, inside the handler, not the program's mask.
  if (rc != 0 || set == nullptr || t_in_unwind || g_sanitizer_text.Contains(caller)) return rc;
  sigset_t now = old != nullptr ? *old : before;
  if (how == SIG_SETMASK) {
    now = *set;
  } else if (how == SIG_BLOCK) {
    sigorset(&now, &now, set);
  } else if (how == SIG_UNBLOCK) {
    for (int signo = 1; signo < NSIG; ++signo) {
      if (sigismember(set, signo) == 1) sigdelset(&now, signo);
    }
  }
  // A thread that blocks every signal is a helper thread keeping out of
  // signal delivery (Python's multiprocessing resource_sharer, which every
  // DataLoader with workers starts, gRPC's and glib's pools), not one that
  // waits for SIGPROF itself.
  bool blocks_all = true;
  for (int signo : {SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGCHLD, SIGALRM}) {
    blocks_all &= sigismember(&now, signo) == 1;
  }
  AfterProgramMask(sigismember(&now, SIGPROF) == 1, blocks_all);
  return rc;
}

bool TakeOwnPendingSigprof() {
  sigset_t prof, saved;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  RealPthreadSigmask(SIG_BLOCK, &prof, &saved);
  siginfo_t info;
  const timespec now{0, 0};
  bool program_signal = false;
  while (sigtimedwait(&prof, &info, &now) == SIGPROF) program_signal |= !IsOwnSignal(&info);
  // The program's own goes back (one is all a standard signal keeps pending).
  if (program_signal) raise(SIGPROF);
  RealPthreadSigmask(SIG_SETMASK, &saved, nullptr);
  return program_signal;
}

bool PrepareSigprofForExec() {
  Owned* o = Slot(SIGPROF);
  TakeOwnPendingSigprof();
  if (!o->owned.load(std::memory_order_acquire) || ProgramSigprofDisposition() != SIG_IGN) {
    return false;
  }
  // The program asked for SIG_IGN: the new image inherits it, as it would
  // without dlprof (a handler, dlprof's, would be reset to SIG_DFL).
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  return RealSigaction(SIGPROF, &ign, nullptr) == 0;
}

void AfterFailedExecSigprof(bool ignored_for_exec) {
  if (ignored_for_exec) RealSigaction(SIGPROF, &Slot(SIGPROF)->ours_action, nullptr);
}

int RealSigaction(int signo, const struct sigaction* act, struct sigaction* old) {
  // Saved and restored, not cleared: a signal handler may call this while the
  // thread it interrupted is inside it.
  const bool outer = t_own_call;
  t_own_call = true;
  const int rc = FirstSigaction()(signo, act, old);
  t_own_call = outer;
  return rc;
}

void OwnSignal(int signo, const struct sigaction& program_view, void* ours) {
  Owned* o = Slot(signo);
  if (o == nullptr) return;
  ViewLock lock;
  o->view = program_view;
  o->disposition.store(IsHandler(program_view) ? SIG_DFL : program_view.sa_handler,
                       std::memory_order_release);
  o->ours.store(ours, std::memory_order_relaxed);
  RealSigaction(signo, nullptr, &o->ours_action);
  struct sigaction below {};
  o->ours_below.store(NextSigaction()(signo, nullptr, &below) == 0 ? HandlerOf(below) : ours,
                      std::memory_order_relaxed);
  PublishView(o);
  o->owned.store(true, std::memory_order_release);
}

const struct sigaction* ChainedProgramAction(int signo) {
  Owned* o = Slot(signo);
  if (o == nullptr || !IsChained(signo)) return nullptr;
  return &o->copies[o->current_copy.load(std::memory_order_acquire)];
}

void ResetChainedActionOnDelivery(int signo) {
  Owned* o = Slot(signo);
  if (o == nullptr || !IsChained(signo)) return;
  // No g_lock here (a handler); a program's sigaction() racing with its
  // own SA_RESETHAND handler is the program's race.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  o->view = dfl;
  PublishView(o);
}

bool SignalTakenBehindOurBack(int signo) {
  Owned* o = Slot(signo);
  if (o == nullptr || !o->owned.load(std::memory_order_acquire)) return false;
  ViewLock lock;
  if (!o->owned.load(std::memory_order_acquire) || StillOurs(signo, o)) return false;
  Release(o);
  return true;
}

void ReleaseSignal(int signo) {
  if (Owned* o = Slot(signo)) Release(o);
}

bool OwnsSignal(int signo) {
  Owned* o = Slot(signo);
  return o != nullptr && o->owned.load(std::memory_order_acquire);
}

void (*ProgramSigprofDisposition())(int) {
  return g_owned[0].disposition.load(std::memory_order_acquire);
}

bool SigprofTakenBehindOurBack() {
  if (!SignalTakenBehindOurBack(SIGPROF)) return false;
  StepAsideFromSigprof(true);  // after the lock: it takes others
  return true;
}

void ResetSignalLockInForkChild() { g_lock.clear(std::memory_order_release); }

int ProgramSigactionCall(int signo, const struct sigaction* act, struct sigaction* old) {
  Owned* o = Slot(signo);
  if (t_own_call || o == nullptr || !o->owned.load(std::memory_order_acquire)) {
    return NextSigaction()(signo, act, old);
  }
  return ProgramSigaction(signo, o, act, old);
}

void (*ProgramSignalCall(int signo, void (*handler)(int)))(int) {
  Owned* o = Slot(signo);
  if (o == nullptr || !o->owned.load(std::memory_order_acquire)) {
    return NextSignal()(signo, handler);
  }
  // What glibc's signal() asks for: BSD semantics.
  struct sigaction act {}, old{};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  sigaddset(&act.sa_mask, signo);
  act.sa_flags = SA_RESTART;
  if (ProgramSigaction(signo, o, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace dlprof
