/* fork_burn MS: forks one child that burns MS ms of CPU and exits 0; the
 * parent waits for it and prints one line that does not depend on timing. */
#include <sys/wait.h>
#include <unistd.h>

#include "harm.h"

int main(int argc, char** argv) {
  int ms = argc > 1 ? atoi(argv[1]) : 500;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    harm_burn_ms(ms);
    _exit(0);
  }
  int status = -1;
  waitpid(pid, &status, 0);
  printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
