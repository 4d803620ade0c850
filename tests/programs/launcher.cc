// A minimal launcher, as torchrun or a Python script that runs the trainer
// with subprocess is one: the run's first process, which runs the program
// it is given as a child (fork, then exec: the child's image before the
// exec is a process of its own to the profiler) and waits for it. Beside it
// runs one more child of its own, forked without exec, that does nothing a
// data worker does (a launcher's monitor, say).
// Usage: launcher CMD [ARGS...]; exits with CMD's status.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: launcher CMD [ARGS...]\n");
    return 2;
  }
  const pid_t helper = fork();
  if (helper < 0) {
    perror("fork");
    return 1;
  }
  if (helper == 0) {
    const timespec nap = {0, 200 * 1000 * 1000};
    nanosleep(&nap, nullptr);
    _exit(0);
  }
  const pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) {
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    _exit(127);
  }
  int status = 0, ignored = 0;
  if (waitpid(child, &status, 0) != child) {
    perror("waitpid");
    return 1;
  }
  waitpid(helper, &ignored, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
