/* dlopen_workers LIB [MS]: loads LIB with dlopen (as ctypes.CDLL does),
 * then forks 2 workers that each burn MS ms of CPU (default 3000) and
 * exit(0). */
#include <dlfcn.h>
#include <sys/wait.h>

#include "harm.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int ms = argc > 2 ? atoi(argv[2]) : 3000;
  if (dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == NULL) {
    printf("dlopen: %s\n", dlerror());
    return 1;
  }
  fflush(stdout);
  pid_t pids[2];
  for (int i = 0; i < 2; ++i) {
    pids[i] = fork();
    if (pids[i] == 0) {
      harm_burn_ms(ms);
      exit(0);
    }
  }
  printf("workers exited:");
  for (int i = 0; i < 2; ++i) {
    int status = -1;
    waitpid(pids[i], &status, 0);
    printf(" %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  printf("\n");
  return 0;
}
