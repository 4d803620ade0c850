/* subreaper_reaps_all late|exec|raw [N]: a child subreaper (as tini, a
 * container's init or a supervisor is) that forks N workers, each of which
 * forks a grandchild and exits (the grandchild is orphaned to us), then
 * reaps everything with wait(-1) until ECHILD. "late": it becomes the
 * subreaper after its start; "exec": it becomes one, then execs itself, so
 * it is one from its start; "raw": as "late", by a prctl system call made
 * without libc (no interposer sees it); "spawn": as "late", but each worker
 * execs this program again ("worker"), which forks the grandchild and exits:
 * an exec'd process knows nothing of us from memory (a subprocess, a spawn
 * DataLoader worker). Prints how many it reaped. An alarm ends a wait that
 * would never end. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* prctl(PR_SET_CHILD_SUBREAPER, 1) by the syscall instruction itself. */
static long raw_set_subreaper(void) {
#if defined(__x86_64__)
  long rc;
  __asm__ volatile("syscall"
                   : "=a"(rc)
                   : "0"((long)SYS_prctl), "D"((long)PR_SET_CHILD_SUBREAPER), "S"(1L), "d"(0L)
                   : "rcx", "r11", "memory");
  return rc;
#else
  return syscall(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int n = argc > 2 ? atoi(argv[2]) : 3;
  if (strcmp(argv[1], "exec") == 0) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    char count[16];
    snprintf(count, sizeof(count), "%d", n);
    execl("/proc/self/exe", argv[0], "execd", count, (char*)NULL);
    return 3;
  }
  if (strcmp(argv[1], "worker") == 0) {
    if (fork() == 0) {
      usleep(20000);
      _exit(7);
    }
    _exit(3);
  }
  const int spawn = strcmp(argv[1], "spawn") == 0;
  if (strcmp(argv[1], "late") == 0 || spawn) prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (strcmp(argv[1], "raw") == 0 && raw_set_subreaper() != 0) return 4;
  for (int i = 0; i < n; i++) {
    fflush(stdout);
    if (fork() == 0) {
      if (spawn) {
        execl("/proc/self/exe", argv[0], "worker", (char*)NULL);
        _exit(5);
      }
      if (fork() == 0) {
        usleep(20000);
        _exit(7);
      }
      _exit(3);
    }
  }
  alarm(10);
  int reaped = 0, status;
  while (wait(&status) > 0) reaped++;
  printf("reaped %d (%s)\n", reaped, strerror(errno));
  return 0;
}
