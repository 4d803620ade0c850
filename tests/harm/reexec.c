/* Executes itself N times from the same pid (a shell or launcher that runs
 * its steps by exec), burning 2 ms of CPU in each image; the last prints
 * "done". */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harm.h"

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 0;
  harm_burn_ms(2);
  if (n <= 0) {
    printf("done\n");
    return 0;
  }
  char next[16];
  snprintf(next, sizeof next, "%d", n - 1);
  execl("/proc/self/exe", argv[0], next, (char*)NULL);
  return 1;
}
