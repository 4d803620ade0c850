/* priv_drop SIDEFILE worker|nondumpable|nproc: a daemon that starts as root
 * and drops to nobody (65534) after 100 ms of CPU.
 * `worker`: then forks a worker that burns 300 ms of CPU and exits.
 * `nondumpable`: then makes itself non-dumpable (PR_SET_DUMPABLE 0) and
 * starts a thread that sleeps 600 ms while the main thread burns 300 ms.
 * SIDEFILE (opened before the drop) gets the worker's pid or the sleeping
 * thread's tid.
 * `nproc`: then sets RLIMIT_NPROC to 6 and starts threads (which wait for
 * ever) until it is refused, prints how many it got, and _exits.
 * Prints "not root" and exits 0 when it cannot drop. */
#include <errno.h>
#include <sys/resource.h>
#define _GNU_SOURCE
#include <grp.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "harm.h"

static FILE* g_side;

static void* Waiter(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static int Nproc(void) {
  struct rlimit rl = {6, 6};
  if (setrlimit(RLIMIT_NPROC, &rl) != 0) return 1;
  pthread_t t;
  int n = 0, err = 0;
  while (n < 64 && (err = pthread_create(&t, NULL, Waiter, NULL)) == 0) ++n;
  printf("started %d threads under RLIMIT_NPROC 6, then %s\n", n, n < 64 ? strerror(err) : "stopped");
  fflush(stdout);
  _exit(0);  /* the waiters never return */
}

static void* Sleeper(void* arg) {
  (void)arg;
  fprintf(g_side, "%ld\n", (long)syscall(SYS_gettid));
  fflush(g_side);
  struct timespec nap = {0, 600000000};
  nanosleep(&nap, NULL);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (geteuid() != 0) {
    printf("not root\n");
    return 0;
  }
  g_side = fopen(argv[1], "w");
  if (g_side == NULL) return 1;
  harm_burn_ms(100);
  if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
    printf("not root\n");
    return 0;
  }
  if (strcmp(argv[2], "nproc") == 0) return Nproc();
  if (strcmp(argv[2], "worker") == 0) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      harm_burn_ms(300);
      exit(0);
    }
    fprintf(g_side, "%d\n", (int)pid);
    fclose(g_side);
    int status = -1;
    waitpid(pid, &status, 0);
    printf("worker exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
  }
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  pthread_t t;
  pthread_create(&t, NULL, Sleeper, NULL);
  harm_burn_ms(300);
  pthread_join(t, NULL);
  fclose(g_side);
  printf("slept 600 ms in a thread while non-dumpable\n");
  return 0;
}
