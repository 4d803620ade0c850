/* raw_fork SIDEFILE: forks children that bypass glibc's fork(): a raw
 * fork system call and _Fork() (glibc >= 2.34). Each child burns 100 ms
 * and calls exit(0). The parent then burns 500 ms more and writes
 * "PID T_FORK T_AFTER CPU_MS CHILD..." to SIDEFILE: its pid, CLOCK_MONOTONIC
 * before the first fork and after the last child was reaped, the CPU time
 * it had used before the first fork, and the children's pids. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>

#include "harm.h"

static pid_t RawFork(void) {
#ifdef SYS_fork
  return (pid_t)syscall(SYS_fork);
#else
  return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
}

static int Child(void) {
  harm_burn_ms(100);
  exit(0);
}

static void* Burn(void* ms) {
  harm_burn_ms((int)(intptr_t)ms);
  return NULL;
}

static int ChildWithThread(void) {
  /* A stage, through dlprof's C API when it is loaded: the child's stage
   * stack is the parent's thread's slot until the child has its own. */
  uint32_t (*intern)(const char*) =
      (uint32_t(*)(const char*))dlsym(RTLD_DEFAULT, "dlprof_stage_intern");
  void (*enter)(uint32_t) = (void (*)(uint32_t))dlsym(RTLD_DEFAULT, "dlprof_stage_enter");
  if (intern != NULL && enter != NULL) enter(intern("raw_fork_child"));
  pthread_t t;
  if (pthread_create(&t, NULL, Burn, (void*)(intptr_t)100) != 0) exit(3);
  pthread_join(t, NULL);
  exit(0);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  harm_burn_ms(200);
  int statuses[2] = {-1, -1};
  pid_t children[2] = {0, 0};
  int kinds = 1;
  fflush(stdout);
  int64_t before = harm_clock_ns(CLOCK_MONOTONIC);
  int64_t cpu_ms = harm_clock_ns(CLOCK_PROCESS_CPUTIME_ID) / 1000000;
  pid_t pid = RawFork();
  if (pid == 0) Child();
  children[0] = pid;
  waitpid(pid, &statuses[0], 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
  kinds = 2;
  pid = _Fork();
  if (pid == 0) ChildWithThread();
  children[1] = pid;
  waitpid(pid, &statuses[1], 0);
#endif
  int64_t after = harm_clock_ns(CLOCK_MONOTONIC);
  harm_burn_ms(500);
  FILE* f = fopen(argv[1], "w");
  if (f == NULL) return 1;
  fprintf(f, "%d %lld %lld %lld", (int)getpid(), (long long)before, (long long)after, (long long)cpu_ms);
  for (int i = 0; i < kinds; ++i) fprintf(f, " %d", (int)children[i]);
  fprintf(f, "\n");
  fclose(f);
  printf("%d children (raw fork%s) exited:", kinds, kinds > 1 ? ", _Fork" : "");
  for (int i = 0; i < kinds; ++i) printf(" %d", WIFEXITED(statuses[i]) ? WEXITSTATUS(statuses[i]) : -1);
  printf("\n");
  return 0;
}
