#include "core/session.h"

#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <dlprof/dlprof.h>
#include <dlprof/format.h>

#include "backends/timer_source.h"
#include "backends/unwinder.h"
#include "core/annotations.h"
#include "core/collector.h"
#include "core/config.h"
#include "core/signal_handler.h"

namespace dlprof {

std::atomic<bool> g_session_started{false};
bool g_session_detailed = false;

namespace {

using PthreadCreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

constexpr int kProfilingSignal = SIGPROF;

// Everything non-trivial lives on the heap, made by StartSession: the library
// constructor may run before this file's static initializers.
struct SessionGlobals {
  Config config;
  std::unique_ptr<Unwinder> unwinder;
  std::unique_ptr<TimerSource> timer;
  std::string run_id;
  std::string role = "main";
};
SessionGlobals* G = nullptr;
Collector* g_collector = nullptr;  // replaced (the old one leaked) in a fork child
pthread_mutex_t g_collector_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_flush_requested{0};
std::atomic<uint64_t> g_flush_done{0};
int g_run_fd = -1;
int g_worker = -1;
int g_fork_seq = 0;   // in a child: its fork order among its parent's children
int g_forks = 0;      // children forked so far
std::atomic<int> g_baseline_remaining{0};
std::atomic<bool> g_arm_pending{false};
std::atomic<int> g_fatal_signal{0};  // SIGTERM/SIGINT about to kill the process
pthread_key_t g_thread_key;
__thread bool t_unregistrable __attribute__((tls_model("initial-exec"))) = false;

void Warn(const std::string& msg) {
  std::string line = msg + "\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

PthreadCreateFn RealPthreadCreate() {
  static PthreadCreateFn real =
      reinterpret_cast<PthreadCreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
  return real;
}

bool Armed() { return g_baseline_remaining.load(std::memory_order_relaxed) <= 0; }

void ArmSlot(ThreadSlot* s) {
  // The first sample's weight counts from here (set before any signal can come).
  timespec cpu;
  clockid_t clock = static_cast<clockid_t>((~s->tid.load() << 3) | 6);  // the thread's CPU clock
  if (clock_gettime(clock, &cpu) == 0) {
    s->last_sample_cpu_ns = static_cast<int64_t>(cpu.tv_sec) * 1000000000 + cpu.tv_nsec;
  }
  std::string error;
  if (!G->timer->ArmThread(s->tid.load(std::memory_order_relaxed), &s->timer, &error)) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) Warn("dlprof: cannot sample a thread: " + error);
  }
}

// Registers the calling thread: a slot, its timer armed (unless an unprofiled
// baseline is running), and a key destructor to unregister it at thread exit.
ThreadSlot* RegisterCurrentThread() {
  pid_t tid = CurrentTid();
  ThreadSlot* s = ClaimSlot(tid);
  if (s == nullptr) {
    t_unregistrable = true;
    return nullptr;
  }
  G->unwinder->PrepareThread();
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
  std::atomic_signal_fence(std::memory_order_seq_cst);
  G->timer->DisarmThread(&s->timer);
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
    if (s->state.load(std::memory_order_acquire) == kSlotLive && !s->timer.armed) ArmSlot(s);
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
  c->SetProcessField("unwinder", G->unwinder->name());
  c->SetProcessField("timer", G->timer->name());
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
}

// Creates <role>-<pid>.dlprof in the run folder, never overwriting (an exec'd
// image with the same pid gets a numbered name).
Collector* OpenCollector() {
  auto* c = new Collector();
  std::string error;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = G->role + "-" + std::to_string(getpid()) +
                       (attempt ? "." + std::to_string(attempt) : "") + ".dlprof";
    if (c->Open(g_run_fd, name, &error)) {
      SetProcessFields(c);
      return c;
    }
    if (errno != EEXIST) break;
  }
  Warn("dlprof: " + error + "; profiling off for this process");
  delete c;
  return nullptr;
}

void DisarmAllLiveThreads() {
  for (int i = 0; i < kMaxThreads; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load(std::memory_order_acquire) == kSlotLive) G->timer->DisarmThread(&s->timer);
  }
}

void* CollectorMain(void*) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals go to the program's threads
  const int64_t period = G->config.snapshot_ms * 1000000LL;
  int64_t next = MonotonicNs();
  int64_t last_flush = next;
  while (!g_stop.load(std::memory_order_acquire)) {
    next += period;
    int64_t now = MonotonicNs();
    if (next < now) next = now;  // fell behind (suspended): don't burst
    timespec ts{static_cast<time_t>(next / 1000000000), static_cast<long>(next % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
    pthread_mutex_lock(&g_collector_mu);
    if (g_stop.load(std::memory_order_acquire) || g_collector == nullptr) {
      pthread_mutex_unlock(&g_collector_mu);
      break;
    }
    now = MonotonicNs();
    if (g_arm_pending.exchange(false)) {
      g_collector->SetProcessField("sampling_start_ns", std::to_string(now));
      ArmAllLiveThreads();
    }
    g_collector->SnapshotTick(now);
    g_collector->Drain();
    uint64_t requested = g_flush_requested.load(std::memory_order_acquire);
    if (int signo = g_fatal_signal.load(std::memory_order_acquire); signo != 0) {
      // The process is about to die of a signal it does not handle: end the
      // file properly (END chunk), then release the waiting handler.
      g_sampler.active.store(false);
      g_session_started.store(false);
      g_stop.store(true, std::memory_order_release);
      DisarmAllLiveThreads();
      g_collector->SetProcessField("end", "signal " + std::to_string(signo));
      g_collector->Finish(now);
      g_flush_done.store(requested, std::memory_order_release);
      pthread_mutex_unlock(&g_collector_mu);
      break;
    }
    if (now - last_flush >= 1000000000LL || requested != g_flush_done.load()) {
      if (!g_collector->Flush()) g_sampler.active.store(false);
      last_flush = now;
      g_flush_done.store(requested, std::memory_order_release);
    }
    pthread_mutex_unlock(&g_collector_mu);
  }
  return nullptr;
}

bool StartCollectorThread() {
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = RealPthreadCreate()(&thread, &attr, CollectorMain, nullptr);
  pthread_attr_destroy(&attr);
  return rc == 0;
}

// Stops sampling and writes the rest of the file (normal exit, or a fatal
// signal that the program does not handle).
void FinishSession(const char* how) {
  if (!g_session_started.exchange(false)) return;
  g_sampler.active.store(false);
  pthread_mutex_lock(&g_collector_mu);
  g_stop.store(true, std::memory_order_release);
  DisarmAllLiveThreads();
  if (g_collector != nullptr) {
    g_collector->SetProcessField("end", how);
    g_collector->Finish(MonotonicNs());
  }
  pthread_mutex_unlock(&g_collector_mu);
}

void OnExit() { FinishSession("exit"); }

// SIGTERM / SIGINT when the program has no handler of its own: write the
// profile (bounded wait), then die of the signal as the program would have.
void OnTerminationSignal(int signo) {
  const int saved_errno = errno;
  if (g_session_started.load()) {
    g_sampler.active.store(false);
    int expected = 0;
    g_fatal_signal.compare_exchange_strong(expected, signo);
    RequestFlush(1000);  // only atomics and nanosleep: signal-safe
  }
  signal(signo, SIG_DFL);
  raise(signo);  // pending until this handler returns
  errno = saved_errno;
}

void InstallTerminationHandlers() {
  for (int signo : {SIGTERM, SIGINT}) {
    struct sigaction old {};
    if (sigaction(signo, nullptr, &old) != 0) continue;
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) signal(signo, OnTerminationSignal);
  }
}

void LockForFork() {
  pthread_mutex_lock(&g_collector_mu);
  g_fork_seq = g_forks++;
}

void UnlockAfterFork() { pthread_mutex_unlock(&g_collector_mu); }

// In a fork()ed child: only the forking thread survives. Forget the parent's
// threads, timers, pending samples and file; start this process's own profile.
void ResetInForkChild() {
  g_collector_mu = PTHREAD_MUTEX_INITIALIZER;
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
  ResetBufferStats();
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
    if (self->syscall_fd >= 0) close(self->syscall_fd);
    self->syscall_fd = -1;
  }
  g_collector = OpenCollector();
  if (g_collector == nullptr) {
    g_sampler.active.store(false);
    g_session_started.store(false);
    return;
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
  const std::string& out = G->config.out_dir;
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
    Warn("dlprof: cannot create run folder " + out + "/" + G->run_id + ": " + strerror(errno));
    close(out_fd);
    return false;
  }
  g_run_fd = openat(out_fd, G->run_id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (g_run_fd >= 0 && created && *is_main) {
    // "latest" names the newest run; replaced atomically.
    std::string tmp = ".latest." + std::to_string(getpid());
    if (symlinkat(G->run_id.c_str(), out_fd, tmp.c_str()) == 0 &&
        renameat(out_fd, tmp.c_str(), out_fd, "latest") != 0) {
      unlinkat(out_fd, tmp.c_str(), 0);
    }
  }
  close(out_fd);
  if (g_run_fd < 0) {
    Warn("dlprof: cannot open run folder " + out + "/" + G->run_id + ": " + strerror(errno));
    return false;
  }
  return true;
}

void StartSession() {
  G = new SessionGlobals();
  G->config = ParseConfig([](const char* name) { return getenv(name); }, Warn);
  if (!G->config.enabled) return;
  RealPthreadCreate();  // resolve before any thread can race on it

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
  G->role = is_main ? "main" : "worker";
  g_session_detailed = G->config.mode == Mode::kDetailed;
  g_baseline_remaining.store(G->config.baseline_steps);

  g_collector = OpenCollector();
  if (g_collector == nullptr) return;

  g_sampler.unwinder = G->unwinder.get();
  g_sampler.timer = G->timer.get();
  g_sampler.weigh_by_cpu_time = G->timer->CpuTimeWeighted();
  g_sampler.period_ns = 1000000000LL / G->config.hz;
  g_sampler.max_frames = G->config.max_frames < kMaxFrames ? G->config.max_frames : kMaxFrames;
  if (!InstallSignalHandler(kProfilingSignal)) {
    Warn("dlprof: cannot install the SIGPROF handler; profiling off");
    return;
  }
  pthread_key_create(&g_thread_key, UnregisterThread);
  pthread_atfork(LockForFork, UnlockAfterFork, [] {
    UnlockAfterFork();
    ResetInForkChild();
  });
  g_sampler.active.store(true);
  g_session_started.store(true);
  RegisterCurrentThread();
  RegisterExistingThreads();
  if (G->config.baseline_steps == 0) {
    g_collector->SetProcessField("sampling_start_ns", std::to_string(MonotonicNs()));
  }
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

}  // namespace

ThreadSlot* AdoptCurrentThread() {
  if (!g_session_started.load(std::memory_order_acquire) || t_unregistrable) return nullptr;
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
  if (!g_session_started.load()) return false;
  uint64_t ticket = g_flush_requested.fetch_add(1) + 1;
  const timespec step{0, 1000000};
  for (int waited = 0; waited <= timeout_ms; ++waited) {
    if (g_flush_done.load(std::memory_order_acquire) >= ticket) return true;
    nanosleep(&step, nullptr);
  }
  return false;
}

void SetWorker(int worker_id) {
  if (!g_session_started.load()) return;
  pthread_mutex_lock(&g_collector_mu);
  g_worker = worker_id;
  G->role = "worker";
  if (g_collector != nullptr) {
    g_collector->SetProcessField("worker", std::to_string(worker_id));
    g_collector->SetProcessField("role", "worker");
  }
  pthread_mutex_unlock(&g_collector_mu);
}

void OnStepEnd() {
  if (g_baseline_remaining.load(std::memory_order_relaxed) > 0 &&
      g_baseline_remaining.fetch_sub(1) == 1) {
    g_arm_pending.store(true);
  }
}

}  // namespace dlprof

// Every thread made with pthread_create is registered on its first instruction.
extern "C" DLPROF_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                                            void* (*fn)(void*), void* arg) {
  auto real = dlprof::RealPthreadCreate();
  if (!dlprof::g_session_started.load(std::memory_order_acquire)) return real(thread, attr, fn, arg);
  auto* start = new (std::nothrow) dlprof::ThreadStart{fn, arg};
  if (start == nullptr) return real(thread, attr, fn, arg);
  int rc = real(thread, attr, dlprof::ThreadTrampoline, start);
  if (rc != 0) delete start;
  return rc;
}

__attribute__((constructor)) static void DlprofLibraryStart() { dlprof::StartSession(); }
