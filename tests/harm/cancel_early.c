/* cancel_early [N]: N times (default 200), creates a thread and cancels it
 * at once, usually before its start routine runs, then joins it and counts
 * the threads that ended cancelled. glibc unwinds a cancelled thread through
 * every frame on its stack, the profiler's thread start included. */
#include <pthread.h>

#include "harm.h"

static void* Spin(void* arg) {
  (void)arg;
  for (;;) pthread_testcancel();
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200;
  int cancelled = 0;
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    void* result = NULL;
    if (pthread_create(&t, NULL, Spin, NULL) != 0) return 1;
    pthread_cancel(t);
    pthread_join(t, &result);
    cancelled += result == PTHREAD_CANCELED;
  }
  printf("cancelled %d of %d\n", cancelled, n);
  return 0;
}
