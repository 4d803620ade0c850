// Timer sources: make each thread receive a signal for every 1/hz seconds of
// CPU time it consumes.
#ifndef DLPROF_BACKENDS_TIMER_SOURCE_H_
#define DLPROF_BACKENDS_TIMER_SOURCE_H_

#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/unwinder.h"  // BackendInfo

namespace dlprof {

// What a per-thread timer needs to be disarmed later. Plain data so it can live
// in the preallocated thread slot.
struct ThreadTimer {
  // A perf event is held by a mapping of its user page, with no descriptor
  // in the program's fd table; only when the kernel refuses the mapping
  // (perf_event_mlock_kb spent) is it held by `fd`, kept high and checked
  // by the event's id before use (perf fds share one inode).
  void* map = nullptr;
  int fd = -1;
  uint64_t event_id = 0;
  timer_t timer{};       // POSIX timer id
  bool armed = false;
};

class TimerSource {
 public:
  virtual ~TimerSource() = default;
  virtual const char* name() const = 0;

  // True if each thread has its own timer (perf_event, POSIX CPU timer); false
  // if the signal goes to whichever thread runs (setitimer).
  virtual bool PerThread() const = 0;

  // Process-wide setup, before any thread is armed. `signo` is the signal the
  // handler is installed for (the caller installs it). Not signal-safe.
  virtual bool Start(int signo, int hz, std::string* error) = 0;

  // Starts sampling thread `tid` of this process, from any thread of it.
  // Per-process sources arm once and ignore later calls. Not signal-safe.
  virtual bool ArmThread(pid_t tid, ThreadTimer* t, std::string* error) = 0;
  // Stops sampling the thread. Safe to call on a thread that has exited.
  virtual void DisarmThread(ThreadTimer* t) = 0;

  // Stops everything (at exit). Not signal-safe.
  virtual void Stop() = 0;

  // In a fork()ed child: forget the parent's timers without touching them
  // (close inherited fds), so the child can arm its own. Called once, in the
  // child, before any rearming.
  virtual void ForgetInherited(ThreadTimer* t) = 0;

  // What the source does here, or why "auto" settled on it (after Start).
  virtual std::string note() const { return std::string(); }

  // True when a signal can stand for more CPU time than one period (ticks
  // that landed in the kernel raise none): the handler then weighs each
  // sample by the thread's CPU time since its previous sample.
  virtual bool CpuTimeWeighted() const { return false; }

  // Extra samples this signal stands for (POSIX timer overruns), read from the
  // siginfo. This function is safe to call from asynchronous signals.
  virtual int Overrun(const siginfo_t* info) const { (void)info; return 0; }

  // True when `info` describes a signal this source sent (after Start), false
  // for the program's own (raise, kill, its own timers). Everything else that
  // reaches the handler is delivered as the program asked. This function is
  // safe to call from asynchronous signals.
  virtual bool IsOwnSignal(const siginfo_t* info) const = 0;

  // True when the source's timer outlives execve() (setitimer's does): the
  // caller then Stop()s it before an exec and Start()s it again if the exec
  // fails. Per-thread perf events and POSIX timers die with the image.
  virtual bool SurvivesExec() const { return false; }
};

// "perf", "posix", "itimer", best first, each with whether it works here.
std::vector<BackendInfo> ListTimerSources();
// nullptr (and *error) if unknown. "auto" tries them in order and keeps the first
// whose Start succeeds (the caller is told which through name()).
std::unique_ptr<TimerSource> MakeTimerSource(const std::string& name, std::string* error);

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_TIMER_SOURCE_H_
