/* raw_fork SIDEFILE: forks children that bypass glibc's fork(): a raw
 * fork system call and _Fork() (glibc >= 2.34). Each child burns 100 ms
 * and calls exit(0). The parent then burns 500 ms more and writes
 * "PID T_NS" to SIDEFILE: its pid and CLOCK_MONOTONIC after the children
 * were reaped. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>

#include "harm.h"

static pid_t RawFork(void) {
#ifdef SYS_fork
  return (pid_t)syscall(SYS_fork);
#else
  return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
}

static int Child(void) {
  harm_burn_ms(100);
  exit(0);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  harm_burn_ms(200);
  int statuses[2] = {-1, -1};
  int kinds = 1;
  fflush(stdout);
  pid_t pid = RawFork();
  if (pid == 0) Child();
  waitpid(pid, &statuses[0], 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
  kinds = 2;
  pid = _Fork();
  if (pid == 0) Child();
  waitpid(pid, &statuses[1], 0);
#endif
  int64_t after = harm_clock_ns(CLOCK_MONOTONIC);
  harm_burn_ms(500);
  FILE* f = fopen(argv[1], "w");
  if (f == NULL) return 1;
  fprintf(f, "%d %lld\n", (int)getpid(), (long long)after);
  fclose(f);
  printf("%d children (raw fork%s) exited:", kinds, kinds > 1 ? ", _Fork" : "");
  for (int i = 0; i < kinds; ++i) printf(" %d", WIFEXITED(statuses[i]) ? WEXITSTATUS(statuses[i]) : -1);
  printf("\n");
  return 0;
}
