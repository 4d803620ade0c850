/* small_stacks [THREADS]: THREADS threads (default 4) with 16 KiB stacks
 * (PTHREAD_STACK_MIN on x86-64) each burn 500 ms of CPU in a recursion 8
 * frames deep with a little data on each frame. */
#include <limits.h>
#include <pthread.h>

#include "harm.h"

static __attribute__((noinline)) uint64_t Recurse(int depth, uint64_t seed) {
  volatile char pad[256];
  pad[depth] = (char)seed;
  if (depth == 0) {
    harm_burn_ms(1);
    return seed + (uint64_t)pad[0];
  }
  return Recurse(depth - 1, seed * 31 + 7) + (uint64_t)pad[depth];
}

static void* Worker(void* arg) {
  (void)arg;
  uint64_t acc = 0;
  for (int i = 0; i < 500; ++i) acc += Recurse(8, (uint64_t)i);
  harm_sink = acc;
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  if (threads < 1 || threads > 16) return 2;
  size_t stack = 16384;
  if ((size_t)PTHREAD_STACK_MIN > stack) stack = PTHREAD_STACK_MIN;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack);
  pthread_t t[16];
  for (int i = 0; i < threads; ++i) {
    int r = pthread_create(&t[i], &attr, Worker, NULL);
    if (r != 0) {
      printf("pthread_create with a %zu-byte stack: %s\n", stack, strerror(r));
      return 1;
    }
  }
  for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  printf("%d threads with %zu-byte stacks done\n", threads, stack);
  return 0;
}
