/* deny_vm_readv PROGRAM [ARGS...]: runs PROGRAM with process_vm_readv and
 * process_vm_writev refused (EPERM), as container runtimes' seccomp profiles
 * without CAP_SYS_PTRACE may do (older Docker, gVisor-like sandboxes),
 * through a hand-written seccomp-BPF filter (no libseccomp) that PROGRAM and
 * its children inherit. Checks that the filter works before it execs: exit 3
 * if process_vm_readv is still allowed, 4 if the filter cannot be installed,
 * 127 if the exec fails. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harm_seccomp.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: deny_vm_readv PROGRAM [ARGS...]\n");
    return 2;
  }
  if (harm_install_deny_filter(__NR_process_vm_readv, __NR_process_vm_writev,
                               SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA), 0) != 0) {
    fprintf(stderr, "deny_vm_readv: cannot install the seccomp filter: %s\n", strerror(errno));
    return 4;
  }
  char from[8] = "dlprof", to[8];
  struct iovec local = {to, sizeof(to)}, remote = {from, sizeof(from)};
  long n = syscall(SYS_process_vm_readv, (long)getpid(), &local, 1L, &remote, 1L, 0L);
  if (n >= 0 || errno != EPERM) {
    fprintf(stderr, "deny_vm_readv: process_vm_readv still works (%ld, %s)\n", n, strerror(errno));
    return 3;
  }
  execvp(argv[1], argv + 1);
  fprintf(stderr, "deny_vm_readv: cannot run %s: %s\n", argv[1], strerror(errno));
  return 127;
}
