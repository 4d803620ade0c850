// The profiling session of this process: its start from the library
// constructor, its end (exit, _exit, a fatal signal, an exec, a seccomp
// filter), and the program's calls that change it. The phase it is in and
// the collector's mailbox are core/session_state.h; threads, fork, the
// collector thread and the run folder have their own files
// (core/session_internal.h).
#include "core/session.h"
#include "core/stderr_lines.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "backends/cfi_region.h"
#include "backends/cfi_tables.h"
#include "backends/cfi_unwinder.h"
#include "core/collector_process.h"
#include "core/collector_spawn.h"
#include "core/exit_exec.h"
#include "core/proc_maps.h"
#include "core/python_bootstrap.h"
#include "core/python_codes_seen.h"
#include "core/python_exec_notes.h"
#include "core/python_fork.h"
#include "core/python_frames.h"
#include "core/raw_syscall.h"
#include "core/session_internal.h"
#include "core/shared_arena.h"
#include "core/signal_handler.h"
#include "core/signals.h"

namespace dlprof {

bool g_session_detailed = false;
SessionGlobals* G = nullptr;
Collector* g_collector = nullptr;  // replaced (the old one leaked) in a fork child
pthread_mutex_t g_collector_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<pid_t> g_session_pid{0};
namespace {
std::atomic<int> g_baseline_local{0};
}  // namespace
std::atomic<int>* g_baseline_remaining = &g_baseline_local;

void Warn(const std::string& msg) {
  std::string line = msg + "\n";
  WriteStderrLine(line.data(), line.size());
}

void WarnLine(const char* line) { WriteStderrLine(line, strlen(line)); }

bool OwnSession() {
  return g_state.recording() && g_session_pid.load(std::memory_order_relaxed) == getpid();
}

namespace {

// Whether libdlprof's interposers (_exit, exec, pthread_create, sigaction:
// core/hooks.cc) are the definitions the program's calls reach: only when it
// was loaded before libc (preloaded, or linked), since a symbol goes to the
// first object in load order that defines it. Loaded later by dlopen
// (ctypes.CDLL from Python) they are not. Off the signal path, at start.
bool InterposersInEffect() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&InterposersInEffect), &self) == 0) return true;
  struct Order {
    const void* self_base;
    int index = 0, self_at = -1, libc_at = -1;
  } order{self.dli_fbase};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* o = static_cast<Order*>(data);
        if (reinterpret_cast<const void*>(info->dlpi_addr) == o->self_base) o->self_at = o->index;
        if (o->libc_at < 0 && info->dlpi_name != nullptr && strstr(info->dlpi_name, "/libc.so")) {
          o->libc_at = o->index;
        }
        ++o->index;
        return 0;
      },
      &order);
  return order.self_at < 0 || order.libc_at < 0 || order.self_at < order.libc_at;
}

// How long an exit waits for its helper to read the maps (OnExit): about a
// millisecond when it is running; a helper stuck or starved costs no more.
constexpr int kExitMapsWaitMs = 200;

// Whether a thread still here took a sample (the exit's question; threads
// that ended took theirs along, and their samples are few or named already).
bool AnySamplesTaken() {
  for (int i = 0, limit = SlotLimit(); i < limit; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load(std::memory_order_acquire) == kSlotLive &&
        s->samples_taken.load(std::memory_order_relaxed) > 0) {
      return true;
    }
  }
  return false;
}

// exit(): the exiting thread stops sampling and writes the rest of the file
// itself (the collector may be gone, paused or stuck). Bounded.
void OnExit() {
  // A child made by _Fork() or a raw fork syscall ran no atfork handler: it
  // still has the parent's session, file and rings (copies), which are not
  // its to end, write or drain.
  if (!OwnSession()) return;
  if (!g_state.BeginEnd(kEndExit)) return;  // another end came first
  g_sampler.active.store(false);
  if (CollectorIsProcess()) {
    // The helper drains the rest and writes the END once the process is
    // gone, with the maps it read last: objects loaded since (an import, a
    // plugin) are read now, while they are there; so are the maps of a
    // process that took samples before its helper could read any (a short
    // fork child, a helper slow to start). Bounded.
    if (LoadedObjectsChangedSinceHelperRead() || (!g_mailbox.MapsRead() && AnySamplesTaken())) {
      RequestFlush(kExitMapsWaitMs);
    }
    DisarmAllLiveThreads();
    return;
  }
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
  DisarmAllLiveThreads();
  if (EnsureCollectorFile()) {
    RecordSamplingOff(g_collector);
    ApplyPendingWorker(g_collector);
    NoteUnwinderState(g_collector);
    g_collector->SetProcessField("end", "exit");
    g_collector->Finish(MonotonicNs());
  }
  g_state.Apply(PhaseEvent::kEndWritten);
  pthread_mutex_unlock(&g_collector_mu);
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
  if (OwnSession() && g_state.BeginEnd(signo)) {
    g_sampler.active.store(false);
    RequestFlush(1000);  // only atomics and futexes: signal-safe
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
  if (OwnSession() && g_state.BeginEnd(signo)) {
    g_sampler.active.store(false);
    if (!CollectorIsProcess()) RequestFlush(1000);  // the helper ends the file after the death
  }
  DieOfDefault(signo);
}

// The collector process's cfi tables: a region of the arena it fills and
// the handler searches (backends/cfi_region.h). False when the arena
// cannot hold one (not shared, or no memory): the helper walks by frame
// pointer then.
bool UseCfiRegion() {
  // (Under a file size limit it may not fit: the arena must stay shared.)
  if (!ArenaShared() || !ArenaCanGrow(kCfiRegionBytes + CfiDeferredPoolBytes() + (1 << 20))) {
    return false;
  }
  CfiRegion* region =
      CfiInitRegion(ArenaMapShared(kCfiRegionBytes, AtFork::kCopy), kCfiRegionBytes);
  if (region == nullptr || !ArenaShared() || !CfiUseRegion(region)) return false;
  // Walks the handler leaves to the helper: their slots are fresh zero
  // pages in a fork child (the parent's walks are not its own).
  if (const size_t bytes = CfiDeferredPoolBytes(); bytes > 0) {
    void* pool = ArenaMapShared(bytes, AtFork::kZero);
    if (pool != nullptr && ArenaShared() && CfiUseDeferredPool(pool)) region->deferred_pool = pool;
  }
  ArenaSetRoot(ArenaRoot::kCfi, region);
  return true;
}

void StartSession() {
  RememberStderr();
  // The interposed sigaction()/signal() forward to these even when profiling
  // is off: resolve them now, not in some signal handler later.
  ResolveSignalFunctions();
  ResolveExecFunctions();
  ResolveProcessCalls();
  G = new SessionGlobals();
  G->config = ParseConfig([](const char* name) { return getenv(name); }, Warn);
  if (!G->config.enabled) return;
  // The session's words and the mailbox move into the shared arena
  // (core/shared_arena.h) before any other thread can reach them.
  constexpr size_t kStateBytes = (sizeof(SessionState::Data) + alignof(Mailbox::Data) - 1) /
                                 alignof(Mailbox::Data) * alignof(Mailbox::Data);
  if (auto* words = static_cast<char*>(
          ArenaMap(kStateBytes + sizeof(Mailbox::Data), AtFork::kCopy))) {
    g_state.MoveTo(words);
    g_mailbox.MoveTo(words + kStateBytes);
    ArenaSetRoot(ArenaRoot::kSession, words);
    ArenaSetRoot(ArenaRoot::kMailbox, words + kStateBytes);
  }
  // Resolve both now, before any thread can race on them, and so that a fork
  // child (which restarts its collector) never calls dlsym: it may have
  // inherited the loader's lock held. Whether another pthread_create comes
  // first decides how program threads are registered (the interposer).
  ResolveThreadCreation();

  // Where the collector will run: the helper process where it can serve
  // this process (core/collector_process.h), else the thread. The helper
  // builds the cfi unwinder's tables into a region of the arena
  // (backends/cfi_region.h); without one, frame pointers stand in for
  // auto's cfi.
  std::string collector_refusal =
      CollectorProcessRefusal(G->config, dlsym(RTLD_DEFAULT, "_PyRuntime") != nullptr);
  G->collector_process = collector_refusal.empty() && FindCollectorProgram(&collector_refusal);
  if (G->config.collector_process && !G->collector_process) {
    G->collector_note = "thread: no collector process here (" + collector_refusal + ")";
  }
  // (Whatever the unwinder: blocked threads are walked with the tables, as
  // the thread does. A TSan pass with DLPROF_BACKEND=fp found their chains
  // gone when the region was made for auto and cfi only.)
  if (G->collector_process && !UseCfiRegion()) {
    if (G->config.unwinder == "cfi") {
      // Asked for by name: the thread builds them.
      G->collector_process = false;
      G->collector_note = "thread: no collector process here (no room in the "
                          "shared arena for the cfi tables of DLPROF_BACKEND=cfi)";
    } else if (G->config.unwinder == "auto") {
      G->config.unwinder = "fp";
    }
  }
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
  CfiSetObjectIterator(TryIterateLoadedObjects);
  G->role = is_main ? "main" : "worker";
  g_session_detailed = G->config.mode == Mode::kDetailed;
  if (G->config.baseline_steps > 0) {
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED) g_baseline_remaining = new (page) std::atomic<int>(0);
    G->waiting_for_baseline = true;
  }
  g_baseline_remaining->store(G->config.baseline_steps);

  // The helper process makes the file itself (StartCollector); the thread's
  // is made now, so that a process that dies at once still says who it was.
  g_collector = G->collector_process ? NewCollector() : OpenCollector();
  if (g_collector == nullptr) return;
  if (!InterposersInEffect()) {
    // An os._exit() is not seen: every tick's data is written at that tick,
    // so a worker that leaves by it loses one tick (10-50 ms), not up to a
    // second.
    G->write_every_tick = true;
    g_collector->SetProcessField(
        "interposers", "off: loaded after libc (dlopen); the file is written at every tick");
  }

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
    g_state.StepAside(kSigprofBeforeStart, MonotonicNs());  // (still Off: it starts aside)
    WarnLine(
        "dlprof: SIGPROF already has a handler (installed before dlprof started); CPU sampling "
        "off for this process (stages, steps, buffers and wall time still recorded)\n");
  } else if (!InstallSignalHandler(kProfilingSignal)) {
    Warn("dlprof: cannot install the SIGPROF handler; profiling off");
    return;
  } else {
    OwnSignal(kProfilingSignal, prof_before, reinterpret_cast<void*>(HandleProfilingSignal));
  }
  const bool sampling = g_state.off_reason() == kSamplingOn;
  if (sampling && StartPythonFrames(&G->python_version, &G->python_state)) {
    g_collector->SetProcessField("python", G->python_version);
    g_collector->SetProcessField("python_frames", G->python_state);
    MoveCodesSeenToArena();
    if (!G->config.py_code_wake) DisablePyCodeWakes();
    if (!G->config.py_exec_hook) DisableExecHook();
    if (G->python_state != "on") {
      WarnLine(("dlprof: Python " + G->python_version + " frames " + G->python_state +
                "; native frames only\n").c_str());
    }
  }
  FindPythonForkCalls();
  ResolveFork();
  ResolveLibcClone();
  pthread_key_create(&g_thread_key, UnregisterThread);
  pthread_atfork(LockForFork, UnlockAfterFork, ResetInForkChild);
  g_sampler.active.store(sampling);
  g_session_pid.store(getpid(), std::memory_order_relaxed);
  g_state.Apply(!sampling                       ? PhaseEvent::kStartSteppedAside
                : G->config.baseline_steps > 0 ? PhaseEvent::kStartBaseline
                                               : PhaseEvent::kStart);
  RegisterCurrentThread(/*prepare=*/true);
  RegisterExistingThreads();
  if (G->config.baseline_steps == 0) {
    g_collector->SetProcessField("sampling_start_ns", std::to_string(MonotonicNs()));
  }
  // Still single-threaded (setenv), and before Py_Initialize reads PYTHONPATH.
  const std::string annotations = PreparePythonBootstrap(G->config.auto_annotate);
  if (!annotations.empty()) g_collector->SetProcessField("python_annotations", annotations);
  StartCollector(/*fork_child=*/false);
  atexit(OnExit);
  // The helper process sees the process end whatever ends it: no handler.
  if (!CollectorIsProcess()) InstallTerminationHandlers();
}

}  // namespace

bool RequestFlush(int timeout_ms) {
  // No collector (output failed, or it never started): nobody would answer.
  // (A helper process is not watched: the timeout bounds the wait.)
  static const std::atomic<bool> kHelperAnswers{true};
  const std::atomic<bool>& answerer = CollectorIsProcess() ? kHelperAnswers : g_collector_running;
  const Phase phase = g_state.phase();
  if ((!IsRecording(phase) && phase != Phase::kEnding) || !answerer.load()) return false;
  // A child of a fork that ran no atfork handler has no collector of its
  // own; the mailbox is still its parent's (core/shared_arena.h).
  if (!ArenaOwned()) return false;
  const uint64_t ticket = g_mailbox.NewFlushTicket();
  return g_mailbox.AwaitFlush(ticket, timeout_ms, answerer);
}

void BeforeQuickExit(int status) {
  if (!OwnSession() || !g_state.BeginEnd(kEndQuickExit, status)) return;
  g_sampler.active.store(false);
  // The helper process ends the file once the process is gone: no wait.
  if (!CollectorIsProcess()) RequestFlush(1000);  // only atomics and futexes: signal-safe
}

// Whether PrepareSigprofForExec put SIG_IGN in (undone if the exec fails).
std::atomic<bool> g_sigprof_ignored_for_exec{false};

void BeforeExec() {
  if (!OwnSession()) return;
  // The helper cannot touch the timers: they are disarmed here, and it
  // writes the END "exec" once the image is gone (no wait).
  if (CollectorIsProcess()) DisarmForExec();
  // But an image whose threads took samples before its helper read any
  // maps would have them read after the exec, the new image's: its samples
  // lost their names (hostile review, session 27: 8 of 8 runs of a 5 ms
  // burn, then exec). Bounded; only atomics and futexes: signal-safe.
  if (CollectorIsProcess() && !g_mailbox.MapsRead() && AnySamplesTaken()) {
    RequestFlush(kExitMapsWaitMs);
  }
  g_mailbox.SetExecUnderway(true);
  g_mailbox.Post(kRequestExecEnd);
  if (!CollectorIsProcess()) RequestFlush(1000);
  // Every timer is disarmed now (or the collector is gone): what is still
  // pending here would outlive the image.
  g_sigprof_ignored_for_exec.store(PrepareSigprofForExec());
}

void AfterFailedExec() {
  if (!OwnSession()) return;
  AfterFailedExecSigprof(g_sigprof_ignored_for_exec.exchange(false));
  // Even when the END was not confirmed in time: the collector may have
  // written it since, and writes nothing more until this.
  g_mailbox.SetExecUnderway(false);
  g_mailbox.Post(kRequestRearm);
  if (CollectorIsProcess()) RearmAfterFailedExec();
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
  if (OwnSession()) NoteCredentialChange();  // (fork children from now on get the thread)
  BeforeRunFolderLost();
}

void BeforeRunFolderLost() {
  // (The helper process opened the file as it was; it keeps it.)
  if (!OwnSession() || CollectorIsProcess()) return;
  pthread_mutex_lock(&g_collector_mu);
  if (EnsureCollectorFile()) g_collector->KeepFileOpen();
  pthread_mutex_unlock(&g_collector_mu);
}

void BeforeSeccompFilter() {
  if (!OwnSession()) return;
  // Its filter may forbid what the collector does next (open /proc, write,
  // mmap) and kill the process for it (SECCOMP_RET_KILL, and with TSYNC on
  // every thread): dlprof ends its profile first and leaves no thread behind.
  StopSampling(kSeccompFilter);
  // (The helper process writes the END and leaves on its own.)
  if (g_state.BeginEnd(kEndSeccomp) && !CollectorIsProcess()) RequestFlush(1000);
  StopCollectorThread();  // (gone already once END is written, unless that timed out)
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
  g_mailbox.PostWorker(worker_id);
}

void OnStepEnd() {
  if (g_baseline_remaining->load(std::memory_order_relaxed) > 0 &&
      g_baseline_remaining->fetch_sub(1) == 1) {
    g_mailbox.Post(0);  // sampling starts now, not at the next tick
  }
}

}  // namespace dlprof

__attribute__((constructor)) static void DlprofLibraryStart() { dlprof::StartSession(); }
