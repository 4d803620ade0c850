/* exec_after blocked|ignored inherit|clean PROGRAM [ARGS...]: sets SIGPROF up
 * as a program may (blocked in the main thread, the only one; or SIG_IGN),
 * burns 300 ms of CPU, then execs PROGRAM, with the environment as it is
 * (inherit) or without LD_PRELOAD and DLPROF_* (clean: as a launcher that
 * sanitizes the environment does). */
#include <signal.h>

#include "harm.h"

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  if (strcmp(argv[1], "blocked") == 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    sigprocmask(SIG_BLOCK, &set, NULL);
  } else {
    signal(SIGPROF, SIG_IGN);
  }
  harm_burn_ms(300);
  char* env[512];
  int n = 0;
  for (char** e = environ; *e != NULL && n < 511; ++e) {
    if (strcmp(argv[2], "clean") == 0 &&
        (strncmp(*e, "LD_PRELOAD=", 11) == 0 || strncmp(*e, "DLPROF_", 7) == 0)) {
      continue;
    }
    env[n++] = *e;
  }
  env[n] = NULL;
  fflush(stdout);
  execve(argv[3], argv + 3, env);
  perror("execve");
  return 127;
}
