/* close_then_threads N MS: closes every fd >= 3 at once (close_range, as a
 * daemon or a sandbox does right after start), then runs N threads, 4 at a
 * time, each burning MS ms of CPU. Prints one line that does not depend on
 * timing. dlprof's shared memory grows by one extent per new thread slot:
 * the descriptor it grows by is gone. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/syscall.h>

#include "harm.h"

static int g_ms = 30;

static void* Worker(void* arg) {
  (void)arg;
  harm_burn_ms(g_ms);
  return NULL;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 32;
  g_ms = argc > 2 ? atoi(argv[2]) : 30;
  if (syscall(SYS_close_range, 3, ~0U, 0) != 0) return 3;
  for (int done = 0; done < n; done += 4) {
    pthread_t t[4];
    for (int i = 0; i < 4; ++i) pthread_create(&t[i], NULL, Worker, NULL);
    for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
  }
  printf("%d threads ran\n", n);
  return 0;
}
