/* dlopen_workers LIB [MS] [exit|_exit]: loads LIB with dlopen (as
 * ctypes.CDLL does), then forks 2 workers that each burn MS ms of CPU
 * (default 3000) and leave with exit(0) or, as Python's multiprocessing
 * workers do, _exit(0). */
#include <dlfcn.h>
#include <sys/wait.h>

#include "harm.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int ms = argc > 2 ? atoi(argv[2]) : 3000;
  int underscore = argc > 3 && strcmp(argv[3], "_exit") == 0;
  if (dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) == NULL) {  /* ctypes.CDLL's flags */
    printf("dlopen: %s\n", dlerror());
    return 1;
  }
  fflush(stdout);
  pid_t pids[2];
  for (int i = 0; i < 2; ++i) {
    pids[i] = fork();
    if (pids[i] == 0) {
      harm_burn_ms(ms);
      if (underscore) _exit(0);
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
