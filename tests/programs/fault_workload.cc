// A program with a known, deterministic output, profiled by the fault tests
// (tests/faults_test.cc): what it prints and its exit status must not depend on
// whether dlprof runs, fails to write, or steps aside.
// Usage: fault_workload MODE [args]; see main() for the modes.
//
// The last line of stdout is "diag: ..." and describes dlprof's footprint in
// the process at that moment (its threads and armed timers); the tests compare
// everything before it with an unprofiled run.
#include <dlprof/dlprof.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// A deterministic result: the tests compare it with an unprofiled run.
uint64_t g_checksum = 1469598103934665603ULL;
int g_flushes_ok = 0;

// Burns `ns` of this thread's CPU time, folding a fixed sequence into the
// checksum (how many rounds run depends on the machine; the checksum only on
// `rounds`, which the caller fixes).
__attribute__((noinline)) void Burn(int64_t ns) {
  volatile uint64_t x = 88172645463325252ULL;
  int64_t end = ThreadCpuNs() + ns;
  while (ThreadCpuNs() < end) {
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
}

__attribute__((noinline)) void Fold(int round) {
  for (int i = 0; i < 1000; ++i) g_checksum = (g_checksum ^ (round * 1000 + i)) * 1099511628211ULL;
}

// Threads of this process, and the profiling timers armed in it: perf event
// fds, POSIX timers (/proc/self/timers), and the process's ITIMER_PROF.
std::string Diag() {
  int threads = 0, perf_fds = 0, posix_timers = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) threads += e->d_name[0] != '.';
    closedir(d);
  }
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char path[300], target[256];
      snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
      ssize_t n = readlink(path, target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (strstr(target, "perf_event") != nullptr) ++perf_fds;
    }
    closedir(d);
  }
  // A perf event dlprof armed is held by a mapping of its user page, not an fd.
  if (FILE* f = fopen("/proc/self/maps", "r")) {
    char line[512];
    while (fgets(line, sizeof(line), f)) perf_fds += strstr(line, "perf_event") != nullptr;
    fclose(f);
  }
  if (FILE* f = fopen("/proc/self/timers", "r")) {
    char line[256];
    while (fgets(line, sizeof(line), f)) posix_timers += strncmp(line, "ID:", 3) == 0;
    fclose(f);
  }
  itimerval it;
  getitimer(ITIMER_PROF, &it);
  const int itimer = it.it_interval.tv_sec != 0 || it.it_interval.tv_usec != 0;
  char buf[160];
  snprintf(buf, sizeof(buf), "diag: threads=%d timers=%d enabled=%d flushes_ok=%d", threads,
           perf_fds + posix_timers + itimer, dlprof_enabled(), g_flushes_ok);
  return buf;
}

// `rounds` steps of ~`ms_per_round` CPU each in stages "load" and "compute",
// then the checksum. The exit status is 7, on purpose: it must not change.
int Steady(int rounds, int ms_per_round) {
  dlprof::Buffer queue("queue", 4);
  for (int r = 0; r < rounds; ++r) {
    dlprof::StepScope step;
    {
      dlprof::WaitScope wait;
      DLPROF_STAGE("load");
      Burn(ms_per_round * 300000LL);
    }
    queue.set_size(static_cast<uint64_t>(r % 5));
    DLPROF_STAGE("compute");
    Burn(ms_per_round * 700000LL);
    Fold(r);
    if (r % 10 == 9) {
      printf("round %d checksum %016llx\n", r + 1, (unsigned long long)g_checksum);
      // The profile grows in known steps (and a flush after a write error
      // must return at once, not wait).
      g_flushes_ok += dlprof_flush(2000) == 0;
    }
  }
  printf("result %016llx\n", (unsigned long long)g_checksum);
  printf("%s\n", Diag().c_str());
  fflush(stdout);
  return 7;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s steady [ROUNDS [MS_PER_ROUND]]\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "steady") {
    return Steady(argc > 2 ? atoi(argv[2]) : 100, argc > 3 ? atoi(argv[3]) : 20);
  }
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
