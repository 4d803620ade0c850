/* burn_then_sigkill MS: burns MS ms of CPU in the main thread, prints one
 * line, and SIGKILLs itself: nothing of the process runs after that, so
 * whatever a profiler kept in the process since its last write is lost
 * unless it lives outside. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harm.h"

int main(int argc, char** argv) {
  const int ms = argc > 1 ? atoi(argv[1]) : 400;
  harm_burn_ms(ms);
  printf("burned\n");
  fflush(stdout);
  kill(getpid(), SIGKILL);
  return 0;
}
