// The collector thread: every tick (10 ms on average, 50 ms while all is
// steady) it serves the mailbox, drains the rings, takes the wall ticks and
// writes chunks (core/collector.h); it ends the file when the session ends
// for a reason the exiting thread cannot write down itself.
#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "backends/cfi_tables.h"
#include "backends/cfi_unwinder.h"
#include "backends/private_fd.h"
#include "core/collector_process.h"
#include "core/fault_handler.h"
#include "core/proc_maps.h"
#include "core/python_frames.h"
#include "core/session.h"
#include "core/session_internal.h"
#include "core/signal_handler.h"
#include "core/signals.h"
#include "core/tick_schedule.h"

namespace dlprof {

std::atomic<bool> g_collector_running{false};

namespace {

// A futex word: 1 once the collector thread runs its own code.
std::atomic<uint32_t> g_collector_entered{0};
std::atomic<pid_t> g_collector_tid{0};  // kept after its loop: StopCollectorThread waits for it
// Pauses nest: threads of the program may make credential calls (or
// unshare) at once. The first stops the collector, the last starts it again,
// and no other starts or stops it in between: each caller used to stop and
// restart it on its own, and two collectors ran at once (a data race on the
// unwind tables: SIGSEGV), or leaked. Reset in a fork child.
pthread_mutex_t g_pause_mu = PTHREAD_MUTEX_INITIALIZER;
int g_pause_depth = 0;          // under g_pause_mu
bool g_paused_running = false;  // the collector ran when the first pause came
// The live collector thread whose CPU clock CollectorCpuNs adds; 0 once its
// loop is left (its time is in the sum then).
std::atomic<pid_t> g_collector_cpu_tid{0};
// The CPU time of the collector threads that ended.
std::atomic<uint64_t> g_collector_cpu_retired_ns{0};

// True when every thread of the process but the calling one (the collector)
// has ended: gone, or a zombie (the main thread after pthread_exit).
bool NoProgramThreadLeft() {
  DIR* d = OpendirOwn("/proc/self/task");
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

// Whether the collector has more to do: the session records, or it is
// ending for a cause the collector writes down (the exiting thread writes
// its own END, under the collector lock).
bool CollectorHasWork() {
  const Phase phase = g_state.phase();
  return IsRecording(phase) || (phase == Phase::kEnding && g_state.end_cause() != kEndExit);
}

// A request is waiting: the collector does not sleep before serving it.
bool RequestWaiting() {
  return g_mailbox.Pending() != 0 || g_mailbox.flush_requested() != g_mailbox.flush_done();
}

std::string EndText(int cause) {
  if (cause == kEndQuickExit) return "_exit " + std::to_string(g_state.end_status());
  if (cause == kEndSeccomp) return "seccomp";
  return "signal " + std::to_string(cause);
}

// The process is about to die of a signal it does not handle, to _exit(),
// or to install a seccomp filter: end the file properly (END chunk).
// Collector lock held.
void WriteEnd(int64_t now) {
  g_sampler.active.store(false);
  DisarmAllLiveThreads();
  if (!EnsureCollectorFile()) return;  // the session has ended (output failed)
  NoteUnwinderState(g_collector);
  g_collector->SetProcessField("end", EndText(g_state.end_cause()));
  g_collector->Finish(now);
  g_state.Apply(PhaseEvent::kEndWritten);
}

// The baseline's steps are done (here or in the parent): arm, from now on.
// Collector lock held.
void EndBaseline(int64_t now) {
  if (!G->waiting_for_baseline || g_baseline_remaining->load() > 0) return;
  G->waiting_for_baseline = false;
  g_collector->SetProcessField("sampling_start_ns", std::to_string(now));
  if (g_state.Apply(PhaseEvent::kBaselineDone)) ArmAllLiveThreads();
}

// The off-signal work that does not need the collector lock.
void UnlockedChores() {
  // The unwinder's own (the cfi tables of new objects), outside the lock: a
  // fork need not wait for it. After the first sleep, so a process that
  // lives a few ms decodes nothing.
  Unwinder* u = g_sampler.unwinder;
  if (u != nullptr) u->Maintain();
  // The cfi tables serve the collector's walks of blocked threads whatever
  // the unwinder (nothing is decoded until a walk asks for tables).
  if (u == nullptr || !u->MaintainsCfiTables()) CfiMaintain();
  // The rows the walks the handler left need: Drain finishes them.
  CfiPrepareDeferredWalks();
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
    try {
      if (g_collector != nullptr) g_collector->SetProcessField("python_frames", G->python_state);
    } catch (const std::bad_alloc&) {  // not with the lock held (CollectorMain)
    }
    pthread_mutex_unlock(&g_collector_mu);
  }
}

#if defined(__SANITIZE_ADDRESS__)
// ASan builds only. In a fork child, GCC 12's ASan does not always know the
// collector thread (reports say "thread T-1"), so nothing cleared the shadow
// of the stack glibc handed it: a stack the parent's threads used, still
// marked with their frames' redzones. The collector's first instrumented
// call there was reported as a stack-buffer-overflow (the syscall()
// interposer reading its arguments) and killed a DataLoader worker. Clears
// the shadow below this frame, where the collector's callees will run.
__attribute__((noinline)) void ClearStaleStackShadow() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* lo = nullptr;
  size_t size = 0;
  if (pthread_attr_getstack(&attr, &lo, &size) == 0) {
    const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    const uintptr_t base = reinterpret_cast<uintptr_t>(lo);
    if (here > base + 512 && here - base <= size) {
      __asan_unpoison_memory_region(lo, here - base - 512);
    }
  }
  pthread_attr_destroy(&attr);
}
#endif

// The collector lock, as the tick loop holds it: `locked` says whether this
// thread holds it, for the loop's way out on a bad_alloc (CollectorMain).
void LockTick(bool* locked) {
  pthread_mutex_lock(&g_collector_mu);
  *locked = true;
}

void UnlockTick(bool* locked) {
  *locked = false;
  pthread_mutex_unlock(&g_collector_mu);
}

void* CollectorMain(void*) {
#if defined(__SANITIZE_ADDRESS__)
  ClearStaleStackShadow();
#endif
  g_collector_tid.store(CurrentTid(), std::memory_order_relaxed);
  g_collector_cpu_tid.store(CurrentTid());
  g_collector_entered.store(1, std::memory_order_release);
  syscall(SYS_futex, &g_collector_entered, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  sigset_t all;
  sigfillset(&all);
  RealPthreadSigmask(SIG_BLOCK, &all, nullptr);  // signals go to the program's threads
  const int64_t fast_period = G->config.snapshot_ms * 1000000LL;
  int64_t last_flush = MonotonicNs();
  TickSchedule schedule(fast_period, G->config.mode == Mode::kLight, last_flush,
                        static_cast<uint64_t>(last_flush) ^ (static_cast<uint64_t>(getpid()) << 32) ^
                            0x9e3779b97f4a7c15ULL);
  bool ended_for_exec = false;  // END "exec" written; nothing more until a re-arm
  // The ticks, left on a std::bad_alloc from anywhere in one. Under an
  // address-space limit the collector's own containers run out of memory
  // (interned stacks, wall records, a maps record): the exception left to
  // itself ended the program by std::terminate. Here CPU sampling steps aside
  // (one line that allocates nothing) and the ticks go on, so what is
  // recorded is still written once memory is back (NoHarm.
  // AnExhaustedAddressSpaceStopsSamplingInsteadOfTheProgram).
  bool locked = false;
  auto ticks = [&] {
    while (CollectorHasWork()) {
      const uint32_t wake_seen = g_mailbox.WakeCount();
      int64_t now = MonotonicNs();
      const int64_t next = schedule.Next(now);
      // The once-a-second flush is never later for a slow tick.
      const int64_t deadline = std::min(next, std::max<int64_t>(now, last_flush + 1000000000LL));
      if (RequestWaiting() || g_mailbox.Sleep(deadline, wake_seen)) schedule.Woken(MonotonicNs());
      UnlockedChores();
      LockTick(&locked);
      if (!CollectorHasWork() || g_collector == nullptr) {
        UnlockTick(&locked);
        break;
      }
      // The flush tickets first, then the requests: a request posted before
      // its poster took a ticket (BeforeExec) is then served by the flush that
      // answers the ticket. (The other way round, a flush published for a
      // ticket whose exec request was left for the next tick: the exec went
      // ahead and the file had no END.)
      const uint64_t requested = g_mailbox.flush_requested();
      const uint32_t requests = g_mailbox.Take();  // each is served in this tick
      now = MonotonicNs();
      if (requests & kRequestDisarm) DisarmAllLiveThreads();
      EndBaseline(now);
      RecordSamplingOff(g_collector);
      if (requests & kRequestWorker) ApplyPendingWorker(g_collector);
      schedule.Ticked(g_collector->SnapshotTick(now));
      g_collector->Drain();
      if (g_main_thread_exited.load(std::memory_order_acquire) && NoProgramThreadLeft()) {
        UnlockTick(&locked);
        EndProcessAsLastThread();
      }
      if (g_state.phase() == Phase::kEnding) {
        // exit() asked for it meanwhile (it waits for this lock): its thread
        // writes the END.
        if (g_state.end_cause() == kEndExit) {
          UnlockTick(&locked);
          break;
        }
        WriteEnd(now);
        g_mailbox.PublishFlushDone(requested);  // releases the waiter
        UnlockTick(&locked);
        break;
      }
      if (requests & kRequestRearm) {  // an exec failed: sample again
        ended_for_exec = false;
        RearmAfterFailedExec();
      }
      const bool exec_end = (requests & kRequestExecEnd) != 0;
      if (exec_end) {
        DisarmForExec();
        NoteUnwinderState(g_collector);
        g_collector->SetProcessField("end", "exec");
      }
      if (exec_end && g_collector->file_pending()) {
        // A fork child that execs before its first tick: no file (its image
        // makes its own). It stays pending, for a failed exec's next tick.
        ended_for_exec = true;
        g_mailbox.PublishFlushDone(requested);
        UnlockTick(&locked);
        if (requests & kRequestPause) break;
        continue;
      }
      if (!ended_for_exec && !EnsureCollectorFile()) {
        // The fork child's file could not be made: nothing can be kept.
        g_mailbox.PublishFlushDone(requested);
        UnlockTick(&locked);
        break;
      }
      if (!exec_end && ended_for_exec) {
        // The file ends with END until the exec fails: nothing after it, or a
        // reader takes the file for one that died. (The exec's poster may get
        // its ticket only after the END went out: that flush is answered here.)
        g_mailbox.PublishFlushDone(requested);
        UnlockTick(&locked);
        if (requests & kRequestPause) break;
        continue;
      }
      if (now - last_flush >= 1000000000LL || requested != g_mailbox.flush_done() || exec_end ||
          G->write_every_tick) {
        if (!g_collector->Flush() || (exec_end && !g_collector->WriteEnd(now))) {
          // Disk full, file size limit, I/O error: Flush said so in one line.
          // Nothing more can be kept, so nothing more is collected: timers
          // disarmed, this thread ends, annotations fall back to a branch.
          StopSampling(kOutputFailed);
          g_state.Apply(PhaseEvent::kOutputFailed);
          g_mailbox.PublishFlushDone(requested);
          UnlockTick(&locked);
          break;
        }
        last_flush = now;
        ended_for_exec = exec_end;
        g_mailbox.PublishFlushDone(requested);
      }
      UnlockTick(&locked);
      if (requests & kRequestPause) break;
    }
  };
  for (;;) {
    try {
      ticks();
      break;
    } catch (const std::bad_alloc&) {
      if (locked) UnlockTick(&locked);
      if (StopSampling(kCollectorOutOfMemory)) {
        WarnLine("dlprof: out of memory in the collector: CPU sampling stops here\n");
      }
    }
  }
  // The tid goes first: a reader (CollectorCpuNs) that sees the new sum
  // then sees no live thread to add, so nothing is counted twice.
  const int64_t own_cpu = std::max<int64_t>(ThreadCpuNs(CurrentTid()), 0);
  g_collector_cpu_tid.store(0);
  g_collector_cpu_retired_ns.fetch_add(static_cast<uint64_t>(own_cpu));
  g_collector_running.store(false);
  g_mailbox.WakeFlushWaiters();  // a waiter need not wait for an answer that cannot come
  return nullptr;
}

}  // namespace

void RecordSamplingOff(Collector* c) { c->NoteSamplingOff(g_state); }

// Records a pending dlprof_set_worker in the profile. Collector lock held.
void ApplyPendingWorker(Collector* c) {
  int id;
  if (!g_mailbox.TakeWorker(&id)) return;
  G->worker = id;
  G->role = "worker";
  c->NoteWorker(id);
}

// What the unwinder has to say of its state (the cfi tables' sizes and
// misses), as a process fact written with the file's end.
void NoteUnwinderState(Collector* c) {
  if (g_sampler.unwinder == nullptr) return;
  if (std::string state = g_sampler.unwinder->Describe(); !state.empty()) {
    c->SetProcessField("unwinder_state", state);
  }
}

uint64_t CollectorCpuNs() {
  const uint64_t retired = g_collector_cpu_retired_ns.load();
  const pid_t tid = g_collector_cpu_tid.load();
  return retired + static_cast<uint64_t>(tid > 0 ? std::max<int64_t>(ThreadCpuNs(tid), 0) : 0);
}

void CountCollectorCpuOfThisThread() { g_collector_cpu_tid.store(CurrentTid()); }

void ForgetParentCollector() {
  g_pause_mu = PTHREAD_MUTEX_INITIALIZER;  // only the forking thread is left
  g_pause_depth = 0;
  g_paused_running = false;
  g_collector_cpu_tid.store(0);
  g_collector_cpu_retired_ns.store(0);
}

void StartCollector(bool fork_child) {
  if (G->collector_process) {
    if (const char* why = fork_child ? HelperCannotServeForkChild() : HelperWouldBeOurChild()) {
      G->collector_process = false;
      G->collector_note = std::string("thread: ") + why;
    }
  }
  if (G->collector_process) {
    g_collector->SetProcessField("collector", "process");
    std::string why;
    if (StartCollectorProcess(*g_collector, ThisProcessesProfileFile(), G->config.snapshot_ms,
                              G->config.mode == Mode::kLight, /*file_at_once=*/!fork_child, &why)) {
      NoteLoaderGenerationAtHelperStart();
      // What its fork children's helpers will be told (they allocate nothing).
      std::unique_ptr<Collector> fields(NewCollector());
      PrepareForkChildArgs(*fields, ThisProcessesProfileFile(), G->config.snapshot_ms,
                           G->config.mode == Mode::kLight);
      return;
    }
    G->collector_process = false;
    G->collector_note = "thread: " + why;
    Warn("dlprof: " + why + "; the collector runs as a thread");
  }
  if (!G->collector_note.empty()) g_collector->SetProcessField("collector", G->collector_note);
  StartCollectorThread();
}

bool StartCollectorThread() {
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // The default stack is RLIMIT_STACK's size: with `ulimit -s 4000000` the
  // collector alone reserved 4 GB of the program's address space, and past
  // the machine's memory it could not start at all. 2-8 MiB, as glibc's
  // usual default.
  constexpr size_t kMinStack = size_t{2} << 20, kMaxStack = size_t{8} << 20;
  size_t stack = 0;
  if (pthread_attr_getstacksize(&attr, &stack) == 0 && (stack < kMinStack || stack > kMaxStack)) {
    pthread_attr_setstacksize(&attr, std::clamp(stack, kMinStack, kMaxStack));
  }
  g_collector_running.store(true);
  g_collector_entered.store(0);
  g_collector_tid.store(0, std::memory_order_relaxed);  // the new one stores its own first
  int rc = StartInternalThread(&thread, &attr, CollectorMain, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    g_collector_running.store(false);
    Warn(std::string("dlprof: cannot start its collector thread: ") + strerror(rc));
    return false;
  }
  // Under ASan, returns once the thread runs CollectorMain (at most 1 s),
  // i.e. once the sanitizer's thread start is over. ASan's allocates (its
  // thread start runs pthread_getattr_np, which frees), and a fork() right
  // after start (a program that forks its workers at once) copied its
  // allocator lock held into the child, whose own collector then waited for
  // it for ever. Past this point the collector does its work under
  // g_collector_mu, which LockForFork holds across fork(). glibc's own thread
  // start holds nothing a fork child could inherit, so other builds do not
  // wait: the wait was a context switch at every process start and every
  // fork (a shell's child waited for a thread its exec then ended), and a
  // scheduling latency on a busy machine. (TSan's interceptor waits itself.)
  // (A futex, not a sleep loop: each sleep of 100 us took up to a
  // millisecond on a VM, at every process start.)
#if defined(__SANITIZE_ADDRESS__)
  const int64_t deadline = MonotonicNs() + 1000000000LL;
  while (g_collector_entered.load(std::memory_order_acquire) == 0) {
    const int64_t left = deadline - MonotonicNs();
    if (left <= 0) break;
    const timespec wait{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    syscall(SYS_futex, &g_collector_entered, FUTEX_WAIT_PRIVATE, 0, &wait, nullptr, 0);
  }
#endif
  return true;
}

namespace {

// A thread's credential lines of /proc/.../status, in order; "" if
// unreadable or if one is missing. The file is read whole: with some 420
// supplementary groups the capability lines are past its first 4 KiB, and
// two cut texts compared equal where the capabilities differed.
std::string CredentialLines(const char* path) {
  const int fd = OpenOwn(AT_FDCWD, path, O_RDONLY);
  if (fd < 0) return "";
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0 && text.size() < (size_t{1} << 20)) text.append(buf, n);
  close(fd);
  static const char* const kKeys[] = {"Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"};
  std::string out;
  for (const char* key : kKeys) {
    const std::string at = std::string("\n") + key;
    const size_t begin = text.find(at);
    if (begin == std::string::npos) return "";
    const size_t end = text.find('\n', begin + 1);
    if (end == std::string::npos) return "";
    out.append(text, begin + 1, end - begin);
  }
  return out;
}

}  // namespace

bool CollectorHasCallersCredentials() {
  if (!g_collector_running.load(std::memory_order_acquire)) return true;
  const pid_t tid = g_collector_tid.load(std::memory_order_relaxed);
  if (tid <= 0) return true;
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/status", static_cast<int>(tid));
  const std::string collector = CredentialLines(path);
  snprintf(path, sizeof(path), "/proc/self/task/%d/status", static_cast<int>(CurrentTid()));
  return !collector.empty() && collector == CredentialLines(path);
}

bool PauseCollector() {
  // (A helper process is no thread of the program's: nothing to pause.)
  if (!OwnSession() || CollectorIsProcess()) return false;
  pthread_mutex_lock(&g_pause_mu);
  if (g_pause_depth++ == 0) g_paused_running = StopCollectorThread();
  pthread_mutex_unlock(&g_pause_mu);
  return true;
}

bool StopCollectorThread() {
  if (!g_collector_running.load(std::memory_order_acquire)) return false;
  g_mailbox.Post(kRequestPause);
  // Until its task is gone, not only its loop: the kernel counts threads.
  // The tid is read once the loop is left: a collector started a moment ago
  // may not have stored its own yet (it does so first thing, before its
  // loop; StartCollectorThread clears the last one's). Python's fork
  // warning counted a collector that a resume had just started.
  const timespec step{0, 100000};
  for (int i = 0; i < 20000; ++i) {
    if (!g_collector_running.load(std::memory_order_acquire)) {
      const pid_t tid = g_collector_tid.load(std::memory_order_relaxed);
      if (tid <= 0 || (syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH)) break;
    }
    nanosleep(&step, nullptr);
  }
  return true;
}

void ResumeCollector(bool paused) {
  if (!paused) return;
  pthread_mutex_lock(&g_pause_mu);
  if (g_pause_depth > 0 && --g_pause_depth == 0) {
    g_mailbox.Withdraw(kRequestPause);  // (not taken if the collector had ended already)
    if (g_paused_running && OwnSession() && !g_collector_running.load(std::memory_order_acquire)) {
      StartCollectorThread();
    }
    g_paused_running = false;
  }
  pthread_mutex_unlock(&g_pause_mu);
}

}  // namespace dlprof
