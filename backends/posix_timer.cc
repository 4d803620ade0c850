// "posix": a POSIX timer on each thread's CPU-time clock, signalling that
// thread (SIGEV_THREAD_ID) every 1/hz seconds of its CPU time.
//
// The kernel checks CPU timers on the scheduler tick (CONFIG_HZ, 250 on
// Debian), so above that rate a signal stands for several periods; the kernel
// counts the missed ones as timer overruns, which Overrun() reads from the
// siginfo so the caller can weight the sample.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstring>

#include "backends/backend_factories.h"

namespace dlprof {
namespace {

// The kernel's clock id for a thread's scheduler CPU clock:
// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) = (~tid << 3) | PERTHREAD(4) | SCHED(2).
// glibc only offers it for pthread_t's (pthread_getcpuclockid), not for a tid.
clockid_t ThreadCpuClock(pid_t tid) {
  if (tid == CurrentTid()) {
    clockid_t clock;
    if (pthread_getcpuclockid(pthread_self(), &clock) == 0) return clock;
  }
  return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u);
}

class PosixTimerSource : public TimerSource {
 public:
  const char* name() const override { return "posix"; }
  bool PerThread() const override { return true; }
  std::string note() const override {
    return "POSIX per-thread CPU-time timers (checked on the scheduler tick; overruns "
           "count the periods between)";
  }

  bool Start(int signo, int hz, std::string* error) override {
    if (hz <= 0 || hz > 100000) {
      *error = "posix: hz must be in [1, 100000], got " + std::to_string(hz);
      return false;
    }
    signo_ = signo;
    period_.tv_sec = 0;
    period_.tv_nsec = 1000000000L / hz;
    if (hz == 1) {
      period_.tv_sec = 1;
      period_.tv_nsec = 0;
    }
    // Make sure CPU-clock timers exist here (they need no privilege).
    sigevent sev;
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_NONE;
    timer_t probe;
    if (timer_create(ThreadCpuClock(CurrentTid()), &sev, &probe) != 0) {
      *error = std::string("posix: timer_create(thread CPU clock): ") + strerror(errno);
      return false;
    }
    timer_delete(probe);
    started_ = true;
    return true;
  }

  bool ArmThread(pid_t tid, ThreadTimer* t, std::string* error) override {
    if (!started_) {
      *error = "posix: not started";
      return false;
    }
    if (t->armed) return true;
    sigevent sev;
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = signo_;
    sev._sigev_un._tid = tid;
    // Lets Overrun() tell this source's signals from other timers'.
    sev.sigev_value.sival_ptr = this;
    timer_t timer;
    if (timer_create(ThreadCpuClock(tid), &sev, &timer) != 0) {
      *error = std::string("posix: timer_create: ") + strerror(errno);
      return false;
    }
    itimerspec spec;
    spec.it_interval = period_;
    spec.it_value = period_;
    if (timer_settime(timer, 0, &spec, nullptr) != 0) {
      const int err = errno;
      timer_delete(timer);
      *error = std::string("posix: timer_settime: ") + strerror(err);
      return false;
    }
    t->timer = timer;
    t->armed = true;
    return true;
  }

  void DisarmThread(ThreadTimer* t) override {
    // Timers belong to the process, not the thread, so this works after the
    // thread has exited too.
    if (t->armed) timer_delete(t->timer);
    t->timer = timer_t{};
    t->armed = false;
  }

  // Timers live in the callers' ThreadTimer slots, which disarm them; deleting
  // them here as well would delete ids the process may have reused.
  void Stop() override { started_ = false; }

  // fork() does not copy POSIX timers; the id means nothing in the child (and
  // may name a timer the child creates later), so only forget it.
  void ForgetInherited(ThreadTimer* t) override {
    t->timer = timer_t{};
    t->armed = false;
  }

  // Our timers carry this source as sival_ptr (ArmThread).
  // This function is safe to call from asynchronous signals.
  bool IsOwnSignal(const siginfo_t* info) const override {
    return info->si_code == SI_TIMER && info->si_value.sival_ptr == this;
  }

  // This function is safe to call from asynchronous signals.
  int Overrun(const siginfo_t* info) const override {
    if (info == nullptr || info->si_code != SI_TIMER || info->si_value.sival_ptr != this) return 0;
    return info->si_overrun > 0 ? info->si_overrun : 0;
  }

 private:
  int signo_ = 0;
  timespec period_{};
  std::atomic<bool> started_{false};
};

}  // namespace

std::unique_ptr<TimerSource> NewPosixTimerSource() { return std::make_unique<PosixTimerSource>(); }

}  // namespace dlprof
