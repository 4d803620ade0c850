/* A library a Python program loads with ctypes (so that dlprof's fault
 * handler is in and the Python walk's fault-safe reads run in samples).
 * segv_jump_run(sends, depth): its SIGSEGV handler (SA_NODEFER) leaves by
 * siglongjmp, without restoring the mask, back into a loop that burns CPU
 * at the bottom of `depth` calls, while another thread sends the main thread
 * SIGSEGV `sends` times, one at a time. Prints how many handler runs
 * interrupted code that had SIGINT or SIGPROF blocked (the program blocks
 * neither: such a run came on top of another handler's mask), and whether
 * the main thread has them blocked at the end. Without dlprof: 0, and no. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static sigjmp_buf g_back;
static atomic_long g_runs, g_on_a_masked_context;
static atomic_int g_burning;
static pid_t g_main_tid;
static volatile double g_sink;

static void OnSegv(int sig, siginfo_t* info, void* ucv) {
  (void)sig;
  (void)info;
  const ucontext_t* uc = ucv;
  if (sigismember(&uc->uc_sigmask, SIGINT) == 1 || sigismember(&uc->uc_sigmask, SIGPROF) == 1) {
    atomic_fetch_add(&g_on_a_masked_context, 1);
  }
  atomic_fetch_add(&g_runs, 1);
  siglongjmp(g_back, 1);
}

static void* Sender(void* arg) {
  const long sends = (long)arg;
  while (!atomic_load(&g_burning)) {
  }
  for (long i = 0; i < sends; ++i) {
    const long before = atomic_load(&g_runs);
    syscall(SYS_tgkill, getpid(), g_main_tid, SIGSEGV);
    // A short spin (the main thread runs on the other core: the handler
    // comes within microseconds), then sleeps: a spin alone held the core
    // the main thread needed to take the signal whenever the two shared one
    // (a loaded machine), for a time slice per send, and 20,000 sends took
    // from 9.5 s to over 120 s (the test's limit) with load alone.
    for (int spins = 0; atomic_load(&g_runs) == before; ++spins) {
      if (spins >= 2000) {
        const struct timespec nap = {0, 20000};
        nanosleep(&nap, NULL);
      }
    }
  }
  return NULL;
}

__attribute__((noinline)) static double Burn(int depth, long sends) {
  if (depth > 0) {
    const double r = Burn(depth - 1, sends);
    g_sink += 1;
    return r;
  }
  double x = 0;
  sigsetjmp(g_back, 0);
  atomic_store(&g_burning, 1);
  while (atomic_load(&g_runs) < sends) {
    for (int i = 0; i < 20000; ++i) x += i * 1e-9;
  }
  return x;
}

__attribute__((visibility("default"))) int segv_jump_run(long sends, int depth) {
  g_main_tid = (pid_t)syscall(SYS_gettid);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnSegv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  pthread_t sender;
  if (pthread_create(&sender, NULL, Sender, (void*)sends) != 0) return 1;
  g_sink = Burn(depth, sends);
  pthread_join(sender, NULL);
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, NULL, &now);
  printf("runs on a masked context: %ld\n", atomic_load(&g_on_a_masked_context));
  printf("SIGINT or SIGPROF blocked at the end: %s\n",
         sigismember(&now, SIGINT) == 1 || sigismember(&now, SIGPROF) == 1 ? "yes" : "no");
  fflush(stdout);
  return 0;
}
