/* sigprof_wait wait|block: blocks SIGPROF in the main thread before any
 * other thread exists. `wait`: for 1 s of CPU, polls sigpending and
 * sigtimedwait (zero timeout) and a signalfd, and counts the SIGPROFs it
 * sees (a program that takes SIGPROF for itself). `block`: two more threads
 * (which inherit the mask) and the main thread burn 1 s of CPU each. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>

#include "harm.h"

static void* Worker(void* arg) {
  (void)arg;
  harm_burn_ms(1000);
  return NULL;
}

int main(int argc, char** argv) {
  int wait_mode = argc < 2 || strcmp(argv[1], "wait") == 0;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  sigprocmask(SIG_BLOCK, &set, NULL);
  if (!wait_mode) {
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, Worker, NULL);
    harm_burn_ms(1000);
    for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
    printf("3 threads burned 1 s each with SIGPROF blocked\n");
    return 0;
  }
  int sfd = signalfd(-1, &set, SFD_NONBLOCK);
  int pending = 0, waited = 0, read_fd = 0;
  int64_t end = harm_clock_ns(CLOCK_PROCESS_CPUTIME_ID) + 1000000000LL;
  while (harm_clock_ns(CLOCK_PROCESS_CPUTIME_ID) < end) {
    harm_burn_ms(1);
    sigset_t now;
    sigpending(&now);
    if (sigismember(&now, SIGPROF)) ++pending;
    struct timespec zero = {0, 0};
    if ((pending & 1) == 0) {
      if (sigtimedwait(&set, NULL, &zero) == SIGPROF) ++waited;
    } else {
      struct signalfd_siginfo si;
      if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) ++read_fd;
    }
  }
  printf("SIGPROF seen: sigpending %d, sigtimedwait %d, signalfd %d\n", pending, waited, read_fd);
  return 0;
}
