/* seccomp_openat errno|kill [tsync]: a sandboxing program. After 100 ms of
 * CPU it installs a seccomp filter that denies open/openat (EPERM, or kills
 * the process with SIGSYS), for the calling thread (prctl) or, with `tsync`,
 * for every thread of the process (seccomp(2) with SECCOMP_FILTER_FLAG_TSYNC,
 * as Chromium and libseccomp's TSYNC attribute do). Then it starts a worker
 * thread (which sleeps 200 ms, then burns 500 ms of CPU), burns 1 s of CPU
 * and exits 0. In errno mode it checks that its own open fails with EPERM. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>

#include "harm.h"
#include "harm_seccomp.h"

#ifndef __NR_open
#define __NR_open __NR_openat  /* aarch64 has only openat */
#endif

static void* Worker(void* arg) {
  (void)arg;
  struct timespec nap = {0, 200000000};
  nanosleep(&nap, NULL);  /* a blocked thread, as a worker waiting for input */
  harm_burn_ms(500);
  return NULL;
}

int main(int argc, char** argv) {
  int kill_mode = argc > 1 && strcmp(argv[1], "kill") == 0;
  int tsync = argc > 2 && strcmp(argv[2], "tsync") == 0;
  harm_burn_ms(100);
  unsigned action = kill_mode ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | EPERM;
  int installed = harm_install_deny_filter(__NR_openat, __NR_open, action, tsync) == 0;
  if (!installed) {
    printf("cannot install the filter: %s\n", strerror(errno));
    return 1;
  }
  printf("filter installed (%s%s)\n", kill_mode ? "kill" : "EPERM", tsync ? ", every thread" : "");
  fflush(stdout);
  if (!kill_mode) {
    int fd = open("/proc/self/status", O_RDONLY);
    printf("own open: %d (%s)\n", fd, fd < 0 ? strerror(errno) : "allowed");
  }
  pthread_t t;
  pthread_create(&t, NULL, Worker, NULL);
  harm_burn_ms(1000);
  pthread_join(t, NULL);
  printf("done\n");
  return 0;
}
