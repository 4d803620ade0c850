/* exhaust_memory [THREADS]: under RLIMIT_AS = its current size + 64 MiB,
 * starts THREADS threads (default 4) that wait on a condition variable,
 * takes every block of address space malloc can still give, and holds it for
 * 500 ms of CPU while the threads stay blocked, then frees it all, wakes and
 * joins the threads and prints what it got. Everything in the process that
 * allocates meanwhile finds malloc failing. */
#include <pthread.h>
#include <sys/resource.h>

#include "harm.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_go;

static void* Waiter(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  while (!g_go) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

static long VmSizeKb(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "VmSize:", 7) == 0) kb = atol(line + 7);
  }
  if (f != NULL) fclose(f);
  return kb;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  if (threads < 1 || threads > 64) return 2;
  pthread_t t[64];
  for (int i = 0; i < threads; ++i) {
    if (pthread_create(&t[i], NULL, Waiter, NULL) != 0) return 1;
  }
  rlim_t limit = (rlim_t)VmSizeKb() * 1024 + ((rlim_t)64 << 20);
  struct rlimit rl = {limit, limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) return 1;
  static void* blocks[1 << 20];
  long n = 0;
  size_t total = 0;
  for (size_t size = 1 << 20; size >= 16; size /= 2) {
    void* p;
    while (n < (1 << 20) && (p = malloc(size)) != NULL) {
      blocks[n++] = p;
      total += size;
    }
  }
  harm_burn_ms(500);
  for (long i = 0; i < n; ++i) free(blocks[i]);
  pthread_mutex_lock(&g_mu);
  g_go = 1;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  printf("held %s MiB for 500 ms with %d threads waiting\n", total > ((size_t)16 << 20) ? "over 16" : "under 16",
         threads);
  return 0;
}
