/* eintr_loops [busy|light]: three threads wait in loops of 20 ms timeouts,
 * in select, epoll_wait and sem_timedwait, for 1.5 s, while the main thread
 * burns CPU all along (busy) or 1 ms in every 10 ms (light: a server mostly
 * idle); each waiter counts the EINTR it gets. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "harm.h"

static volatile int g_stop;
static int g_eintr[3];
static sem_t g_sem;

static void* Waiter(void* arg) {
  int kind = (int)(intptr_t)arg;
  int ep = epoll_create1(0);
  while (!g_stop) {
    int r;
    if (kind == 0) {
      struct timeval tv = {0, 20000};
      r = select(0, NULL, NULL, NULL, &tv);
    } else if (kind == 1) {
      struct epoll_event ev;
      r = epoll_wait(ep, &ev, 1, 20);
    } else {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 20000000;
      if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000;
      }
      r = sem_timedwait(&g_sem, &ts);
    }
    if (r < 0 && errno == EINTR) ++g_eintr[kind];
  }
  close(ep);
  return NULL;
}

int main(int argc, char** argv) {
  int light = argc > 1 && strcmp(argv[1], "light") == 0;
  sem_init(&g_sem, 0, 0);
  pthread_t t[3];
  for (int i = 0; i < 3; ++i) pthread_create(&t[i], NULL, Waiter, (void*)(intptr_t)i);
  int64_t end = harm_clock_ns(CLOCK_MONOTONIC) + 1500000000LL;
  while (harm_clock_ns(CLOCK_MONOTONIC) < end) {
    harm_burn_ms(light ? 1 : 10);
    if (light) {
      struct timespec nap = {0, 9000000};
      nanosleep(&nap, NULL);
    }
  }
  g_stop = 1;
  for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
  printf("EINTR: select %d, epoll_wait %d, sem_timedwait %d\n", g_eintr[0], g_eintr[1], g_eintr[2]);
  return 0;
}
