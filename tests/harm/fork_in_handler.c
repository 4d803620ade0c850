/* fork_in_handler MS: a single-threaded program whose SIGALRM handler forks
 * (the child _exits at once) every millisecond for MS ms of CPU while the
 * main loop mallocs and frees. glibc's fork takes malloc's locks only in a
 * multi-threaded process: single-threaded, a fork that interrupts free()
 * is safe; with one more thread in the process it can wait forever for the
 * lock the interrupted free() holds. Prints the number of forks made only
 * as "forked" (it depends on timing) and reaps every child.
 * At most kMaxForks forks: the run is MS ms of the program's CPU, and each
 * fork child's collector process (DLPROF_COLLECTOR=process) takes CPU
 * from it on a small machine, so uncapped, its wall time, and with it the
 * forks (one per ms of wall time), grew on each other: 3,500 children and
 * 40 s instead of 1 s at load 10. Nearly every fork interrupts malloc or
 * free, which is all the loop does. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harm.h"

static volatile sig_atomic_t g_forks;
enum { kMaxForks = 300 };

static void OnAlarm(int signo) {
  (void)signo;
  if (g_forks >= kMaxForks) return;
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  if (pid > 0) ++g_forks;
}

int main(int argc, char** argv) {
  const int ms = argc > 1 ? atoi(argv[1]) : 500;
  struct sigaction sa = {0};
  sa.sa_handler = OnAlarm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  const struct itimerval every_ms = {{0, 1000}, {0, 1000}};
  setitimer(ITIMER_REAL, &every_ms, NULL);
  const int64_t end = harm_clock_ns(CLOCK_PROCESS_CPUTIME_ID) + (int64_t)ms * 1000000;
  while (harm_clock_ns(CLOCK_PROCESS_CPUTIME_ID) < end) {
    void* blocks[64];
    for (int i = 0; i < 64; ++i) blocks[i] = malloc(16 + 32 * i);
    for (int i = 0; i < 64; ++i) free(blocks[i]);
  }
  const struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
  }
  printf("%s\n", g_forks > 0 ? "forked" : "no fork");
  return 0;
}
