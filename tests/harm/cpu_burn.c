/* cpu_burn [MS] [THREADS]: burns MS ms of CPU (default 1000) in each of
 * THREADS threads (default 1: the main thread only), then prints one line
 * that does not depend on timing. */
#include <pthread.h>

#include "harm.h"

static int g_ms = 1000;

static void* Worker(void* arg) {
  (void)arg;
  harm_burn_ms(g_ms);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) g_ms = atoi(argv[1]);
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  pthread_t t[64];
  if (threads < 1 || threads > 64) return 2;
  for (int i = 1; i < threads; ++i) pthread_create(&t[i], NULL, Worker, NULL);
  harm_burn_ms(g_ms);
  for (int i = 1; i < threads; ++i) pthread_join(t[i], NULL);
  printf("cpu_burn: %d thread(s) burned %d ms each\n", threads, g_ms);
  return 0;
}
