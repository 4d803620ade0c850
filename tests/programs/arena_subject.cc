// arena_subject: a program for tests/shared_arena_test.cc's collector-process
// test. In a stage of its own, it burns CPU: after 300 ms of it, it prints
// "ready" and burns on until it is killed.
#include <dlprof/dlprof.h>

#include <time.h>

#include <cstdint>
#include <cstdio>

namespace {

int64_t CpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

}  // namespace

int main() {
  dlprof_stage_enter(dlprof_stage_intern("arena_subject_burn"));
  volatile uint64_t x = 1;
  bool said = false;
  for (;;) {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ULL + 1;
    if (!said && CpuNs() > 300000000) {
      printf("ready\n");
      fflush(stdout);
      said = true;
    }
  }
}
