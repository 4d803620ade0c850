/* A program started with its stderr closed (a daemon, `prog 2>&-`), which
 * then uses the number:
 *   closed_stdio log FILE       stderr closed: the program opens its log,
 *                               which becomes fd 2, installs a SIGPROF handler
 *                               of its own (a step-aside line of dlprof's, had
 *                               it a stderr), writes one line to fd 2 and burns
 *                               CPU; then prints the log
 * It re-executes itself with stderr closed, so that dlprof starts in a
 * process that has none. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harm.h"

static void OnProf(int sig) { (void)sig; }

static int Log(const char* path) {
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  if (fd != 2) return 3;
  signal(SIGPROF, OnProf);
  dprintf(2, "the program's own line\n");
  harm_burn_ms(200);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "inner") == 0) {
    if (strcmp(argv[2], "log") == 0 && argc == 4) return Log(argv[3]);
    return 2;
  }
  if (argc < 2) return 2;
  const pid_t child = fork();
  if (child == 0) {
    close(2);
    char* args[] = {argv[0], "inner", argv[1], argc > 2 ? argv[2] : NULL, NULL};
    execv("/proc/self/exe", args);
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("inner run failed: %d\n", status);
    return 1;
  }
  if (strcmp(argv[1], "log") == 0 && argc == 3) {
    FILE* f = fopen(argv[2], "r");
    if (f == NULL) return 1;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) printf("log: %s", line);
    fclose(f);
  }
  return 0;
}
