/* Shared helpers of the hostile programs in tests/harm: CPU work measured
 * with raw syscalls (no vDSO, so that a program that disabled RDTSC can use
 * it), and kernel-side views of the process read from /proc. These programs
 * are never linked with dlprof: it comes in only through LD_PRELOAD. */
#ifndef DLPROF_TESTS_HARM_HARM_H_
#define DLPROF_TESTS_HARM_HARM_H_

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline int64_t harm_clock_ns(clockid_t clock) {
  struct timespec ts;
  syscall(SYS_clock_gettime, clock, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static volatile uint64_t harm_sink;

/* Burns `ms` milliseconds of this thread's CPU time. */
static __attribute__((noinline, unused)) void harm_burn_ms(int ms) {
  int64_t end = harm_clock_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)ms * 1000000;
  uint64_t x = harm_sink;
  while (harm_clock_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
    for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  harm_sink = x;
}

/* Entries of /proc/self/task (the threads the kernel sees). */
static inline int harm_thread_count(void) {
  DIR* d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

/* A hex mask line of /proc/self/status ("SigIgn", "SigCgt", ...); 0 if absent. */
static inline uint64_t harm_status_mask(const char* key) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return 0;
  char line[256];
  uint64_t mask = 0;
  size_t n = strlen(key);
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, key, n) == 0 && line[n] == ':') mask = strtoull(line + n + 1, NULL, 16);
  }
  fclose(f);
  return mask;
}

static inline int harm_sig_in(uint64_t mask, int sig) { return (int)((mask >> (sig - 1)) & 1); }

#endif /* DLPROF_TESTS_HARM_HARM_H_ */
