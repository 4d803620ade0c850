// "perf": one perf_event task-clock counter per thread that signals the thread
// itself every 1/hz seconds of its CPU time.
//
// The kernel runs a task-clock sampling event on an hrtimer that only ticks
// while the thread is on a CPU, so it is not capped by the scheduler tick the
// way POSIX CPU timers and setitimer are (CONFIG_HZ, 250 on Debian). An enabled
// sampling event whose fd has O_ASYNC raises its signal on every overflow with
// no ring buffer mapped and no PERF_EVENT_IOC_REFRESH (__perf_event_overflow
// sets pending_kill on each one; checked by the fidelity tests), so the
// handler makes no syscall. F_SETOWN_EX with F_OWNER_TID sends the signal to
// the sampled thread, not to the process.
//
// No descriptor stays in the program's fd table: once armed, the event is
// held by a read-only mapping of its one-page user area (MADV_DONTFORK, so a
// fork child holds nothing) and the fd is closed. The program may then close
// every fd or dup2 over any number without touching dlprof's events, and a
// low RLIMIT_NOFILE is all the program's. Unmapping is disarming: the last
// reference goes and the event with it; an exec drops it the same way. The
// kernel charges the page to perf_event_mlock_kb (516 KiB per user by
// default); past it (and without CAP_IPC_LOCK) the mapping is refused, and
// the event keeps its fd instead, moved high (backends/private_fd.h).
//
// User mode only (exclude_kernel=1), on purpose. A tick that lands while the
// thread is inside a syscall would queue the signal there, and a pending
// signal makes nanosleep, poll, epoll_wait and select fail with EINTR even
// under SA_RESTART: the profiler would change the program (measured: a few
// EINTR per second at 1000 Hz with exclude_kernel=0). With exclude_kernel=1
// the signal is only raised in user mode, before the thread can block. Time
// spent in the kernel is not lost: the core weighs each sample by the thread
// CPU time since the previous one (CpuTimeWeighted()), so the syscall's CPU
// goes to the next user-mode sample. That sample comes a period after the
// lost one, so its stack is the syscall's caller only if the thread is still
// there: a function shorter than a period that makes system calls leaves
// their CPU to whatever runs next (docs/ARCHITECTURE.md).
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "backends/backend_factories.h"
#include "backends/private_fd.h"

namespace dlprof {
namespace {

int PerfEventOpen(perf_event_attr* attr, pid_t tid) {
  return static_cast<int>(
      syscall(SYS_perf_event_open, attr, tid, /*cpu=*/-1, /*group_fd=*/-1, PERF_FLAG_FD_CLOEXEC));
}

// Opens a disabled, user-mode-only task-clock sampling event on `tid`; -1 and
// errno on failure.
int OpenTaskClock(pid_t tid, uint64_t period_ns) {
  perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.sample_period = period_ns;
  attr.disabled = 1;
  attr.inherit = 0;         // Threads and children the thread creates get their own.
  attr.exclude_kernel = 1;  // See the file comment.
  attr.exclude_hv = 1;
  // Armed at every thread's start: at 0-2 (a program that closed them) the
  // event would hold the program's number through the whole arming.
  return AboveStdio(PerfEventOpen(&attr, tid));
}

std::string Errno(const char* what, int err) { return std::string(what) + ": " + strerror(err); }

class PerfTimerSource : public TimerSource {
 public:
  const char* name() const override { return "perf"; }
  bool PerThread() const override { return true; }
  std::string note() const override {
    return "perf task-clock per thread, signals in user mode (kernel time weighed in)";
  }
  bool CpuTimeWeighted() const override { return true; }

  // F_SETSIG makes the kernel fill in the poll band as si_code.
  // This function is safe to call from asynchronous signals.
  bool IsOwnSignal(const siginfo_t* info) const override {
    return info->si_code >= POLL_IN && info->si_code <= POLL_HUP;
  }

  bool Start(int signo, int hz, std::string* error) override {
    if (hz <= 0 || hz > 100000) {
      *error = "perf: hz must be in [1, 100000], got " + std::to_string(hz);
      return false;
    }
    signo_ = signo;
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    period_ns_ = 1000000000ull / static_cast<uint64_t>(hz);
    // Open (and close) one event on this thread now, so that a kernel or
    // sandbox that refuses perf events (perf_event_paranoid=3, seccomp, no
    // CONFIG_PERF_EVENTS) is found here and "auto" can fall back.
    const int fd = OpenTaskClock(CurrentTid(), period_ns_);
    if (fd < 0) {
      *error = Errno("perf: perf_event_open(task-clock)", errno);
      return false;
    }
    close(fd);
    started_ = true;
    return true;
  }

  bool ArmThread(pid_t tid, ThreadTimer* t, std::string* error) override {
    if (!started_) {
      *error = "perf: not started";
      return false;
    }
    if (t->armed) return true;
    const int fd = OpenTaskClock(tid, period_ns_);
    if (fd < 0) {
      *error = Errno("perf: perf_event_open", errno);
      return false;
    }
    f_owner_ex owner;
    owner.type = F_OWNER_TID;
    owner.pid = tid;
    const int flags = fcntl(fd, F_GETFL);
    if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, signo_) != 0 || flags < 0 ||
        fcntl(fd, F_SETFL, flags | O_ASYNC) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
      const int err = errno;
      close(fd);
      *error = Errno("perf: arming the event", err);
      return false;
    }
    void* map = mmap(nullptr, page_, PROT_READ, MAP_SHARED,
                     fd, 0);
    if (map != MAP_FAILED) {
      madvise(map, page_, MADV_DONTFORK);
      close(fd);  // the mapping holds the event now
      t->map = map;
    } else {
      PrivateFd kept = KeepPrivate(fd);
      uint64_t id = 0;
      if (!kept.valid() || ioctl(kept.fd, PERF_EVENT_IOC_ID, &id) != 0) {
        ReleasePrivate(&kept);
        *error = Errno("perf: keeping the event", errno);
        return false;
      }
      t->fd = kept.fd;
      t->event_id = id;
    }
    t->armed = true;
    return true;
  }

  void DisarmThread(ThreadTimer* t) override {
    if (t->map != nullptr) {
      munmap(t->map, page_);
    } else if (StillOurEvent(*t)) {
      // Disable first: close() alone leaves the event counting until the last
      // reference goes, and a forked child may still hold one.
      ioctl(t->fd, PERF_EVENT_IOC_DISABLE, 0);
      close(t->fd);
    }
    t->map = nullptr;
    t->fd = -1;
    t->armed = false;
  }

  // Per-thread events live in the callers' ThreadTimer slots, which disarm
  // them; closing them here as well would close reused fd numbers.
  void Stop() override { started_ = false; }

  void ForgetInherited(ThreadTimer* t) override {
    // A mapping did not come over (MADV_DONTFORK). An fd shares its open file
    // with the parent's: disabling it or clearing O_ASYNC would stop the
    // parent's samples. Dropping our reference is all.
    if (t->map == nullptr && StillOurEvent(*t)) close(t->fd);
    t->map = nullptr;
    t->fd = -1;
    t->armed = false;
  }

 private:
  // The fd still names our event: the program may have closed the number
  // and opened a perf event of its own under it. Async-signal-safe.
  static bool StillOurEvent(const ThreadTimer& t) {
    uint64_t id = 0;
    return t.fd >= 0 && ioctl(t.fd, PERF_EVENT_IOC_ID, &id) == 0 && id == t.event_id;
  }

  int signo_ = 0;
  size_t page_ = 4096;  // the user page's size (a perf mapping is exactly one)
  uint64_t period_ns_ = 0;
  std::atomic<bool> started_{false};
};

}  // namespace

std::unique_ptr<TimerSource> NewPerfTimerSource() { return std::make_unique<PerfTimerSource>(); }

}  // namespace dlprof
