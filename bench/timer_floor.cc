// The platform's price of one profiling signal, with no profiler around it:
// a fixed single-thread loop, and a timer that sends SIGPROF every 1/hz
// seconds of its CPU time to an empty handler. What a sample costs beyond
// this is the profiler's own; what this costs (the timer interrupt, on a VM
// its exits, the signal frame and sigreturn) every signal-based sampler pays.
//
//   timer_floor --timer none|perf|posix|itimer --hz 1000 [--work UNITS] [--syscall-in-handler 1]
//
// perf is a per-thread task-clock perf_event, user mode only, with O_ASYNC
// and F_SETOWN_EX (what dlprof's perf timer source arms); posix a
// timer_create(CLOCK_THREAD_CPUTIME_ID) timer; itimer setitimer(ITIMER_PROF)
// (what gperftools uses). --syscall-in-handler 1 makes the handler read the
// thread's CPU clock (a system call), as dlprof's handler does for sample
// weights. The handler's own wall-clock time is summed either way, which
// shows whether the thread gets descheduled inside it. Prints:
//   timer_floor: timer=perf hz=1000 cpu_s=... signals=... handler_wall_ms=... handler_max_ms=...
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::atomic<long> g_signals{0};
bool g_syscall_in_handler = false;
int64_t g_handler_wall_ns = 0;  // only this thread's handler writes these
int64_t g_handler_max_ns = 0;

int64_t Ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Handler(int, siginfo_t*, void*) {
  const int saved_errno = errno;
  const int64_t start = Ns(CLOCK_MONOTONIC);
  g_signals.fetch_add(1, std::memory_order_relaxed);
  if (g_syscall_in_handler) Ns(CLOCK_THREAD_CPUTIME_ID);
  const int64_t took = Ns(CLOCK_MONOTONIC) - start;
  g_handler_wall_ns += took;
  if (took > g_handler_max_ns) g_handler_max_ns = took;
  errno = saved_errno;
}

double ThreadCpuSeconds() { return static_cast<double>(Ns(CLOCK_THREAD_CPUTIME_ID)) * 1e-9; }

bool Arm(const std::string& timer, int hz) {
  const long period_ns = 1000000000L / hz;
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer == "perf") {
    perf_event_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = static_cast<uint64_t>(period_ns);
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, 0));
    if (fd < 0) return false;
    f_owner_ex owner{F_OWNER_TID, tid};
    return fcntl(fd, F_SETOWN_EX, &owner) == 0 && fcntl(fd, F_SETSIG, SIGPROF) == 0 &&
           fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) == 0 &&
           ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) == 0;
  }
  if (timer == "posix") {
    sigevent se;
    memset(&se, 0, sizeof(se));
    se.sigev_notify = SIGEV_THREAD_ID;
    se.sigev_signo = SIGPROF;
    se._sigev_un._tid = tid;
    timer_t id;
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &se, &id) != 0) return false;
    itimerspec its{{0, period_ns}, {0, period_ns}};
    return timer_settime(id, 0, &its, nullptr) == 0;
  }
  if (timer == "itimer") {
    itimerval it{{0, period_ns / 1000}, {0, period_ns / 1000}};
    return setitimer(ITIMER_PROF, &it, nullptr) == 0;
  }
  return timer == "none";
}

}  // namespace

int main(int argc, char** argv) {
  std::string timer = "none";
  int hz = 1000;
  long work = 100;  // units of ~10 ms
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--timer")) timer = argv[i + 1];
    else if (!strcmp(argv[i], "--hz")) hz = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--work")) work = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--syscall-in-handler")) g_syscall_in_handler = atoi(argv[i + 1]) != 0;
  }
  if (hz < 1 || work < 1) {
    fprintf(stderr, "usage: timer_floor --timer none|perf|posix|itimer --hz HZ [--work UNITS]\n");
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = Handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  if (!Arm(timer, hz)) {
    fprintf(stderr, "timer_floor: cannot arm timer '%s': %s\n", timer.c_str(), strerror(errno));
    return 1;
  }
  const double start = ThreadCpuSeconds();
  uint64_t x = 1;
  for (long u = 0; u < work; ++u) {
    for (int i = 0; i < 6500000; ++i) {
      x ^= x >> 31;
      x *= 0x9e3779b97f4a7c15ull;
    }
    asm volatile("" : "+r"(x));
  }
  const double cpu = ThreadCpuSeconds() - start;
  printf("timer_floor: timer=%s hz=%d syscall_in_handler=%d cpu_s=%.4f signals=%ld handler_wall_ms=%.2f "
         "handler_max_ms=%.2f x=%llu\n",
         timer.c_str(), hz, g_syscall_in_handler ? 1 : 0, cpu, g_signals.load(), g_handler_wall_ns * 1e-6,
         g_handler_max_ns * 1e-6, static_cast<unsigned long long>(x & 1));
  return 0;
}
