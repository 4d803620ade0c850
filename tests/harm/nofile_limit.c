/* nofile_limit [LIMIT] [THREADS]: under RLIMIT_NOFILE LIMIT (default 64),
 * with THREADS threads (default 8) running, opens /dev/null until it is
 * refused and prints how many it got. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>

#include "harm.h"

static pthread_barrier_t g_started, g_done;

static void* Worker(void* arg) {
  (void)arg;
  harm_burn_ms(50);
  pthread_barrier_wait(&g_started);
  pthread_barrier_wait(&g_done);
  harm_burn_ms(20);
  return NULL;
}

int main(int argc, char** argv) {
  int limit = argc > 1 ? atoi(argv[1]) : 64;
  int threads = argc > 2 ? atoi(argv[2]) : 8;
  if (threads < 1 || threads > 64) return 2;
  struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 1;
  pthread_barrier_init(&g_started, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&g_done, NULL, (unsigned)threads + 1);
  pthread_t t[64];
  int created = 0;
  for (int i = 0; i < threads; ++i) created += pthread_create(&t[i], NULL, Worker, NULL) == 0;
  if (created != threads) {
    printf("created %d of %d threads\n", created, threads);
    return 1;
  }
  pthread_barrier_wait(&g_started);
  harm_burn_ms(50);
  int opened = 0, err = 0;
  for (;;) {
    int fd = open("/dev/null", O_RDONLY);
    if (fd < 0) {
      err = errno;
      break;
    }
    ++opened;
  }
  pthread_barrier_wait(&g_done);
  for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  printf("opened %d fds under RLIMIT_NOFILE %d with %d threads, then %s\n", opened, limit, threads,
         strerror(err));
  return 0;
}
