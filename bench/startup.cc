// Start-up costs that a profiled program pays (issue 11): a thread's
// create + join, and a process's start (exec to exit of an empty program),
// each timed by the program itself. It links nothing of dlprof:
// bench/startup.sh runs it with and without LD_PRELOAD=libdlprof.so,
// alternated, and prints the ratios.
//
//   bench_startup threads N   N pthread_create + pthread_join of an empty thread
//   bench_startup spawn N     N posix_spawn + waitpid of `bench_startup noop`
//   bench_startup noop        returns at once
//   bench_startup seteuid N   N seteuid calls, to nobody and back by turns
//                             (root only: a server that toggles its euid;
//                             each is a credential call dlprof interposes)
// Prints "<mode> <wall ns per item> <CPU ns per item>": CPU of the whole
// process for threads (dlprof's collector included), of the children for
// spawn (their start-up and exit, dlprof's included).
#include <pthread.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void* Empty(void*) { return nullptr; }

int64_t CpuNs(int who) {
  rusage ru;
  getrusage(who, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "noop") == 0) return 0;
  if (argc < 3) {
    fprintf(stderr, "usage: %s threads|spawn N\n", argv[0]);
    return 2;
  }
  const int n = atoi(argv[2]);
  const int who = strcmp(argv[1], "spawn") == 0 ? RUSAGE_CHILDREN : RUSAGE_SELF;
  const int64_t cpu_start = CpuNs(who);
  const int64_t start = NowNs();
  if (strcmp(argv[1], "threads") == 0) {
    for (int i = 0; i < n; ++i) {
      pthread_t t;
      if (pthread_create(&t, nullptr, Empty, nullptr) != 0) return 1;
      pthread_join(t, nullptr);
    }
  } else if (strcmp(argv[1], "spawn") == 0) {
    char noop[] = "noop";
    char* child_argv[] = {argv[0], noop, nullptr};
    for (int i = 0; i < n; ++i) {
      pid_t pid;
      if (posix_spawn(&pid, argv[0], nullptr, nullptr, child_argv, environ) != 0) return 1;
      int status;
      waitpid(pid, &status, 0);
    }
  } else if (strcmp(argv[1], "seteuid") == 0) {
    for (int i = 0; i < n; ++i) {
      if (seteuid(i % 2 == 0 ? 65534 : 0) != 0) return 1;
    }
    if (geteuid() != 0 && seteuid(0) != 0) return 1;
  } else {
    return 2;
  }
  const int64_t wall = NowNs() - start;
  printf("%s %.0f %.0f\n", argv[1], static_cast<double>(wall) / n,
         static_cast<double>(CpuNs(who) - cpu_start) / n);
  return 0;
}
