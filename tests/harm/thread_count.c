/* thread_count: prints the number of threads in /proc/self/task at start,
 * after 100 ms of CPU, with 3 threads of its own running, and after joining
 * them. */
#include <pthread.h>

#include "harm.h"

static pthread_barrier_t g_counted;

static void* Worker(void* arg) {
  (void)arg;
  harm_burn_ms(20);
  pthread_barrier_wait(&g_counted);
  return NULL;
}

int main(void) {
  printf("at start: %d\n", harm_thread_count());
  harm_burn_ms(100);
  printf("after work: %d\n", harm_thread_count());
  pthread_barrier_init(&g_counted, NULL, 4);
  pthread_t t[3];
  for (int i = 0; i < 3; ++i) pthread_create(&t[i], NULL, Worker, NULL);
  harm_burn_ms(50);
  printf("with 3 threads: %d\n", harm_thread_count());
  pthread_barrier_wait(&g_counted);
  for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
  harm_burn_ms(50);
  printf("after join: %d\n", harm_thread_count());
  return 0;
}
