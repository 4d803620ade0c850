// A thread that wakes briefly and often, on a core it must share: what a
// DataLoader's queue feeder thread is (tests/wait_accounting_test.cc).
// Pinned to one CPU, a thread spins in stage "spin" while another, at nice
// 19, sleeps 2 ms and then burns 100 us of CPU in stage "feed", again and
// again: woken, it waits for the spinner's core, about 70% of its time
// (nice 10 or 12 waited under 1% on kernel 6.18, 15 a third).
// Its truth is the kernel's own count of that wait, run_delay in its
// /proc/thread-self/schedstat, read when it enters the stage and when it
// leaves it.
// Usage: feeder_wait SECONDS
// Prints "feed_wait_ns=W feed_wall_ns=T spin_cpu_ns=C", then "done".
#include <dlprof/dlprof.hpp>

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

int64_t Clock(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t RunDelay() {
  FILE* f = fopen("/proc/thread-self/schedstat", "r");
  if (f == nullptr) return -1;
  unsigned long long run = 0, delay = 0;
  const int got = fscanf(f, "%llu %llu", &run, &delay);
  fclose(f);
  return got == 2 ? static_cast<int64_t>(delay) : -1;
}

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_sink{0};

__attribute__((noinline)) void Burn(int64_t ns) {
  const int64_t end = Clock(CLOCK_THREAD_CPUTIME_ID) + ns;
  uint64_t x = g_sink.load(std::memory_order_relaxed);
  while (Clock(CLOCK_THREAD_CPUTIME_ID) < end) {
    for (int i = 0; i < 200; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  g_sink.store(x, std::memory_order_relaxed);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
    return 2;
  }
  const int64_t run_ns = static_cast<int64_t>(atof(argv[1]) * 1e9);
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return 1;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  if (sched_setaffinity(0, sizeof(one), &one) != 0) return 1;  // inherited by the threads
  int64_t spin_cpu = 0;
  std::thread spinner([&] {
    DLPROF_STAGE("spin");
    const int64_t c0 = Clock(CLOCK_THREAD_CPUTIME_ID);
    while (!g_stop.load(std::memory_order_relaxed)) Burn(1000000);
    spin_cpu = Clock(CLOCK_THREAD_CPUTIME_ID) - c0;
  });
  int64_t wait = -1, wall = 0;
  std::thread feeder([&] {
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    DLPROF_STAGE("feed");
    const int64_t d0 = RunDelay(), w0 = Clock(CLOCK_MONOTONIC);
    while (Clock(CLOCK_MONOTONIC) - w0 < run_ns) {
      const timespec nap{0, 2000000};
      nanosleep(&nap, nullptr);
      Burn(100000);
    }
    const int64_t d1 = RunDelay();
    wall = Clock(CLOCK_MONOTONIC) - w0;
    wait = d0 >= 0 && d1 >= 0 ? d1 - d0 : -1;
  });
  feeder.join();
  g_stop.store(true);
  spinner.join();
  printf("feed_wait_ns=%lld feed_wall_ns=%lld spin_cpu_ns=%lld\n", static_cast<long long>(wait),
         static_cast<long long>(wall), static_cast<long long>(spin_cpu));
  printf("done\n");
  return 0;
}
