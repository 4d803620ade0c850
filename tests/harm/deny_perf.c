/* deny_perf PROGRAM [ARGS...]: runs PROGRAM with perf_event_open refused
 * (EACCES), as docker's default seccomp profile does, through a hand-written
 * seccomp-BPF filter (no libseccomp). Checks that the filter works before it
 * execs: exit 3 if perf_event_open is still allowed, 4 if the filter cannot be
 * installed, 127 if the exec fails. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harm_seccomp.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: deny_perf PROGRAM [ARGS...]\n");
    return 2;
  }
  if (harm_install_deny_filter(__NR_perf_event_open, __NR_perf_event_open,
                               SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA), 0) != 0) {
    fprintf(stderr, "deny_perf: cannot install the seccomp filter: %s\n", strerror(errno));
    return 4;
  }
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  if (fd >= 0 || errno != EACCES) {
    fprintf(stderr, "deny_perf: perf_event_open still works (fd %ld, %s)\n", fd, strerror(errno));
    return 3;
  }
  execvp(argv[1], argv + 1);
  fprintf(stderr, "deny_perf: cannot run %s: %s\n", argv[1], strerror(errno));
  return 127;
}
