// Runs a command as a child subreaper and waits for every process it
// reaps, then exits with the command's status. Under /usr/bin/time this
// counts the CPU of every descendant, orphans included: dlprof's collector
// processes (DLPROF_COLLECTOR=process) leave the program's tree at their
// start (core/collector_spawn.h), so a plain `time python3 ...` never
// counted them, and the process mode looked free.
//
//   bench_reap_all CMD [ARG...]
#include <errno.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_reap_all CMD [ARG...]\n");
    return 2;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    std::perror("bench_reap_all: prctl(PR_SET_CHILD_SUBREAPER)");
    return 2;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::perror("bench_reap_all: fork");
    return 2;
  }
  if (child == 0) {
    execvp(argv[1], argv + 1);
    std::perror("bench_reap_all: exec");
    _exit(127);
  }
  int status = 0, command_status = 0;
  for (;;) {
    const pid_t pid = wait(&status);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;  // ECHILD: every descendant is reaped
    if (pid == child) command_status = status;
  }
  if (WIFSIGNALED(command_status)) return 128 + WTERMSIG(command_status);
  return WEXITSTATUS(command_status);
}
