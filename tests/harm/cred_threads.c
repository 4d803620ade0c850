/* Credential calls from several threads at once (root only; prints "not
 * root" otherwise):
 *   cred_threads toggle N     4 threads each toggle seteuid(65534)/seteuid(0)
 *                             N times
 *   cred_threads perthread N  8 threads each set their own groups with the
 *                             raw system call (this thread only), then call
 *                             glibc's setgroups (every thread), N times
 * Prints how many more threads the process has after the calls (their
 * threads joined) than before them: 0 as without dlprof. */
#define _GNU_SOURCE
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harm.h"

static int g_n = 100;

static void* Toggle(void* arg) {
  for (int i = 0; i < g_n; ++i) {
    if (seteuid(65534) != 0 || seteuid(0) != 0) exit(3);
  }
  return arg;
}

static void* PerThread(void* arg) {
  const gid_t own = 5000 + (gid_t)(long)arg, root = 0;
  for (int i = 0; i < g_n; ++i) {
    if (syscall(SYS_setgroups, 1, &own) != 0 || setgroups(1, &root) != 0) exit(4);
  }
  return arg;
}

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    printf("not root\n");
    return 0;
  }
  if (argc != 3) return 2;
  g_n = atoi(argv[2]);
  const int toggle = strcmp(argv[1], "toggle") == 0;
  const int n = toggle ? 4 : 8;
  harm_burn_ms(20);
  const int before = harm_thread_count();
  pthread_t t[8];
  for (long i = 0; i < n; ++i) pthread_create(&t[i], NULL, toggle ? Toggle : PerThread, (void*)i);
  for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
  usleep(50000);  /* what a restart left settles */
  printf("extra threads after the calls: %d\n", harm_thread_count() - before);
  return 0;
}
