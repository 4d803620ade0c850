/* fork_in_stage_intern MS: a program whose SIGALRM handler forks (the
 * child _exits at once; 1000 forks at most) while its main thread interns
 * stage names and creates buffers through dlprof's C API for MS
 * milliseconds. fork() is async-signal-safe. The signal comes every ~20 us
 * from a second thread (tgkill, to the main thread only), which never calls
 * dlprof. (Not a process-wide timer: a process-wide signal makes the kernel
 * start a fork again, and under ASan, whose forks take milliseconds, a
 * 1 ms timer kept every fork from ever finishing.) With dlprof, a fork whose handler
 * interrupted dlprof_stage_intern waited for that lock, held by its own
 * thread, for ever (hostile review, session 27); then, with the holder
 * noted beside a mutex, it waited when the signal came between taking the
 * mutex and noting the holder, or between the two on the way out, and
 * when a fork from a handler that interrupted another fork's handlers
 * overwrote what the outer fork had taken (session 28). The API comes from the preloaded library, if any (dlsym): without
 * dlprof the loop only forks. Prints "forked yes" when it forked at all. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef uint32_t (*InternFn)(const char*);
typedef void* (*BufferCreateFn)(const char*, uint64_t);

static volatile sig_atomic_t g_forks;

static void OnAlarm(int signo) {
  (void)signo;
  if (g_forks >= 1000) return;
  pid_t child = fork();
  if (child == 0) _exit(0);
  if (child > 0) g_forks++;
}

static volatile int g_stop;
static pid_t g_main_tid;

static void* Sender(void* unused) {
  (void)unused;
  const struct timespec pause = {0, 20000};
  while (!g_stop) {
    syscall(SYS_tgkill, getpid(), g_main_tid, SIGALRM);
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  const double ms = argc > 1 ? atof(argv[1]) : 1000;
  InternFn intern = (InternFn)dlsym(RTLD_DEFAULT, "dlprof_stage_intern");
  BufferCreateFn buffer_create = (BufferCreateFn)dlsym(RTLD_DEFAULT, "dlprof_buffer_create");
  /* 16 names of 100 bytes that differ only at the end: each intern hashes
   * and compares the whole name under the lock. */
  static char names[16][101];
  for (int i = 0; i < 16; ++i) {
    memset(names[i], 'a', 100);
    names[i][99] = (char)('A' + i);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnAlarm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  g_main_tid = (pid_t)syscall(SYS_gettid);
  pthread_t sender;
  if (pthread_create(&sender, NULL, Sender, NULL) != 0) return 1;
  const double start = Now();
  for (unsigned n = 0; (Now() - start) * 1000 < ms; ++n) {
    if (intern != NULL) intern(names[n % 16]);
    if (buffer_create != NULL && n % 4096 == 0) buffer_create(names[n % 16], 16);
    if (n % 256 == 0)
      while (waitpid(-1, NULL, WNOHANG) > 0) {
      }
  }
  g_stop = 1;
  pthread_join(sender, NULL);
  while (waitpid(-1, NULL, 0) > 0) {
  }
  printf("forked %s\n", g_forks > 0 ? "yes" : "no");
  return 0;
}
