/* exit_in_fork MB: a program whose SIGTERM handler calls exit(0) (common,
 * if not async-signal-safe), forking back to back (each child _exits at
 * once) with MB MiB of heap touched, so that each fork is slow and the
 * signal mostly lands inside one, in fork()'s prepare handlers. A child it
 * starts first sends it SIGTERM after 300 ms. Prints "ended by SIGTERM"
 * from an atexit handler. Without dlprof it ends at once; with dlprof's
 * exit waiting for dlprof's own lock of the loader calls, which the
 * interrupted prepare handler held on the same thread, it hung (hostile
 * review, session 27: 33 of 36 runs). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void OnTerm(int signo) {
  (void)signo;
  exit(0);
}

static void Said(void) {
  static const char kLine[] = "ended by SIGTERM\n";
  (void)!write(1, kLine, sizeof(kLine) - 1);
}

int main(int argc, char** argv) {
  const size_t mb = argc > 1 ? (size_t)atoi(argv[1]) : 64;
  char* heap = malloc(mb << 20);
  if (heap == NULL) return 1;
  memset(heap, 1, mb << 20);
  const pid_t parent = getpid();
  const pid_t killer = fork();
  if (killer == 0) {
    usleep(300000);
    kill(parent, SIGTERM);
    _exit(0);
  }
  atexit(Said);
  signal(SIGTERM, OnTerm);
  for (;;) {
    const pid_t child = fork();
    if (child == 0) _exit(0);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
  }
}
