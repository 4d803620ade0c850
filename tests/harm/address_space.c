/* address_space [MIB] [THREADS]: under RLIMIT_AS = its current size + MIB
 * (default 1024), starts THREADS threads (default 8) that each malloc a
 * little and burn 50 ms of CPU, then allocates (and touches) 1 MiB blocks
 * until malloc fails, and prints how many MiB it got. */
#include <pthread.h>
#include <sys/resource.h>

#include "harm.h"

static pthread_barrier_t g_started, g_done;

static void* Worker(void* arg) {
  (void)arg;
  void* p = malloc(1024);
  harm_burn_ms(50);
  pthread_barrier_wait(&g_started);
  pthread_barrier_wait(&g_done);
  free(p);
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
  long mib = argc > 1 ? atol(argv[1]) : 1024;
  int threads = argc > 2 ? atoi(argv[2]) : 8;
  if (threads < 1 || threads > 64) return 2;
  harm_burn_ms(50);
  rlim_t limit = (rlim_t)VmSizeKb() * 1024 + (rlim_t)mib * 1024 * 1024;
  struct rlimit rl = {limit, limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) return 1;
  pthread_barrier_init(&g_started, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&g_done, NULL, (unsigned)threads + 1);
  pthread_t t[64];
  for (int i = 0; i < threads; ++i) {
    if (pthread_create(&t[i], NULL, Worker, NULL) != 0) {
      printf("pthread_create failed under RLIMIT_AS\n");
      return 1;
    }
  }
  pthread_barrier_wait(&g_started);
  harm_burn_ms(50);
  long got = 0;
  void* blocks[65536];
  while (got < 65536) {
    char* b = malloc(1 << 20);
    if (b == NULL) break;
    memset(b, 1, 1 << 20);
    blocks[got++] = b;
  }
  pthread_barrier_wait(&g_done);
  for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  for (long i = 0; i < got; ++i) free(blocks[i]);
  printf("allocated %ld MiB with %d threads under RLIMIT_AS = size + %ld MiB\n", got, threads, mib);
  return 0;
}
