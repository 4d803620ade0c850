// What the session's files share (not for the rest of core/):
//   session.cc           start, end, the program's calls that change the session
//   session_threads.cc   thread registration and the timers' arming
//   session_fork.cc      fork(): the fence, the locks, the child's restart
//   collector_thread.cc  the collector's loop and its mailbox requests
//   run_folder.cc        the run folder and the profile file's opening
// The phase and the mailbox are core/session_state.h.
#ifndef DLPROF_CORE_SESSION_INTERNAL_H_
#define DLPROF_CORE_SESSION_INTERNAL_H_

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>

#include "backends/timer_source.h"
#include "backends/unwinder.h"
#include "core/collector.h"
#include "core/config.h"
#include "core/hooks.h"
#include "core/profile_file.h"
#include "core/session_state.h"
#include "core/thread_registry.h"

namespace dlprof {

constexpr int kProfilingSignal = SIGPROF;

// Everything non-trivial lives on the heap, made by StartSession: the library
// constructor may run before static initializers (and there are none:
// Runtime.LibraryHasNoDynamicInitializers).
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
  // The run folder's identity: it is opened by its absolute path whenever a
  // file is made in it, and must be this folder.
  dev_t run_dev = 0;
  ino_t run_ino = 0;
  int worker = -1;
  int fork_seq = 0;  // in a child: its fork order among its parent's children
  int forks = 0;     // children forked so far
  // Under the collector lock: the baseline's end is still to be written down.
  bool waiting_for_baseline = false;
  // libdlprof came after libc (dlopen): _exit is not seen, so the collector
  // writes at every tick instead of once a second.
  bool write_every_tick = false;
  // DLPROF_COLLECTOR=process can serve this process (core/collector_process.h);
  // else the note says why not, for the PROCESS field "collector".
  bool collector_process = false;
  std::string collector_note;
};
extern SessionGlobals* G;

// This process's profile file and the lock its writers take (the collector,
// the exiting thread, fork).
extern Collector* g_collector;
extern pthread_mutex_t g_collector_mu;

// The unprofiled baseline's remaining steps (DLPROF_BASELINE_STEPS); with a
// baseline, in a MAP_SHARED page, so that forked workers, which never end a
// step themselves, see the training loop's count reach zero.
extern std::atomic<int>* g_baseline_remaining;

// The process this session samples: a vfork() child runs in our memory and
// must not end or pause the parent's session.
extern std::atomic<pid_t> g_session_pid;
// Whether this process is the one the session samples and it is recording.
// This function is safe to call from asynchronous signals.
bool OwnSession();

void Warn(const std::string& msg);
// A constant line: no allocation (callers may have every signal blocked, or
// run in a signal handler).
void WarnLine(const char* line);

// --- session_threads.cc ---

// Every arm and disarm of a thread timer happens under this lock (a thread
// exiting, the collector, a sigaction call stepping aside may race on one
// slot). Re-entered by the thread that holds it (a signal handler of the
// program that interrupted the holder, calling sigaction): then it is not
// locked, and the caller must not wait for it.
class TimerLock {
 public:
  TimerLock();
  ~TimerLock();
  bool locked() const { return locked_; }
  TimerLock(const TimerLock&) = delete;
  TimerLock& operator=(const TimerLock&) = delete;

 private:
  bool locked_ = false;
};
void LockTimersForFork();
void UnlockTimersAfterFork();
// In a fork child whose prepare handler took no lock: written over.
void ResetTimerLockInForkChild();

extern pthread_key_t g_thread_key;
// The main thread called pthread_exit() (see CollectorMain).
extern std::atomic<bool> g_main_thread_exited;

// Resolves the pthread_create functions (once, at start: a fork child must
// never call dlsym) and how program threads are registered.
void ResolveThreadCreation();
// Starts one of dlprof's own threads: seen by a sanitizer like any thread,
// never sampled. Not signal-safe.
int StartInternalThread(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                        void* arg);

// Timers are armed only in the Sampling phase.
bool Armed();
void ArmSlot(ThreadSlot* s);
void ArmAllLiveThreads();
// Disarms every thread; when the timer lock cannot be taken (a signal handler
// interrupted this thread inside ArmSlot), asks the collector to.
void DisarmAllLiveThreads();
// Before an exec: every thread disarmed, and a timer that survives exec
// (setitimer) stopped, or it would kill the new image. After a failed exec,
// the other way round. The collector thread does it when it serves the
// exec's request; with the collector process, the exec'ing thread itself.
void DisarmForExec();
void RearmAfterFailedExec();
// A process-wide timer (setitimer) is not stopped by disarming threads.
void StopProcessTimer();
// Switches CPU sampling off for good (the phase steps aside; first reason
// wins); false if it already was. Async-signal-safe apart from the timer lock.
bool StopSampling(OffReason reason);

// `prepare`: run the unwinder's warm-up here (the first thread only).
ThreadSlot* RegisterCurrentThread(bool prepare = false, const StackHint* hint = nullptr);
void RegisterExistingThreads();
// The key destructor (g_thread_key): disarms the exiting thread's timer and
// leaves its slot for the collector to drain and free.
void UnregisterThread(void* slot);

// --- collector_thread.cc ---

extern std::atomic<bool> g_collector_running;
bool StartCollectorThread();
// Has the collector leave its loop and waits (at most 2 s) until its task is
// gone; returns whether it was running. PauseCollector without the session
// check (core/session.h).
bool StopCollectorThread();
// A fork child's start: none of the collector CPU time so far is the
// child's (CollectorCpuNs, core/collector.h).
void ForgetParentCollector();
// "sampling is off, and why" into the profile once; a pending worker id; the
// unwinder's state. Collector lock held.
void RecordSamplingOff(Collector* c);
void ApplyPendingWorker(Collector* c);
void NoteUnwinderState(Collector* c);

// --- run_folder.cc ---

// Opens (creating 0700 if needed) DLPROF_OUT and the run folder inside it,
// never following a symlink; sets G's run_id, run_path and the folder's
// identity. All processes of a run share DLPROF_RUN_ID.
bool OpenRunFolder(bool* is_main);
// Creates <role>-<pid>.dlprof in the run folder, never overwriting, with its
// process chunk. nullptr (and one line on stderr) if it cannot.
Collector* OpenCollector();
// The same in two steps: the collector with its process facts and no file
// yet (file_pending), then its file. CreateCollectorFile says why it
// failed in one line on stderr.
Collector* NewCollector();
bool CreateCollectorFile(Collector* c);
// This process's file's place and name (core/profile_file.h).
ProfileFileSpec ThisProcessesProfileFile();
// Starts this process's collector: the helper process where
// G->collector_process says it can serve it, else (or when it cannot be
// started) the thread. Records which in the PROCESS field "collector".
// `fork_child`: its file waits for the first tick (core/collector_process.h).
void StartCollector(bool fork_child);
// A fork child's pending file, made now if it is still pending (before
// anything is written: an exit, a fatal signal, a credential change).
// False if it could not be: this process's profiling is lost then.
// Collector lock held.
bool EnsureCollectorFile();

// --- session_fork.cc (pthread_atfork) ---

void LockForFork();
void UnlockAfterFork();
void ResetInForkChild();

}  // namespace dlprof

#endif  // DLPROF_CORE_SESSION_INTERNAL_H_
