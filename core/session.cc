#include "core/session.h"

#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <dlprof/dlprof.h>
#include <dlprof/format.h>

#include "backends/timer_source.h"
#include "backends/unwinder.h"
#include "core/annotations.h"
#include "core/collector.h"
#include "core/config.h"
#include "core/exit_exec.h"
#include "core/fault_handler.h"
#include "core/hooks.h"
#include "core/proc_maps.h"
#include "core/python_bootstrap.h"
#include "core/python_frames.h"
#include "core/raw_syscall.h"
#include "core/signal_handler.h"
#include "core/signals.h"
#include "core/stack_switch.h"

namespace dlprof {

std::atomic<bool> g_session_started{false};
bool g_session_detailed = false;

namespace {


constexpr int kProfilingSignal = SIGPROF;

// Everything non-trivial lives on the heap, made by StartSession: the library
// constructor may run before this file's static initializers.
struct SessionGlobals {
  Config config;
  std::unique_ptr<Unwinder> unwinder;
  std::unique_ptr<Unwinder> fork_unwinder;  // frame pointers, while a fork is under way
  std::unique_ptr<TimerSource> timer;
  std::string run_id;
  std::string run_path;  // absolute: DLPROF_OUT/<run-id>
  std::string role = "main";
  // CPython in this process (core/python_frames.h): its version and whether
  // its frames are in samples. Empty when the process is not Python.
  std::string python_version, python_state;
};
SessionGlobals* G = nullptr;
Collector* g_collector = nullptr;  // replaced (the old one leaked) in a fork child
pthread_mutex_t g_collector_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_flush_requested{0};
std::atomic<uint64_t> g_flush_done{0};
// A futex word bumped after every store of g_flush_done and when the
// collector ends: RequestFlush sleeps on it (PublishFlushDone).
std::atomic<uint32_t> g_flush_seq{0};
// The run folder's identity: it is opened by its absolute path
// (G->run_path) whenever a file is made in it, and must be this folder.
dev_t g_run_dev = 0;
ino_t g_run_ino = 0;
int g_worker = -1;
int g_fork_seq = 0;   // in a child: its fork order among its parent's children
int g_forks = 0;      // children forked so far
// The unprofiled baseline's remaining steps (DLPROF_BASELINE_STEPS). With a
// baseline it lives in a MAP_SHARED page, so that forked workers, which never
// end a step themselves, see the training loop's count reach zero: each
// process's collector arms its own threads at its next tick after that.
std::atomic<int> g_baseline_local{0};
std::atomic<int>* g_baseline_remaining = &g_baseline_local;
// This process still waits for the baseline's end (its collector checks).
std::atomic<bool> g_waiting_for_baseline{false};
std::atomic<int> g_fatal_signal{0};  // SIGTERM/SIGINT/SIGPROF about to kill the process
// g_fatal_signal's value when the process ends by _exit() (no signal has it),
// and when dlprof steps aside before a seccomp filter goes in.
constexpr int kQuickExit = -1;
constexpr int kSeccompEnd = -2;
std::atomic<int> g_quick_exit_status{0};
// The process this session samples: a vfork() child runs in our memory and
// must not end or pause the parent's session.
std::atomic<pid_t> g_session_pid{0};
// An exec is about to replace this image: end the file now (END chunk, file
// kept open); g_rearm_pending re-arms the timers if the exec fails.
std::atomic<bool> g_exec_end_pending{false};
std::atomic<bool> g_rearm_pending{false};
pthread_key_t g_thread_key;
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
// before g_session_started.
bool g_behind_other_pthread_create = false;

// Sampling switched off for good in this process, and why.
enum OffReason : int {
  kSamplingOn = 0,
  kProgramSigprof,      // the program installed a SIGPROF handler (interposed sigaction/signal)
  kSigprofBehindBack,   // ... by a path the interposer does not see, noticed by the collector
  kSigprofBeforeStart,  // SIGPROF had a handler before dlprof started
  kOutputFailed,        // the profile cannot be written (disk full, file size limit)
  kNoUnwinder,          // a fork child that cannot use its unwinder, and no fallback
  kSeccompFilter,       // the program installs a seccomp filter (dlprof steps aside)
};
std::atomic<int> g_sampling_off{kSamplingOn};
std::atomic<int64_t> g_sampling_off_ns{0};
std::atomic<bool> g_sampling_off_recorded{false};  // in this process's profile already
std::atomic<bool> g_disarm_pending{false};         // the collector finishes a deferred disarm
std::atomic<bool> g_collector_running{false};
// The collector sleeps on this futex word between ticks; WakeCollector()
// bumps it, so a flush, an arm or a re-arm is served at once rather than at
// the next tick, which may be a slow one (CollectorMain).
std::atomic<uint32_t> g_collector_wake{0};
// dlprof_set_worker's id until the collector applies it (ApplyPendingWorker).
constexpr int kNoWorkerPending = INT32_MIN;
std::atomic<int> g_worker_pending{kNoWorkerPending};
// Set by the collector thread as it enters its own code (StartCollectorThread).
// A futex word: 1 once the collector runs its own code.
std::atomic<uint32_t> g_collector_entered{0};
std::atomic<pid_t> g_collector_tid{0};
// The collector leaves its loop (and its thread ends) for a moment in which
// the program needs to be single-threaded: unshare(CLONE_NEWUSER), setns.
std::atomic<bool> g_collector_pause{false};
// The main thread called pthread_exit(): when every other thread of the
// program has ended too, the collector ends the process as glibc would have
// at the last thread's exit (exit(0)), which its own presence prevents.
std::atomic<bool> g_main_thread_exited{false};

// Every arm and disarm of a thread timer happens under this lock (a thread
// exiting, the collector, a sigaction call stepping aside may race on one
// slot). The owner lets a signal handler that interrupted the holder (the
// program's, calling sigaction) see that it must not wait for it.
pthread_mutex_t g_timer_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<pid_t> g_timer_owner{0};

class TimerLock {
 public:
  TimerLock() {
    const pid_t self = CurrentTid();
    if (g_timer_owner.load(std::memory_order_relaxed) == self) return;  // re-entered
    pthread_mutex_lock(&g_timer_mu);
    g_timer_owner.store(self, std::memory_order_relaxed);
    locked_ = true;
  }
  ~TimerLock() {
    if (!locked_) return;
    g_timer_owner.store(0, std::memory_order_relaxed);
    pthread_mutex_unlock(&g_timer_mu);
  }
  bool locked() const { return locked_; }
  TimerLock(const TimerLock&) = delete;
  TimerLock& operator=(const TimerLock&) = delete;

 private:
  bool locked_ = false;
};

void Warn(const std::string& msg) {
  std::string line = msg + "\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

// A constant line: no allocation (callers may have every signal blocked, or
// run in a signal handler).
void WarnLine(const char* line) { (void)!write(STDERR_FILENO, line, strlen(line)); }

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

// Starts one of dlprof's own threads: seen by a sanitizer like any thread,
// never sampled (see t_starting_internal_thread). Not signal-safe.
int StartInternalThread(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                        void* arg) {
  t_starting_internal_thread = true;
  const int rc = InternalPthreadCreate()(thread, attr, fn, arg);
  t_starting_internal_thread = false;
  return rc;
}

// This function is safe to call from asynchronous signals.
void WakeFlushWaiters() {
  g_flush_seq.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &g_flush_seq, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void PublishFlushDone(uint64_t requested) {
  g_flush_done.store(requested, std::memory_order_release);
  WakeFlushWaiters();
}

bool Armed() {
  return g_baseline_remaining->load(std::memory_order_relaxed) <= 0 &&
         g_sampling_off.load(std::memory_order_seq_cst) == kSamplingOn;
}

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
ThreadSlot* RegisterCurrentThread(bool prepare = false) {
  pid_t tid = CurrentTid();
  ThreadSlot* s = ClaimSlot(tid);
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
  if (CurrentTid() == getpid()) g_main_thread_exited.store(true, std::memory_order_release);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  {
    TimerLock lock;
    G->timer->DisarmThread(&s->timer);
  }
  s->state.store(kSlotExited, std::memory_order_release);
}

// Threads that already run when profiling starts (static constructors of other
// libraries may start some): armed by tid; they get their slot on first sample.
void RegisterExistingThreads() {
  DIR* d = opendir("/proc/self/task");
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

void ArmAllLiveThreads() {
  for (int i = 0; i < kMaxThreads; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load(std::memory_order_acquire) == kSlotLive) ArmSlot(s);
  }
}

void SetProcessFields(Collector* c) {
  c->SetProcessField("pid", std::to_string(getpid()));
  c->SetProcessField("ppid", std::to_string(getppid()));
  c->SetProcessField("role", G->role);
  c->SetProcessField("worker", std::to_string(g_worker));
  c->SetProcessField("run_id", G->run_id);
  c->SetProcessField("hz", std::to_string(G->config.hz));
  c->SetProcessField("mode", ModeName(G->config.mode));
  // The CPUs this process may run on: the report's advice counts cores of the
  // profiled machine, not of the one that writes the report.
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
    c->SetProcessField("cpus", std::to_string(CPU_COUNT(&cpus)));
  }
  // The wall tick and snapshot period (a wall record may cover many ticks).
  c->SetProcessField("snapshot_ms", std::to_string(G->config.snapshot_ms));
  c->SetProcessField("unwinder", G->unwinder->name());
  c->SetProcessField("timer", G->timer->name());
  // Why "auto" settled on it (perf refused in a container, say).
  c->SetProcessField("timer_note", G->timer->note());
  c->SetProcessField("clock", "monotonic");
  c->SetProcessField("warmup_steps", std::to_string(G->config.warmup_steps));
  c->SetProcessField("baseline_steps", std::to_string(G->config.baseline_steps));
  timespec mono, real;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  c->SetProcessField("start_ns", std::to_string(mono.tv_sec * 1000000000LL + mono.tv_nsec));
  c->SetProcessField("start_unix_ns", std::to_string(real.tv_sec * 1000000000LL + real.tv_nsec));
  char comm[256] = {0};
  if (FILE* f = fopen("/proc/self/cmdline", "re")) {
    size_t n = fread(comm, 1, sizeof(comm) - 1, f);
    for (size_t i = 0; i + 1 < n; ++i) if (comm[i] == '\0') comm[i] = ' ';
    fclose(f);
  }
  c->SetProcessField("command", comm);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  c->SetProcessField("host", host);
  if (!G->python_version.empty()) {
    c->SetProcessField("python", G->python_version);
    c->SetProcessField("python_frames", G->python_state);
  }
}

// The run folder, opened for the moment it takes to create a file in it (no
// descriptor of dlprof's stays in the program's table), and only if it is
// still the folder made at start. -1 if not.
int OpenRunDir() {
  const int fd = open(G->run_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != g_run_dev || st.st_ino != g_run_ino)) {
    close(fd);
    return -1;
  }
  return fd;
}

// Creates <role>-<pid>.dlprof in the run folder, never overwriting (an exec'd
// image with the same pid gets a numbered name).
Collector* OpenCollector() {
  auto* c = new Collector();
  std::string error = "the run folder " + G->run_path + " is gone or was replaced";
  const int dir_fd = OpenRunDir();
  if (dir_fd < 0) {
    Warn("dlprof: " + error + "; profiling off for this process");
    delete c;
    return nullptr;
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = G->role + "-" + std::to_string(getpid()) +
                       (attempt ? "." + std::to_string(attempt) : "") + ".dlprof";
    if (c->Open(dir_fd, G->run_path, name, &error)) {
      close(dir_fd);
      SetProcessFields(c);
      c->WriteProcessChunk();
      return c;
    }
    if (errno != EEXIST) break;
  }
  close(dir_fd);
  Warn("dlprof: " + error + "; profiling off for this process");
  delete c;
  return nullptr;
}

// Records a pending dlprof_set_worker in the profile. Collector lock held.
void ApplyPendingWorker(Collector* c) {
  const int id = g_worker_pending.exchange(kNoWorkerPending);
  if (id == kNoWorkerPending) return;
  g_worker = id;
  G->role = "worker";
  c->SetProcessField("worker", std::to_string(id));
  c->SetProcessField("role", "worker");
}

// This function is safe to call from asynchronous signals (errno kept).
void WakeCollector() {
  const int saved_errno = errno;
  g_collector_wake.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &g_collector_wake, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  errno = saved_errno;
}

// Sleeps until `deadline` (CLOCK_MONOTONIC ns) or a WakeCollector() after
// the word read `seen`. Returns whether it was woken before the deadline.
bool CollectorSleep(int64_t deadline, uint32_t seen) {
  const timespec ts{static_cast<time_t>(deadline / 1000000000), static_cast<long>(deadline % 1000000000)};
  for (;;) {
    if (g_collector_wake.load(std::memory_order_acquire) != seen) return true;
    if (MonotonicNs() >= deadline) return false;
    // FUTEX_WAIT_BITSET: an absolute CLOCK_MONOTONIC deadline, so EINTR and
    // spurious returns just go round again.
    syscall(SYS_futex, &g_collector_wake, FUTEX_WAIT_BITSET_PRIVATE, seen, &ts, nullptr,
            FUTEX_BITSET_MATCH_ANY);
  }
}

void DisarmAllLiveThreads() {
  TimerLock lock;
  if (!lock.locked()) {
    // A signal handler interrupted this thread inside ArmSlot: the collector
    // disarms at its next tick (and ArmSlot undoes its own arming).
    g_disarm_pending.store(true);
    WakeCollector();
    return;
  }
  for (int i = 0; i < kMaxThreads; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load(std::memory_order_acquire) == kSlotLive) G->timer->DisarmThread(&s->timer);
  }
}

// A process-wide timer (setitimer) is not stopped by disarming threads.
// (Its Stop() leaves an interval the program set itself alone.)
void StopProcessTimer() {
  if (G->timer != nullptr && !G->timer->PerThread()) G->timer->Stop();
}

// Switches sampling off for good (first reason wins); false if it already was.
// Async-signal-safe apart from the timer lock (see TimerLock).
bool StopSampling(OffReason reason) {
  int expected = kSamplingOn;
  if (!g_sampling_off.compare_exchange_strong(expected, reason)) return false;
  g_sampler.active.store(false, std::memory_order_seq_cst);
  g_sampling_off_ns.store(MonotonicNs());
  if (G != nullptr && G->timer != nullptr) {
    DisarmAllLiveThreads();
    StopProcessTimer();
  }
  return true;
}

const char* OffReasonText(int reason) {
  switch (reason) {
    case kProgramSigprof: return "off: the program installed its own SIGPROF handler";
    case kSigprofBehindBack: return "off: the program replaced dlprof's SIGPROF handler";
    case kSigprofBeforeStart: return "off: SIGPROF had a handler before dlprof started";
    case kOutputFailed: return "off: the profile could not be written";
    case kNoUnwinder: return "off: no unwinder usable in this fork child";
    case kSeccompFilter: return "off: the program installed a seccomp filter";
    default: return "on";
  }
}

// Puts "sampling is off, and why" into the profile once (collector lock held).
void RecordSamplingOff(Collector* c) {
  const int reason = g_sampling_off.load();
  if (reason == kSamplingOn || reason == kOutputFailed || g_sampling_off_recorded.exchange(true)) {
    return;
  }
  c->SetProcessField("cpu_sampling", OffReasonText(reason));
  c->SetProcessField("cpu_sampling_off_ns", std::to_string(g_sampling_off_ns.load()));
}

// True when every thread of the process but the calling one (the collector)
// has ended: gone, or a zombie (the main thread after pthread_exit).
bool NoProgramThreadLeft() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return false;
  const pid_t self = CurrentTid();
  bool none = true;
  while (dirent* e = readdir(d)) {
    const pid_t tid = static_cast<pid_t>(atoi(e->d_name));
    if (tid <= 0 || tid == self) continue;
    const char state = ThreadState(tid);
    if (state != 0 && state != 'Z' && state != 'X') {  // 0: gone meanwhile
      none = false;
      break;
    }
  }
  closedir(d);
  return none;
}

// What glibc does when the process's last thread returns or calls
// pthread_exit: exit(0), which runs the atexit handlers (dlprof's among them)
// and flushes stdio. Here on the collector, with the program's signals open
// to it as they would be to a program thread.
[[noreturn]] void EndProcessAsLastThread() {
  sigset_t none;
  sigemptyset(&none);
  RealPthreadSigmask(SIG_SETMASK, &none, nullptr);
  exit(0);
}

void* CollectorMain(void*) {
  g_collector_tid.store(CurrentTid(), std::memory_order_relaxed);
  g_collector_entered.store(1, std::memory_order_release);
  syscall(SYS_futex, &g_collector_entered, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  sigset_t all;
  sigfillset(&all);
  RealPthreadSigmask(SIG_BLOCK, &all, nullptr);  // signals go to the program's threads
  // The tick period. Each wake-up costs ~60-90 us of CPU on a VM (a bare
  // 100 Hz sleep loop is 1.2% of a core there: BENCHMARKS.md), so in light
  // mode the collector ticks kSlowTickFactor times less often once every
  // thread has been steady (running the whole tick, or blocked all of it, in
  // the same stage) for kSteadyTicksBeforeSlow ticks and no buffer exists,
  // and goes back to the fast period at the first tick that sees a change.
  // Wall records carry their own wall time, so only the resolution of the
  // stage attribution of a steady thread's wall time is coarser meanwhile;
  // its CPU samples keep their rate. Detailed mode always ticks fast.
  constexpr int kSlowTickFactor = 5;
  constexpr int kSteadyTicksBeforeSlow = 10;
  const int64_t fast_period = G->config.snapshot_ms * 1000000LL;
  const int64_t slow_period = G->config.mode == Mode::kLight ? fast_period * kSlowTickFactor : fast_period;
  int steady_ticks = 0;
  int64_t next = MonotonicNs();
  int64_t last_flush = next;
  // Each interval is drawn uniformly from 0.5 to 1.5 periods. On a fixed grid
  // the ticks alias with a program that repeats itself every period: rt_workload's
  // 1/3/6 ms cycle of stages a/b/c came out 100% c (or 100% a) in wall time.
  // With independent intervals the phase at a tick is independent of the
  // interval it closes, so neither the state it samples nor the wall time it
  // weighs that state with is biased; the mean rate is unchanged.
  uint64_t rng = static_cast<uint64_t>(next) ^ (static_cast<uint64_t>(getpid()) << 32) ^ 0x9e3779b97f4a7c15ULL;
  while (!g_stop.load(std::memory_order_acquire) &&
         !g_collector_pause.load(std::memory_order_acquire)) {
    const uint32_t wake_seen = g_collector_wake.load(std::memory_order_acquire);
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;  // xorshift64
    const int64_t period = steady_ticks >= kSteadyTicksBeforeSlow ? slow_period : fast_period;
    next += period / 2 + static_cast<int64_t>(rng % static_cast<uint64_t>(period + 1));
    int64_t now = MonotonicNs();
    if (next < now) next = now;  // fell behind (suspended): don't burst
    // The once-a-second flush is never later for a slow tick.
    if (CollectorSleep(std::min(next, std::max<int64_t>(now, last_flush + 1000000000LL)), wake_seen)) {
      next = MonotonicNs();  // woken for a request: the next tick is a period from now
      steady_ticks = 0;
    }
    // A SIGPROF handler installed around the interposer (sigset(), a raw
    // syscall): step aside within a tick. Not under the collector lock (the
    // check takes the signal views' lock, which fork takes first).
    SigprofTakenBehindOurBack();
    if (FaultHandlerLost()) {
      // Python frames need dlprof's fault handler; CPU samples go on without them.
      StopPythonFrames();
      G->python_state = "off: the program replaced dlprof's SIGSEGV/SIGBUS handler";
      WarnLine("dlprof: SIGSEGV/SIGBUS handler replaced by the program; Python frames off\n");
      pthread_mutex_lock(&g_collector_mu);
      if (g_collector != nullptr) g_collector->SetProcessField("python_frames", G->python_state);
      pthread_mutex_unlock(&g_collector_mu);
    }
    pthread_mutex_lock(&g_collector_mu);
    if (g_stop.load(std::memory_order_acquire) || g_collector == nullptr) {
      pthread_mutex_unlock(&g_collector_mu);
      break;
    }
    now = MonotonicNs();
    if (g_disarm_pending.exchange(false)) DisarmAllLiveThreads();
    if (g_waiting_for_baseline.load() && g_baseline_remaining->load() <= 0) {
      g_waiting_for_baseline.store(false);  // the baseline ended (here or in the parent)
      g_collector->SetProcessField("sampling_start_ns", std::to_string(now));
      ArmAllLiveThreads();
    }
    RecordSamplingOff(g_collector);
    ApplyPendingWorker(g_collector);
    steady_ticks = g_collector->SnapshotTick(now) ? 0 : steady_ticks + 1;
    g_collector->Drain();
    if (g_main_thread_exited.load(std::memory_order_acquire) && NoProgramThreadLeft()) {
      pthread_mutex_unlock(&g_collector_mu);
      EndProcessAsLastThread();
    }
    uint64_t requested = g_flush_requested.load(std::memory_order_acquire);
    if (int signo = g_fatal_signal.load(std::memory_order_acquire); signo != 0) {
      // The process is about to die of a signal it does not handle, or to
      // _exit(): end the file properly (END chunk), then release the waiter.
      g_sampler.active.store(false);
      g_session_started.store(false);
      g_stop.store(true, std::memory_order_release);
      DisarmAllLiveThreads();
      g_collector->SetProcessField(
          "end", signo == kQuickExit    ? "_exit " + std::to_string(g_quick_exit_status.load())
                 : signo == kSeccompEnd ? std::string("seccomp")
                                        : "signal " + std::to_string(signo));
      g_collector->Finish(now);
      PublishFlushDone(requested);
      pthread_mutex_unlock(&g_collector_mu);
      break;
    }
    if (g_rearm_pending.exchange(false)) {  // an exec failed: sample again
      if (G->timer != nullptr && G->timer->SurvivesExec()) {
        std::string error;
        G->timer->Start(kProfilingSignal, G->config.hz, &error);
      }
      ArmAllLiveThreads();
    }
    const bool exec_end = g_exec_end_pending.exchange(false);
    if (exec_end) {
      DisarmAllLiveThreads();
      if (G->timer->SurvivesExec()) G->timer->Stop();  // it would kill the new image
      g_collector->SetProcessField("end", "exec");
    }
    if (now - last_flush >= 1000000000LL || requested != g_flush_done.load() || exec_end) {
      if (!g_collector->Flush() || (exec_end && !g_collector->WriteEnd(now))) {
        // Disk full, file size limit, I/O error: Flush said so in one line.
        // Nothing more can be kept, so nothing more is collected: timers
        // disarmed, this thread ends, annotations fall back to a branch.
        StopSampling(kOutputFailed);
        g_session_started.store(false);
        PublishFlushDone(requested);
        pthread_mutex_unlock(&g_collector_mu);
        break;
      }
      last_flush = now;
      PublishFlushDone(requested);
    }
    pthread_mutex_unlock(&g_collector_mu);
  }
  g_collector_running.store(false);
  WakeFlushWaiters();  // a waiter need not wait for an answer that cannot come
  return nullptr;
}

bool StartCollectorThread() {
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  g_collector_running.store(true);
  g_collector_entered.store(0);
  int rc = StartInternalThread(&thread, &attr, CollectorMain, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    g_collector_running.store(false);
    return false;
  }
  // Returns once the thread runs CollectorMain (at most 1 s), i.e. once the
  // sanitizer's thread start, if any, is over. ASan's allocates (its thread
  // start runs pthread_getattr_np, which frees), and a fork() right after
  // start (a program that forks its workers at once) copied its allocator
  // lock held into the child, whose own collector then waited for it for
  // ever. Past this point the collector does its work under g_collector_mu,
  // which LockForFork holds across fork().
  // (A futex, not a sleep loop: each sleep of 100 us took up to a
  // millisecond on a VM, at every process start.)
  const int64_t deadline = MonotonicNs() + 1000000000LL;
  while (g_collector_entered.load(std::memory_order_acquire) == 0) {
    const int64_t left = deadline - MonotonicNs();
    if (left <= 0) break;
    const timespec wait{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    syscall(SYS_futex, &g_collector_entered, FUTEX_WAIT_PRIVATE, 0, &wait, nullptr, 0);
  }
  return true;
}

// Stops sampling and writes the rest of the file (normal exit, or a fatal
// signal that the program does not handle).
bool OwnSession();

void FinishSession(const char* how) {
  // A child made by _Fork() or a raw fork syscall ran no atfork handler: it
  // still has the parent's session, file and rings (copies), which are not
  // its to end, write or drain.
  if (!OwnSession()) return;
  if (!g_session_started.exchange(false)) return;
  g_sampler.active.store(false);
  // Bounded: a collector stuck in a write to a hung file system (or in a
  // loader lock a fork child inherited held) must not hang the exit.
  timespec deadline;
  if (t_clock_by_syscall) {  // PR_SET_TSC: the vDSO would fault
    RawSyscall6(SYS_clock_gettime, CLOCK_REALTIME, reinterpret_cast<long>(&deadline), 0, 0, 0, 0);
  } else {
    clock_gettime(CLOCK_REALTIME, &deadline);
  }
  deadline.tv_sec += 2;
  if (pthread_mutex_timedlock(&g_collector_mu, &deadline) != 0) {
    DisarmAllLiveThreads();
    return;
  }
  g_stop.store(true, std::memory_order_release);
  DisarmAllLiveThreads();
  if (g_collector != nullptr) {
    RecordSamplingOff(g_collector);
    ApplyPendingWorker(g_collector);
    g_collector->SetProcessField("end", how);
    g_collector->Finish(MonotonicNs());
  }
  pthread_mutex_unlock(&g_collector_mu);
}

void OnExit() { FinishSession("exit"); }

// Whether this process is the one the session samples (not a vfork child
// sharing its memory). This function is safe to call from asynchronous signals.
bool OwnSession() {
  return g_session_started.load() && g_session_pid.load(std::memory_order_relaxed) == getpid();
}

// Ends the process by `signo`'s default action, as it would have ended
// without dlprof. From a handler of `signo` (blocked there) the raise stays
// pending until the handler returns. This function is safe to call from
// asynchronous signals.
void DieOfDefault(int signo) {
  ReleaseSignal(signo);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  RealSigaction(signo, &dfl, nullptr);
  raise(signo);
}

// SIGTERM / SIGINT when the program has no handler of its own: write the
// profile (bounded wait), then die of the signal as the program would have.
void OnTerminationSignal(int signo) {
  const int saved_errno = errno;
  if (OwnSession()) {
    g_sampler.active.store(false);
    int expected = 0;
    g_fatal_signal.compare_exchange_strong(expected, signo);
    RequestFlush(1000);  // only atomics and nanosleep: signal-safe
  }
  DieOfDefault(signo);
  errno = saved_errno;
}

void InstallTerminationHandlers() {
  for (int signo : {SIGTERM, SIGINT}) {
    struct sigaction old {};
    if (RealSigaction(signo, nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = OnTerminationSignal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, signo);
    sa.sa_flags = SA_RESTART;
    // The program still sees SIG_DFL when it asks (core/signals.h).
    if (RealSigaction(signo, &sa, nullptr) == 0) {
      OwnSignal(signo, old, reinterpret_cast<void*>(OnTerminationSignal));
    }
  }
}

// A SIGPROF dlprof did not send (raise, kill, the program's own timer) while
// the program's view of SIGPROF is SIG_DFL or SIG_IGN: do what that view
// says. Ignored: nothing. Default: the process ends, as it would have
// without dlprof (the profile is ended first, bounded, as for SIGTERM).
// This function is safe to call from asynchronous signals.
void OnForeignSigprof(int signo, siginfo_t*, void*) {
  if (!OwnsSignal(signo)) return;
  if (ProgramSigprofDisposition() == SIG_IGN) return;
  if (OwnSession()) {
    g_sampler.active.store(false);
    int expected = 0;
    g_fatal_signal.compare_exchange_strong(expected, signo);
    RequestFlush(1000);
  }
  DieOfDefault(signo);
}

// No sample may be inside libunwind on another thread when fork() copies the
// process: it could hold libunwind's lock, which the child would then inherit
// held, with no thread to release it. While the fence is up, new samples
// unwind by frame pointers (no lock, no loader); this waits (bounded) for
// the ones already running.
// Samples never wait (the loader is only tried, see proc_maps.h), so this
// takes microseconds; the bound is for a handler preempted on a crowded
// machine. If it runs out, the child cannot trust libunwind's lock and
// unwinds by frame pointers (ResetInForkChild).
bool g_fence_timed_out = false;  // for the child: read right after fork
__thread int64_t t_fence_start_ns __attribute__((tls_model("initial-exec"))) = 0;
void FenceSignalHandlers() {
  t_fence_start_ns = MonotonicNs();
  g_sampler.fork_fence.fetch_add(1, std::memory_order_seq_cst);
  ThreadSlot* self = t_slot;
  g_fence_timed_out = true;
  for (int round = 0; round < 20000; ++round) {  // at most ~2 s
    bool busy = false;
    for (int i = 0; i < kMaxThreads && !busy; ++i) {
      ThreadSlot* s = SlotAt(i);
      busy = s != self && s->in_handler.load(std::memory_order_seq_cst) != 0;
    }
    if (!busy) {
      g_fence_timed_out = false;
      return;
    }
    const timespec pause{0, 100000};
    nanosleep(&pause, nullptr);
  }
}

// Every dlprof lock is held across fork(), so the child gets each of them
// free and its data consistent: the stage and buffer tables (a child interns
// stages too), the collector, the timers.
void LockForFork() {
  LockAnnotationsForFork();
  pthread_mutex_lock(&g_collector_mu);
  pthread_mutex_lock(&g_timer_mu);
  g_fork_seq = g_forks++;
  // Last: concurrent forks queue on the locks above, and the fence should
  // only cover this fork's own clone.
  FenceSignalHandlers();
}

void UnlockAfterFork() {
  pthread_mutex_unlock(&g_timer_mu);
  pthread_mutex_unlock(&g_collector_mu);
  UnlockAnnotationsAfterFork();
  g_sampler.fork_fence.fetch_sub(1, std::memory_order_seq_cst);
  g_sampler.fork_fence_ns.fetch_add(static_cast<uint64_t>(MonotonicNs() - t_fence_start_ns),
                                    std::memory_order_relaxed);
}

// In a fork()ed child: only the forking thread survives. Forget the parent's
// threads, timers, pending samples and file; start this process's own profile.
void ResetInForkChild() {
  g_collector_mu = PTHREAD_MUTEX_INITIALIZER;
  g_timer_mu = PTHREAD_MUTEX_INITIALIZER;
  g_timer_owner.store(0);
  UnlockAnnotationsAfterFork();
  ResetSignalLockInForkChild();
  g_sampler.fork_fence.store(0);
  g_collector_running.store(false);
  g_sampling_off_recorded.store(false);
  g_disarm_pending.store(false);
  g_worker_pending.store(kNoWorkerPending);  // the parent's call, not ours
  if (!g_session_started.load()) return;
  if (g_collector != nullptr) g_collector->Abandon();  // the parent's; leaked on purpose
  g_collector = nullptr;
  ThreadSlot* self = t_slot;
  for (int i = 0; i < kMaxThreads; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load() == kSlotFree) continue;
    G->timer->ForgetInherited(&s->timer);
    if (s != self) {
      ResetSlot(s);
      s->state.store(kSlotFree);
    }
  }
  g_sampler.dropped_nothread.store(0);
  g_sampler.fork_samples.store(0);
  g_sampler.fork_fence_ns.store(0);
  g_session_pid.store(getpid(), std::memory_order_relaxed);
  g_exec_end_pending.store(false);
  g_rearm_pending.store(false);
  ResetBufferStats();
  ResetAnnotationCounters();
  // Forked while another thread held the loader's lock: it stays held here.
  // libunwind would wait for it forever from the signal handler on its next
  // lookup; frame pointers need no loader.
  const bool loader_held = LoaderLockInheritedHeld();
  if (loader_held || g_fence_timed_out) {
    if (loader_held) MarkLoaderUnusable();
    std::string fp_error;
    if (std::unique_ptr<Unwinder> fp = MakeUnwinder("fp", &fp_error)) {
      G->unwinder = std::move(fp);
      g_sampler.unwinder = G->unwinder.get();
      g_sampler.fork_unwinder = G->unwinder.get();
    } else {
      StopSampling(kNoUnwinder);
    }
  }
  G->role = "worker";
  g_worker = g_fork_seq;
  std::string error;
  if (!G->timer->Start(kProfilingSignal, G->config.hz, &error)) {
    Warn("dlprof: forked child cannot restart its timer: " + error);
    g_session_started.store(false);
    return;
  }
  if (self != nullptr) {
    ResetSlot(self);
    t_tid = CurrentTid();
    self->tid.store(t_tid);
    self->timer = ThreadTimer{};
  }
  g_collector = OpenCollector();
  if (g_collector == nullptr) {
    g_sampler.active.store(false);
    g_session_started.store(false);
    return;
  }
  if (loader_held) {
    g_collector->SetProcessField("loader_lock",
                                 "inherited held at fork: frame-pointer stacks, no build-ids");
  } else if (g_fence_timed_out) {
    g_collector->SetProcessField("fork_fence",
                                 "a sample was still being taken at fork: frame-pointer stacks");
  }
  if (self != nullptr && Armed()) ArmSlot(self);
  StartCollectorThread();
}

bool ValidRunId(const char* id) {
  if (id == nullptr || *id == '\0' || strlen(id) > 128) return false;
  if (strcmp(id, ".") == 0 || strcmp(id, "..") == 0) return false;
  return strchr(id, '/') == nullptr;
}

// Opens (creating 0700 if needed) DLPROF_OUT and the run folder inside it,
// never following a symlink. All processes of a run share DLPROF_RUN_ID.
bool OpenRunFolder(bool* is_main) {
  // Absolute, and so in the environment too: a worker spawned after the
  // program changed its folder must find the same run.
  if (!G->config.out_dir.empty() && G->config.out_dir[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) {
      Warn("dlprof: cannot resolve the relative DLPROF_OUT " + G->config.out_dir +
           " (no current folder); profiling off");
      return false;
    }
    G->config.out_dir = std::string(cwd) + "/" + G->config.out_dir;
    setenv("DLPROF_OUT", G->config.out_dir.c_str(), 1);
  }
  const std::string& out = G->config.out_dir;
  // Missing parents are made too (0700, like the folder itself).
  for (size_t slash = out.find('/', 1); slash != std::string::npos; slash = out.find('/', slash + 1)) {
    mkdir(out.substr(0, slash).c_str(), 0700);
  }
  if (mkdir(out.c_str(), 0700) != 0 && errno != EEXIST) {
    Warn("dlprof: cannot create DLPROF_OUT folder " + out + ": " + strerror(errno) +
         "; profiling off");
    return false;
  }
  struct stat st;
  if (lstat(out.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    // Following it could let whoever controls the link redirect the profile.
    Warn("dlprof: DLPROF_OUT " + out + " is a symlink: refused; profiling off");
    return false;
  }
  int out_fd = open(out.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (out_fd < 0) {
    Warn("dlprof: DLPROF_OUT " + out + " cannot be opened as a folder (" + strerror(errno) +
         "); profiling off");
    return false;
  }
  if (fstat(out_fd, &st) == 0 && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
    Warn("dlprof: DLPROF_OUT " + out + " is writable by every user: refused; profiling off");
    close(out_fd);
    return false;
  }
  const char* inherited = getenv("DLPROF_RUN_ID");
  const char* main_pid = getenv("DLPROF_RUN_MAIN_PID");
  bool joining = ValidRunId(inherited);
  if (joining) {
    G->run_id = inherited;
    *is_main = main_pid != nullptr && atoi(main_pid) == getpid();  // exec'd in place
  } else {
    char id[64];
    time_t now = time(nullptr);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t n = strftime(id, sizeof(id), "%Y%m%d-%H%M%S", &tm);
    snprintf(id + n, sizeof(id) - n, "-%d", getpid());
    G->run_id = id;
    *is_main = true;
    setenv("DLPROF_RUN_ID", G->run_id.c_str(), 1);
    setenv("DLPROF_RUN_MAIN_PID", std::to_string(getpid()).c_str(), 1);
  }
  const bool created = mkdirat(out_fd, G->run_id.c_str(), 0700) == 0;
  if (!created && errno != EEXIST) {
    Warn("dlprof: cannot create run folder " + out + "/" + G->run_id + ": " + strerror(errno) +
         "; profiling off");
    close(out_fd);
    return false;
  }
  const int run_fd =
      openat(out_fd, G->run_id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  G->run_path = out + "/" + G->run_id;
  if (run_fd >= 0 && created && *is_main) {
    // "latest" names the newest run; replaced atomically.
    std::string tmp = ".latest." + std::to_string(getpid());
    if (symlinkat(G->run_id.c_str(), out_fd, tmp.c_str()) == 0 &&
        renameat(out_fd, tmp.c_str(), out_fd, "latest") != 0) {
      unlinkat(out_fd, tmp.c_str(), 0);
    }
  }
  close(out_fd);
  if (run_fd < 0) {
    Warn("dlprof: cannot open run folder " + out + "/" + G->run_id + ": " + strerror(errno) +
         "; profiling off");
    return false;
  }
  // The run folder's name is predictable: one made in advance by another user
  // (or left open to others) could take or swap our files.
  const bool stat_ok = fstat(run_fd, &st) == 0;
  close(run_fd);
  if (!stat_ok || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    Warn("dlprof: run folder " + out + "/" + G->run_id +
         (!stat_ok                 ? " cannot be examined"
          : st.st_uid != geteuid() ? " is owned by another user"
                                   : " is writable by other users") +
         ": refused; profiling off");
    return false;
  }
  g_run_dev = st.st_dev;
  g_run_ino = st.st_ino;
  return true;
}

void StartSession() {
  // The interposed sigaction()/signal() forward to these even when profiling
  // is off: resolve them now, not in some signal handler later.
  ResolveSignalFunctions();
  ResolveExecFunctions();
  ResolveProcessCalls();
  G = new SessionGlobals();
  G->config = ParseConfig([](const char* name) { return getenv(name); }, Warn);
  if (!G->config.enabled) return;
  // Resolve both now, before any thread can race on them, and so that a fork
  // child (which restarts its collector) never calls dlsym: it may have
  // inherited the loader's lock held. Whether another pthread_create comes
  // first decides how program threads are registered (the interposer).
  g_behind_other_pthread_create = InternalPthreadCreate() != RealPthreadCreate();

  std::string error;
  G->unwinder = MakeUnwinder(G->config.unwinder, &error);
  if (!G->unwinder) {
    Warn("dlprof: unwinder '" + G->config.unwinder + "' unavailable (" + error + "); using fp");
    G->unwinder = MakeUnwinder("fp", &error);
    if (!G->unwinder) return;
  }
  G->timer = MakeTimerSource(G->config.timer, &error);
  if (!G->timer || !G->timer->Start(kProfilingSignal, G->config.hz, &error)) {
    if (G->config.timer != "auto") {
      Warn("dlprof: timer '" + G->config.timer + "' unavailable (" + error + "); using auto");
      G->timer = MakeTimerSource("auto", &error);
    }
    if (!G->timer || !G->timer->Start(kProfilingSignal, G->config.hz, &error)) {
      Warn("dlprof: no timer source works here (" + error + "); profiling off");
      return;
    }
  }
  bool is_main = true;
  if (!OpenRunFolder(&is_main)) return;
  FindLoaderLock();
  G->role = is_main ? "main" : "worker";
  g_session_detailed = G->config.mode == Mode::kDetailed;
  if (G->config.baseline_steps > 0) {
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED) g_baseline_remaining = new (page) std::atomic<int>(0);
    g_waiting_for_baseline.store(true);
  }
  g_baseline_remaining->store(G->config.baseline_steps);

  g_collector = OpenCollector();
  if (g_collector == nullptr) return;

  g_sampler.unwinder = G->unwinder.get();
  if (G->unwinder->HoldsLocks()) G->fork_unwinder = MakeUnwinder("fp", &error);
  g_sampler.fork_unwinder = G->fork_unwinder ? G->fork_unwinder.get() : G->unwinder.get();
  g_sampler.timer = G->timer.get();
  g_sampler.weigh_by_cpu_time = G->timer->CpuTimeWeighted();
  g_sampler.period_ns = 1000000000LL / G->config.hz;
  g_sampler.max_frames = G->config.max_frames < kMaxFrames ? G->config.max_frames : kMaxFrames;
  g_sampler.on_foreign = OnForeignSigprof;
  // A SIGPROF handler that was there first (a library constructor, the
  // program's .preinit_array, gperftools' profiler) keeps SIGPROF: no
  // sampling in this process, everything else as usual.
  struct sigaction prof_before {};
  RealSigaction(kProfilingSignal, nullptr, &prof_before);
  if (prof_before.sa_handler != SIG_DFL && prof_before.sa_handler != SIG_IGN) {
    g_sampling_off.store(kSigprofBeforeStart);
    g_sampling_off_ns.store(MonotonicNs());
    WarnLine(
        "dlprof: SIGPROF already has a handler (installed before dlprof started); CPU sampling "
        "off for this process (stages, steps, buffers and wall time still recorded)\n");
  } else if (!InstallSignalHandler(kProfilingSignal)) {
    Warn("dlprof: cannot install the SIGPROF handler; profiling off");
    return;
  } else {
    OwnSignal(kProfilingSignal, prof_before, reinterpret_cast<void*>(HandleProfilingSignal));
  }
  if (g_sampling_off.load() == kSamplingOn &&
      StartPythonFrames(&G->python_version, &G->python_state)) {
    g_collector->SetProcessField("python", G->python_version);
    g_collector->SetProcessField("python_frames", G->python_state);
    if (G->python_state != "on") {
      WarnLine(("dlprof: Python " + G->python_version + " frames " + G->python_state +
                "; native frames only\n").c_str());
    }
  }
  pthread_key_create(&g_thread_key, UnregisterThread);
  pthread_atfork(LockForFork, UnlockAfterFork, ResetInForkChild);
  g_sampler.active.store(g_sampling_off.load() == kSamplingOn);
  g_session_pid.store(getpid(), std::memory_order_relaxed);
  g_session_started.store(true);
  RegisterCurrentThread(/*prepare=*/true);
  RegisterExistingThreads();
  if (G->config.baseline_steps == 0) {
    g_collector->SetProcessField("sampling_start_ns", std::to_string(MonotonicNs()));
  }
  // Still single-threaded (setenv), and before Py_Initialize reads PYTHONPATH.
  const std::string annotations = PreparePythonBootstrap(G->config.auto_annotate);
  if (!annotations.empty()) g_collector->SetProcessField("python_annotations", annotations);
  StartCollectorThread();
  atexit(OnExit);
  InstallTerminationHandlers();
}

struct ThreadStart {
  void* (*fn)(void*);
  void* arg;
};

void* ThreadTrampoline(void* p) {
  ThreadStart start = *static_cast<ThreadStart*>(p);
  delete static_cast<ThreadStart*>(p);
  if (g_session_started.load(std::memory_order_acquire)) RegisterCurrentThread();
  return start.fn(start.arg);
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
  if (g_session_started.load(std::memory_order_acquire)) {
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
  if (!g_session_started.load(std::memory_order_acquire) || t_unregistrable || !OwnSession()) {
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

bool RequestFlush(int timeout_ms) {
  // No collector (output failed, or it never started): nobody would answer.
  if (!g_session_started.load() || !g_collector_running.load()) return false;
  uint64_t ticket = g_flush_requested.fetch_add(1) + 1;
  WakeCollector();
  // On a futex the collector bumps (not in 1 ms sleeps: each exec and _exit
  // waited at least that long, 12 ms a process in an exec-heavy script).
  const int64_t deadline = MonotonicNs() + timeout_ms * 1000000LL;
  for (;;) {
    const uint32_t seq = g_flush_seq.load(std::memory_order_acquire);
    if (g_flush_done.load(std::memory_order_acquire) >= ticket) return true;
    if (!g_collector_running.load()) return false;
    const int64_t left = deadline - MonotonicNs();
    if (left <= 0) return false;
    const timespec wait{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    syscall(SYS_futex, &g_flush_seq, FUTEX_WAIT_PRIVATE, seq, &wait, nullptr, 0);
  }
}

void BeforeQuickExit(int status) {
  if (!OwnSession()) return;
  g_sampler.active.store(false);
  g_quick_exit_status.store(status & 0xff);
  int expected = 0;
  g_fatal_signal.compare_exchange_strong(expected, kQuickExit);
  RequestFlush(1000);  // only atomics and nanosleep: signal-safe
}

// Whether PrepareSigprofForExec put SIG_IGN in (undone if the exec fails).
std::atomic<bool> g_sigprof_ignored_for_exec{false};

bool BeforeExec() {
  if (!OwnSession()) return false;
  g_exec_end_pending.store(true);
  const bool flushed = RequestFlush(1000);
  // Every timer is disarmed now (or the collector is gone): what is still
  // pending here would outlive the image.
  g_sigprof_ignored_for_exec.store(PrepareSigprofForExec());
  return flushed;
}

void AfterFailedExec(bool prepared) {
  if (!OwnSession()) return;
  AfterFailedExecSigprof(g_sigprof_ignored_for_exec.exchange(false));
  if (!prepared) return;
  g_rearm_pending.store(true);
  WakeCollector();
}

namespace {

// Disarms the calling thread's timer (its slot `s`) for as long as the
// reason for it lasts (a flag of the slot, which ArmSlot checks), and says
// `line` once per process (*warned).
void StopSamplingThread(ThreadSlot* s, std::atomic<bool>* warned, const char* line) {
  {
    TimerLock lock;
    G->timer->DisarmThread(&s->timer);
  }
  if (!warned->exchange(true)) WarnLine(line);
}

}  // namespace

void AfterProgramMask(bool sigprof_blocked, bool blocks_all) {
  // Cheap tests first: libraries mask signals often (libunwind around each
  // step of its slow path), and OwnSession() is a getpid() syscall.
  ThreadSlot* s = t_slot;
  if (s == nullptr || s->sigprof_blocked.load(std::memory_order_relaxed) == sigprof_blocked) return;
  if (!OwnSession()) return;
  s->sigprof_blocked.store(sigprof_blocked, std::memory_order_relaxed);
  if (!sigprof_blocked) {
    ArmSlot(s);  // (not while the baseline runs, or once sampling is off)
    return;
  }
  static std::atomic<bool> warned{false};
  static std::atomic<bool> quiet{true};
  StopSamplingThread(s, blocks_all ? &quiet : &warned,
                     "dlprof: a thread of the program blocks SIGPROF; dlprof does not sample it "
                     "while it does (its wall time is still recorded)\n");
  TakeOwnPendingSigprof();
}

void BeforeCredentialChange() {
  if (!OwnSession()) return;
  pthread_mutex_lock(&g_collector_mu);
  if (g_collector != nullptr) g_collector->KeepFileOpen();
  pthread_mutex_unlock(&g_collector_mu);
}

bool PauseCollector() {
  if (!OwnSession() || !g_collector_running.load(std::memory_order_acquire)) return false;
  g_collector_pause.store(true, std::memory_order_release);
  WakeCollector();
  // Until its task is gone, not only its loop: the kernel counts threads.
  const pid_t tid = g_collector_tid.load(std::memory_order_relaxed);
  const timespec step{0, 100000};
  for (int i = 0; i < 20000; ++i) {
    if (!g_collector_running.load(std::memory_order_acquire) &&
        (tid <= 0 || (syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH))) {
      break;
    }
    nanosleep(&step, nullptr);
  }
  return true;
}

void ResumeCollector(bool paused) {
  g_collector_pause.store(false, std::memory_order_release);
  if (paused && OwnSession()) StartCollectorThread();
}

void BeforeSeccompFilter() {
  if (!OwnSession()) return;
  // Its filter may forbid what the collector does next (open /proc, write,
  // mmap) and kill the process for it (SECCOMP_RET_KILL, and with TSYNC on
  // every thread): dlprof ends its profile first and leaves no thread behind.
  StopSampling(kSeccompFilter);
  int expected = 0;
  g_fatal_signal.compare_exchange_strong(expected, kSeccompEnd);
  RequestFlush(1000);
  PauseCollector();
  g_session_started.store(false);
  WarnLine(
      "dlprof: the program installs a seccomp filter; dlprof steps aside in this process (its "
      "profile ends here and stays readable)\n");
}

void AfterTscDisabled() {
  t_clock_by_syscall = true;
  if (!OwnSession()) return;
  ThreadSlot* s = t_slot;
  if (s == nullptr || s->tsc_off.exchange(true)) return;
  static std::atomic<bool> warned{false};
  StopSamplingThread(s, &warned,
                     "dlprof: a thread of the program disables the time-stamp counter "
                     "(PR_SET_TSC); dlprof does not sample it (its wall time is still recorded)\n");
}

void StepAsideFromSigprof(bool behind_back) {
  if (!OwnSession()) return;
  if (!StopSampling(behind_back ? kSigprofBehindBack : kProgramSigprof)) return;
  WarnLine(behind_back
               ? "dlprof: the program replaced dlprof's SIGPROF handler; dlprof steps aside: CPU "
                 "sampling off for this process (stages, steps, buffers and wall time still "
                 "recorded)\n"
               : "dlprof: the program installs its own SIGPROF handler; dlprof steps aside: CPU "
                 "sampling off for this process (stages, steps, buffers and wall time still "
                 "recorded)\n");
}

void SetWorker(int worker_id) {
  if (!OwnSession()) return;
  // The collector writes it down: this is the program's thread, whose heap
  // dlprof leaves alone (core/annotations.cc).
  g_worker_pending.store(worker_id);
  WakeCollector();
}

void OnStepEnd() {
  if (g_baseline_remaining->load(std::memory_order_relaxed) > 0 &&
      g_baseline_remaining->fetch_sub(1) == 1) {
    WakeCollector();  // sampling starts now, not at the next tick
  }
}

}  // namespace dlprof

namespace dlprof {

int ProgramPthreadCreate(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                         void* arg) {
  auto real = RealPthreadCreate();
  if (t_starting_internal_thread || !g_session_started.load(std::memory_order_acquire) ||
      !OwnSession()) {
    return real(thread, attr, fn, arg);
  }
  if (g_behind_other_pthread_create) {
    return CreateBehindOtherPthreadCreate(real, thread, attr, fn, arg);
  }
  auto* start = new (std::nothrow) ThreadStart{fn, arg};
  if (start == nullptr) return real(thread, attr, fn, arg);
  int rc = real(thread, attr, ThreadTrampoline, start);
  if (rc != 0) delete start;
  return rc;
}

}  // namespace dlprof

__attribute__((constructor)) static void DlprofLibraryStart() { dlprof::StartSession(); }
