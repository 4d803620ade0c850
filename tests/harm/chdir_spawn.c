/* chdir_spawn DIR PROGRAM [ARGS...]: burns 100 ms, changes directory to
 * DIR, then fork+execs PROGRAM (a worker) and waits for it. */
#include <sys/wait.h>

#include "harm.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  harm_burn_ms(100);
  if (chdir(argv[1]) != 0) return 1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execv(argv[2], argv + 2);
    _exit(127);
  }
  int status = -1;
  waitpid(pid, &status, 0);
  harm_burn_ms(100);
  printf("worker exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
