// "itimer": the process-wide profiling interval timer, setitimer(ITIMER_PROF),
// as gperftools uses. It always delivers SIGPROF, to whichever thread is
// running when the process's CPU time crosses a period, and it is checked on
// the scheduler tick, so it cannot exceed CONFIG_HZ signals per second in
// total. It is the fallback that works everywhere.
//
// Unlike POSIX timers and perf fds, the timer survives execve(): a program
// exec'ed while it runs gets SIGPROF with the default action (termination)
// unless Stop() ran first.
#include <errno.h>
#include <sys/time.h>

#include <atomic>
#include <cstring>

#include "backends/backend_factories.h"

namespace dlprof {
namespace {

class ItimerTimerSource : public TimerSource {
 public:
  const char* name() const override { return "itimer"; }
  bool PerThread() const override { return false; }
  std::string note() const override {
    return "process-wide setitimer(ITIMER_PROF): SIGPROF to whichever thread runs, capped "
           "by the scheduler tick";
  }

  // The kernel sends ITIMER_PROF's signal with SI_KERNEL; so does any other
  // kernel-raised SIGPROF, of which there is none.
  // This function is safe to call from asynchronous signals.
  bool IsOwnSignal(const siginfo_t* info) const override { return info->si_code == SI_KERNEL; }
  bool SurvivesExec() const override { return true; }

  bool Start(int signo, int hz, std::string* error) override {
    if (signo != SIGPROF) {
      *error = "itimer: setitimer(ITIMER_PROF) can only deliver SIGPROF";
      return false;
    }
    if (hz <= 0 || hz > 100000) {
      *error = "itimer: hz must be in [1, 100000], got " + std::to_string(hz);
      return false;
    }
    period_.tv_sec = hz == 1 ? 1 : 0;
    period_.tv_usec = hz == 1 ? 0 : 1000000 / hz;
    started_ = true;
    return true;
  }

  bool ArmThread(pid_t tid, ThreadTimer* t, std::string* error) override {
    (void)tid;
    if (!started_) {
      *error = "itimer: not started";
      return false;
    }
    t->armed = true;
    if (process_armed_.exchange(true)) return true;
    itimerval value;
    value.it_interval = period_;
    value.it_value = period_;
    if (setitimer(ITIMER_PROF, &value, nullptr) != 0) {
      process_armed_ = false;
      t->armed = false;
      *error = std::string("itimer: setitimer: ") + strerror(errno);
      return false;
    }
    return true;
  }

  // One timer for the whole process: a thread cannot leave it. The caller
  // ignores signals on threads it no longer samples.
  void DisarmThread(ThreadTimer* t) override { t->armed = false; }

  // Stops the process's ITIMER_PROF only while it is ours: a program that
  // set its own interval since keeps it.
  void Stop() override {
    itimerval now;
    if (process_armed_ && getitimer(ITIMER_PROF, &now) == 0 &&
        now.it_interval.tv_sec == period_.tv_sec && now.it_interval.tv_usec == period_.tv_usec) {
      itimerval zero;
      memset(&zero, 0, sizeof(zero));
      setitimer(ITIMER_PROF, &zero, nullptr);
    }
    process_armed_ = false;
    started_ = false;
  }

  // fork() does not copy interval timers: the child must arm its own.
  void ForgetInherited(ThreadTimer* t) override {
    t->armed = false;
    process_armed_ = false;
  }

 private:
  timeval period_{};
  std::atomic<bool> started_{false};
  std::atomic<bool> process_armed_{false};
};

}  // namespace

std::unique_ptr<TimerSource> NewItimerTimerSource() {
  return std::make_unique<ItimerTimerSource>();
}

}  // namespace dlprof
