/* The program's own signal handlers, where a sample may be under way.
 *   nested_signals bigstack   a SIGUSR1 handler with 96 KiB of locals, sent
 *                             to the main thread as fast as another thread
 *                             can while main burns CPU (the thread has its
 *                             8 MiB stack: the handler fits there)
 *   nested_signals segv|bus   the same with SIGSEGV or SIGBUS sent (a crash
 *                             reporter's or a runtime's handler); it also
 *                             checks that each came from the sender
 *   nested_signals longjmp    a per-thread 50 us timer whose SIGALRM handler
 *                             siglongjmps out (a timeout pattern) for 0.5 s;
 *                             then three forks from the main thread, timed
 * Prints what it measured; "slowest fork over 1.5 s: 0" is the program's own
 * behaviour. (A sample's handler left for good by the jump, were dlprof to
 * count it as still running, would hold each fork for the fence's whole 2 s
 * bound, core/session_fork.cc; a loaded machine under ASan made one fork
 * slower than 0.5 s in a CI run.) */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harm.h"

static pthread_t g_main;
static atomic_long g_handled;
static atomic_int g_stop;

static atomic_long g_foreign;  /* a siginfo that is not the sender's */
static int g_signo;

static void OnSent(int sig, siginfo_t* info, void* uc) {
  (void)sig;
  (void)uc;
  volatile char buf[96 * 1024];
  for (size_t i = 0; i < sizeof buf; i += 1024) buf[i] = 1;
  atomic_fetch_add(&g_handled, buf[0]);
  if (info->si_code != SI_TKILL || info->si_pid != getpid()) atomic_fetch_add(&g_foreign, 1);
}

static void* Sender(void* arg) {
  (void)arg;
  for (long i = 0; i < 200000 && !atomic_load(&g_stop); ++i) {
    pthread_kill(g_main, g_signo);
    for (volatile int k = 0; k < 2000; ++k) {
    }
  }
  atomic_store(&g_stop, 1);
  return NULL;
}

static int BigStack(int signo) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnSent;
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  g_signo = signo;
  sigaction(signo, &sa, NULL);
  g_main = pthread_self();
  pthread_t t;
  if (pthread_create(&t, NULL, Sender, NULL) != 0) return 1;
  volatile double x = 0;  /* user-mode work only: the samples land here */
  while (!atomic_load(&g_stop)) {
    for (int i = 0; i < 100000; ++i) x += i * 0.5;
  }
  pthread_join(t, NULL);
  printf("handled: %d\n", atomic_load(&g_handled) > 0);
  if (signo != SIGUSR1) printf("not from the sender: %ld\n", atomic_load(&g_foreign));
  return 0;
}

static __thread sigjmp_buf t_env;
static atomic_int g_jumps, g_phase;

static void OnAlarm(int sig) {
  (void)sig;
  siglongjmp(t_env, 1);
}

static void* Jumper(void* arg) {
  (void)arg;
  timer_t timer;
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGALRM;
  ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) return NULL;
  struct itimerspec every = {{0, 50000}, {0, 50000}};
  timer_settime(timer, 0, &every, NULL);
  const int64_t end = harm_clock_ns(CLOCK_MONOTONIC) + 500000000;
  while (harm_clock_ns(CLOCK_MONOTONIC) < end) {
    if (sigsetjmp(t_env, 1) == 0) {
      for (;;) harm_burn_ms(1);
    }
    atomic_fetch_add(&g_jumps, 1);
  }
  struct itimerspec off = {{0, 0}, {0, 0}};
  timer_settime(timer, 0, &off, NULL);
  timer_delete(timer);
  atomic_store(&g_phase, 1);
  while (atomic_load(&g_phase) != 2) usleep(1000);
  return NULL;
}

static int LongJmp(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnAlarm;
  sigaction(SIGALRM, &sa, NULL);
  pthread_t t;
  if (pthread_create(&t, NULL, Jumper, NULL) != 0) return 1;
  while (atomic_load(&g_phase) != 1) usleep(1000);
  int64_t worst = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t t0 = harm_clock_ns(CLOCK_MONOTONIC);
    const pid_t child = fork();
    if (child == 0) _exit(0);
    const int64_t took = harm_clock_ns(CLOCK_MONOTONIC) - t0;
    if (took > worst) worst = took;
    waitpid(child, NULL, 0);
  }
  atomic_store(&g_phase, 2);
  pthread_join(t, NULL);
  printf("jumped: %d\n", atomic_load(&g_jumps) > 100);
  printf("slowest fork over 1.5 s: %d\n", worst > 1500000000);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "bigstack") == 0) return BigStack(SIGUSR1);
  if (argc == 2 && strcmp(argv[1], "segv") == 0) return BigStack(SIGSEGV);
  if (argc == 2 && strcmp(argv[1], "bus") == 0) return BigStack(SIGBUS);
  if (argc == 2 && strcmp(argv[1], "longjmp") == 0) return LongJmp();
  fprintf(stderr, "usage: nested_signals bigstack|segv|bus|longjmp\n");
  return 2;
}
