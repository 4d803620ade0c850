/* deny_memfd PROGRAM [ARGS...]: runs PROGRAM with memfd_create refused
 * (EPERM), as a container's seccomp profile may, through a hand-written
 * seccomp-BPF filter. Exit 4 if the filter cannot be installed, 127 if the
 * exec fails. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harm_seccomp.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: deny_memfd PROGRAM [ARGS...]\n");
    return 2;
  }
  if (harm_install_deny_filter(__NR_memfd_create, __NR_memfd_create,
                               SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA), 0) != 0) {
    fprintf(stderr, "deny_memfd: cannot install the seccomp filter: %s\n", strerror(errno));
    return 4;
  }
  execvp(argv[1], argv + 1);
  fprintf(stderr, "deny_memfd: cannot run %s: %s\n", argv[1], strerror(errno));
  return 127;
}
