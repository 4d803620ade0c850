// Thread registration and the timers' arming: pthread_create is interposed
// (core/hooks.cc), each new thread gets its slot and its timer before its
// start routine runs, and its key destructor releases them at exit.
#include <dirent.h>
#include <dlfcn.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <new>
#include <string>

#include "core/raw_syscall.h"
#include "backends/private_fd.h"
#include "core/session.h"
#include "core/session_internal.h"
#include "core/shared_arena.h"
#include "core/signal_handler.h"
#include "core/signals.h"
#include "core/stack_switch.h"

namespace dlprof {

pthread_key_t g_thread_key;
std::atomic<bool> g_main_thread_exited{false};

namespace {

__thread bool t_unregistrable __attribute__((tls_model("initial-exec"))) = false;
// Set while this thread starts one of dlprof's own threads (StartInternalThread).
// That creation can come back into the interposer below: a sanitizer's
// interceptor calls its REAL(pthread_create), which is the interposer when
// libdlprof follows the sanitizer runtime. The interposer then passes the call
// straight on, neither wrapping the start routine nor registering the thread
// for sampling. Initial-exec (no __tls_get_addr, no allocation), like t_slot.
__thread bool t_starting_internal_thread __attribute__((tls_model("initial-exec"))) = false;
// Another pthread_create precedes libdlprof's in the lookup order (a sanitizer
// runtime's): see CreateBehindOtherPthreadCreate. Set once by StartSession,
// before the session starts.
bool g_behind_other_pthread_create = false;

// TimerLock's mutex, and its owner (so a handler that interrupted the
// holder sees that it must not wait).
pthread_mutex_t g_timer_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<pid_t> g_timer_owner{0};

// The next pthread_create after the interposer (glibc's, or a sanitizer's
// interceptor when the sanitizer runtime comes after libdlprof): what the
// interposer forwards the program's threads to.
PthreadCreateFn RealPthreadCreate() {
  static PthreadCreateFn real =
      reinterpret_cast<PthreadCreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
  return real;
}

// What dlprof's own threads (the collector) start with: the first
// pthread_create in the global lookup order that is not libdlprof's.
// RTLD_NEXT alone is not that: when a sanitizer runtime precedes libdlprof
// (a sanitized program linked with libdlprof: libasan or libtsan comes first
// in its DT_NEEDED), the program's threads go through the sanitizer's
// interceptor, then the interposer, then glibc; RTLD_NEXT from here is glibc,
// so a thread started with it is one the sanitizer never saw start: TSan has
// no state for it and kills the process on its first instrumented call, ASan
// calls it "T-1" and keeps the stale poison of whatever stack glibc reused.
// When libdlprof itself is first (preloaded, or linked with no sanitizer), the
// global lookup finds the interposer, and the next definition is the one.
PthreadCreateFn InternalPthreadCreate() {
  static PthreadCreateFn internal = [] {
    auto first = reinterpret_cast<PthreadCreateFn>(dlsym(RTLD_DEFAULT, "pthread_create"));
    return first == nullptr || first == OwnPthreadCreateAddress() ? RealPthreadCreate() : first;
  }();
  return internal;
}

}  // namespace

TimerLock::TimerLock() {
  const pid_t self = CurrentTid();
  if (g_timer_owner.load(std::memory_order_relaxed) == self) return;  // re-entered
  pthread_mutex_lock(&g_timer_mu);
  g_timer_owner.store(self, std::memory_order_relaxed);
  locked_ = true;
}

TimerLock::~TimerLock() {
  if (!locked_) return;
  g_timer_owner.store(0, std::memory_order_relaxed);
  pthread_mutex_unlock(&g_timer_mu);
}

// Owned as a TimerLock is: a signal handler that interrupts the fork on this
// thread and disarms the timers (an exit() from a SIGTERM handler) goes on
// as re-entered instead of waiting for itself for ever (hostile review,
// session 27).
void LockTimersForFork() {
  pthread_mutex_lock(&g_timer_mu);
  g_timer_owner.store(CurrentTid(), std::memory_order_relaxed);
}
void UnlockTimersAfterFork() {
  g_timer_owner.store(0, std::memory_order_relaxed);
  pthread_mutex_unlock(&g_timer_mu);
}
void ResetTimerLockInForkChild() {
  g_timer_mu = PTHREAD_MUTEX_INITIALIZER;
  g_timer_owner.store(0);
}

void ResolveThreadCreation() {
  g_behind_other_pthread_create = InternalPthreadCreate() != RealPthreadCreate();
}

// Seen by a sanitizer like any thread, never sampled (see
// t_starting_internal_thread).
int StartInternalThread(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                        void* arg) {
  // Every signal blocked from its first instruction: a thread inherits its
  // creator's mask, and until it blocked them itself a signal the program
  // blocks in all its threads (read with signalfd or sigwait) could be
  // delivered to dlprof's thread and kill the process (1 run in 10).
  sigset_t all, old;
  sigfillset(&all);
  RealPthreadSigmask(SIG_SETMASK, &all, &old);
  t_starting_internal_thread = true;
  const int rc = InternalPthreadCreate()(thread, attr, fn, arg);
  t_starting_internal_thread = false;
  RealPthreadSigmask(SIG_SETMASK, &old, nullptr);
  return rc;
}

bool Armed() { return g_state.phase() == Phase::kSampling; }

void ArmSlot(ThreadSlot* s) {
  TimerLock lock;
  if (!Armed() || s->timer.armed || s->sigprof_blocked.load(std::memory_order_relaxed) ||
      s->tsc_off.load(std::memory_order_relaxed)) {
    return;
  }
  // The first sample's weight counts from here (set before any signal can come).
  timespec cpu;
  // The thread's CPU clock (unsigned: shifting the negative ~tid is undefined).
  clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(s->tid.load()) << 3) | 6u);
  if (clock_gettime(clock, &cpu) == 0) {
    s->last_sample_cpu_ns.store(static_cast<int64_t>(cpu.tv_sec) * 1000000000 + cpu.tv_nsec,
                                std::memory_order_relaxed);
  }
  std::string error;
  if (!G->timer->ArmThread(s->tid.load(std::memory_order_relaxed), &s->timer, &error)) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) Warn("dlprof: cannot sample a thread: " + error);
  }
  // Sampling may have been switched off meanwhile by a signal handler on this
  // very thread (which could not take the lock we hold): undo.
  if (!Armed()) G->timer->DisarmThread(&s->timer);
}

// Registers the calling thread: a slot, its timer armed (unless an unprofiled
// baseline is running), and a key destructor to unregister it at thread exit.
// `prepare`: run the unwinder's warm-up here. Only the first thread of a
// process does: it binds the unwinder's lazily-bound symbols and creates its
// process-wide state; what is per thread (libunwind's trace cache) the
// thread's first sample builds. Warming every new thread cost ~80 us of CPU
// per pthread_create, 6-8x a bare create+join (bench/startup.sh).
// The calling thread's CPU clock, -1 if it cannot be read.
static int64_t OwnThreadCpuNs() {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

ThreadSlot* RegisterCurrentThread(bool prepare, const StackHint* hint) {
  pid_t tid = CurrentTid();
  ThreadSlot* s = ClaimSlot(tid, hint);
  if (s == nullptr) {
    t_unregistrable = true;
    return nullptr;
  }
  // On the slot's unwind stack, where the samples will run: libunwind's warm-up
  // walk takes more than a PTHREAD_STACK_MIN thread may have left.
  if (prepare) {
    RunOnStack(
        G->unwinder.get(), [](void* u) { static_cast<Unwinder*>(u)->PrepareThread(); },
        s->unwind_stack);
  }
  t_tid = tid;
  // Its wall time counts from here, not from the collector's first tick.
  s->born_cpu_ns.store(OwnThreadCpuNs(), std::memory_order_relaxed);
  s->born_ns.store(MonotonicNs(), std::memory_order_relaxed);
  PublishSlot(s);
  t_slot = s;
  if (Armed()) ArmSlot(s);
  pthread_setspecific(g_thread_key, s);
  return s;
}

// Thread exit: stop its timer first, then let the collector drain and free it.
void UnregisterThread(void* arg) {
  auto* s = static_cast<ThreadSlot*>(arg);
  t_slot = nullptr;
  // A child of a fork that ran no atfork handler: the slot is the parent's
  // live thread's (core/shared_arena.h).
  if (!ArenaOwned()) return;
  if (CurrentTid() == getpid()) g_main_thread_exited.store(true, std::memory_order_release);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  {
    TimerLock lock;
    G->timer->DisarmThread(&s->timer);
  }
  // Its wall time runs to here, not to the collector's last tick.
  s->exit_cpu_ns.store(OwnThreadCpuNs(), std::memory_order_relaxed);
  s->exit_ns.store(MonotonicNs(), std::memory_order_relaxed);
  s->state.store(kSlotExited, std::memory_order_release);
}

// Threads that already run when profiling starts (static constructors of other
// libraries may start some): armed by tid; they get their slot on first sample.
void RegisterExistingThreads() {
  DIR* d = OpendirOwn("/proc/self/task");
  if (d == nullptr) return;
  pid_t self = CurrentTid();
  while (dirent* e = readdir(d)) {
    pid_t tid = static_cast<pid_t>(atoi(e->d_name));
    if (tid <= 0 || tid == self || FindSlot(tid) != nullptr) continue;
    if (ThreadSlot* s = ClaimSlot(tid)) {
      PublishSlot(s);
      if (Armed()) ArmSlot(s);
    }
  }
  closedir(d);
}

// Over the slots ever claimed only (SlotLimit): touching all kMaxThreads of
// them cost a page fault each in a process that had not (~1% of a shell
// loop's CPU under dlprof, at every exit and exec).
void ArmAllLiveThreads() {
  for (int i = 0, limit = SlotLimit(); i < limit; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load(std::memory_order_acquire) == kSlotLive) ArmSlot(s);
  }
}

void DisarmAllLiveThreads() {
  TimerLock lock;
  if (!lock.locked()) {
    // A signal handler interrupted this thread inside ArmSlot: the collector
    // disarms at its next tick (and ArmSlot undoes its own arming).
    g_mailbox.Post(kRequestDisarm);
    return;
  }
  for (int i = 0, limit = SlotLimit(); i < limit; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load(std::memory_order_acquire) == kSlotLive) G->timer->DisarmThread(&s->timer);
  }
}

void DisarmForExec() {
  DisarmAllLiveThreads();
  if (G->timer->SurvivesExec()) G->timer->Stop();  // it would kill the new image
}

void RearmAfterFailedExec() {
  if (G->timer != nullptr && G->timer->SurvivesExec()) {
    std::string error;
    G->timer->Start(kProfilingSignal, G->config.hz, &error);
  }
  ArmAllLiveThreads();
}

// A process-wide timer (setitimer) is not stopped by disarming threads.
// (Its Stop() leaves an interval the program set itself alone.)
void StopProcessTimer() {
  if (G->timer != nullptr && !G->timer->PerThread()) G->timer->Stop();
}

bool StopSampling(OffReason reason) {
  if (!g_state.StepAside(reason, MonotonicNs())) return false;
  g_sampler.active.store(false, std::memory_order_seq_cst);
  if (G != nullptr && G->timer != nullptr) {
    DisarmAllLiveThreads();
    StopProcessTimer();
  }
  return true;
}

namespace {

// What a new thread needs from its creator. The records come from a fixed
// pool, so that the new thread gives its record back without free(): a
// thread's first free (or malloc) makes glibc create a malloc arena for it,
// 64 MiB of address space under RLIMIT_AS that the program's own thread would
// not have had (RELIABILITY.md). Past the pool (more threads starting at
// once than it holds), a record from new, which the new thread deletes.
struct ThreadStart {
  void* (*fn)(void*) = nullptr;  // every member initialized: the pool needs no dynamic initializer
  void* arg = nullptr;
  StackHint stack;
  std::atomic<bool> taken{false};  // a pool record in use
};
constexpr int kThreadStartPool = 64;
ThreadStart g_thread_starts[kThreadStartPool];

bool Pooled(const ThreadStart* s) {
  return s >= g_thread_starts && s < g_thread_starts + kThreadStartPool;
}

ThreadStart* NewThreadStart(void* (*fn)(void*), void* arg, const pthread_attr_t* attr) {
  ThreadStart* s = nullptr;
  for (ThreadStart& r : g_thread_starts) {
    if (!r.taken.load(std::memory_order_relaxed) &&
        !r.taken.exchange(true, std::memory_order_acquire)) {
      s = &r;
      break;
    }
  }
  if (s == nullptr && (s = new (std::nothrow) ThreadStart) == nullptr) return nullptr;
  s->fn = fn;
  s->arg = arg;
  s->stack = StackHintFor(attr);
  return s;
}

void FreeThreadStart(ThreadStart* s) {
  if (Pooled(s)) {
    s->taken.store(false, std::memory_order_release);
  } else {
    delete s;
  }
}

void* ThreadTrampoline(void* p) {
  auto* record = static_cast<ThreadStart*>(p);
  void* (*fn)(void*) = record->fn;
  void* arg = record->arg;
  const StackHint stack = record->stack;
  FreeThreadStart(record);
  // Not cancellable meanwhile: registering makes system calls that are
  // cancellation points (close), and a thread cancelled before it starts
  // would otherwise be unwound out of dlprof's half-done registration. A
  // pending cancel is acted on at the program's first cancellation point,
  // as without dlprof.
  int cancel_state = PTHREAD_CANCEL_ENABLE;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
  if (g_state.recording()) RegisterCurrentThread(/*prepare=*/false, &stack);
  pthread_setcancelstate(cancel_state, nullptr);
  return fn(arg);
}

// --- Program threads when another pthread_create comes before libdlprof's ---
//
// In a sanitized program linked with libdlprof, the sanitizer runtime comes
// first in the lookup order: the program's pthread_create reaches ASan's or
// TSan's interceptor, which wraps the start routine in its own thread start
// (which sets up the sanitizer's state for the thread) and calls its
// REAL(pthread_create): the interposer. A trampoline of ours would then run
// on the new thread *before* the sanitizer's thread start, where TSan has no
// state at all (any instrumented code crashes) and ASan has not yet cleared
// the stale poison of a reused stack. So the new thread runs no instrumented
// code of ours before the sanitizer's start: the creating thread registers
// it by tid (as threads that predate the session are), and the new thread's
// trampoline, uninstrumented, only hands its tid over, takes its slot into
// its thread-locals and sets the key whose destructor releases the slot. It
// skips Unwinder::PrepareThread (instrumented), like threads that predate the
// session: their unwinder caches are built by their first sample.
// pthread_create returns after that hand-over, so the handshake block lives on
// the creating thread's stack.

struct NestedStart {
  void* (*fn)(void*);  // the sanitizer's thread start (which calls the program's)
  void* arg;
  int tid = 0;         // new thread -> creator: the new thread's tid
  int registered = 0;  // creator -> new thread: `slot` and `full` are set
  ThreadSlot* slot = nullptr;
  bool full = false;   // no slot left (as in RegisterCurrentThread)
  int taken = 0;       // new thread -> creator: the block is not read any more
};

// Uninstrumented helpers for the handshake (the new thread has no sanitizer
// state yet): builtins, not std::atomic, and the futex by raw syscall.
#define DLPROF_UNINSTRUMENTED __attribute__((no_sanitize("address", "thread", "undefined")))

DLPROF_UNINSTRUMENTED void RaiseFlag(int* word, int value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
  RawSyscall6(SYS_futex, reinterpret_cast<long>(word), FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
}

DLPROF_UNINSTRUMENTED int AwaitFlag(int* word) {
  int value;
  while ((value = __atomic_load_n(word, __ATOMIC_ACQUIRE)) == 0) {
    RawSyscall6(SYS_futex, reinterpret_cast<long>(word), FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);
  }
  return value;
}

DLPROF_UNINSTRUMENTED void* NestedThreadTrampoline(void* p) {
  auto* start = static_cast<NestedStart*>(p);
  void* (*fn)(void*) = start->fn;
  void* arg = start->arg;
  const pid_t tid = gettid();
  RaiseFlag(&start->tid, tid);
  AwaitFlag(&start->registered);
  ThreadSlot* s = start->slot;
  const bool full = start->full;
  RaiseFlag(&start->taken, 1);  // from here on the block may be gone
  if (s != nullptr) {
    t_tid = tid;
    t_slot = s;
    // UnregisterThread at exit. The key was made by the library constructor,
    // so it is normally among a process's first 32, which glibc keeps in the
    // thread descriptor: setting it allocates nothing (a later key would make
    // glibc call calloc here, before the sanitizer's thread start).
    pthread_setspecific(g_thread_key, s);
  } else if (full) {
    t_unregistrable = true;
  }
  return fn(arg);
}

// The interposer, reached from the sanitizer's interceptor: creates the
// thread, registers it from here once it has said its tid, and returns when
// the thread has taken its slot. The new thread waits for nothing else, so
// this wait is short (the thread is runnable from the start).
int CreateBehindOtherPthreadCreate(PthreadCreateFn real, pthread_t* thread,
                                   const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  NestedStart start;
  start.fn = fn;
  start.arg = arg;
  const int rc = real(thread, attr, NestedThreadTrampoline, &start);
  if (rc != 0) return rc;
  const pid_t tid = AwaitFlag(&start.tid);
  if (g_state.recording()) {
    start.slot = ClaimSlot(tid);
    start.full = start.slot == nullptr;
    if (start.slot != nullptr) {
      start.slot->bounds = StackBoundsOf(*thread);
      PublishSlot(start.slot);
      if (Armed()) ArmSlot(start.slot);
    }
  }
  RaiseFlag(&start.registered, 1);
  AwaitFlag(&start.taken);
  return 0;
}

#undef DLPROF_UNINSTRUMENTED
}  // namespace

ThreadSlot* AdoptCurrentThread() {
  if (!g_state.recording() || t_unregistrable || !OwnSession()) {
    return nullptr;
  }
  if (ThreadSlot* s = FindSlot(CurrentTid())) {
    t_tid = s->tid.load();
    t_slot = s;
    return s;
  }
  return RegisterCurrentThread();
}

void PushEvent(ThreadSlot* s, uint64_t kind, uint32_t stage) {
  uint64_t pos = s->events.Reserve(2);
  if (pos == UINT64_MAX) {
    s->events_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  s->events.Put(pos, kind << 56 | stage);
  s->events.Put(pos + 1, static_cast<uint64_t>(MonotonicNs()));
  s->events.Commit(pos, 2);
}

int ProgramPthreadCreate(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                         void* arg) {
  auto real = RealPthreadCreate();
  if (t_starting_internal_thread || !g_state.recording() ||
      !OwnSession()) {
    return real(thread, attr, fn, arg);
  }
  if (g_behind_other_pthread_create) {
    return CreateBehindOtherPthreadCreate(real, thread, attr, fn, arg);
  }
  ThreadStart* start = NewThreadStart(fn, arg, attr);
  if (start == nullptr) return real(thread, attr, fn, arg);
  int rc = real(thread, attr, ThreadTrampoline, start);
  if (rc != 0) FreeThreadStart(start);
  return rc;
}

}  // namespace dlprof
