/* main_pthread_exit: the main thread calls pthread_exit() while a thread it
 * started burns 500 ms of CPU and finishes later. The process must exit
 * (status 0) when that thread returns. */
#include <pthread.h>

#include "harm.h"

static void* Worker(void* arg) {
  (void)arg;
  harm_burn_ms(500);
  printf("worker: done\n");
  fflush(stdout);
  return NULL;
}

int main(void) {
  harm_burn_ms(100);
  pthread_t t;
  pthread_create(&t, NULL, Worker, NULL);
  printf("main: pthread_exit\n");
  fflush(stdout);
  pthread_exit(NULL);
}
