/* caught_signals: prints whether SIGTERM and SIGINT are caught, as
 * /proc/self/status's SigCgt says (what ps, a supervisor or a shell's
 * `trap` logic reads), and whether sigaction says so. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  unsigned long long caught = 0;
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "SigCgt:", 7) == 0) caught = strtoull(line + 7, NULL, 16);
  }
  if (f != NULL) fclose(f);
  const int sigs[] = {SIGTERM, SIGINT};
  for (int i = 0; i < 2; ++i) {
    struct sigaction sa;
    sigaction(sigs[i], NULL, &sa);
    printf("%s: SigCgt %s, sigaction %s\n", sigs[i] == SIGTERM ? "SIGTERM" : "SIGINT",
           (caught >> (sigs[i] - 1)) & 1 ? "caught" : "default",
           sa.sa_handler == SIG_DFL ? "default" : "handler");
  }
  return 0;
}
