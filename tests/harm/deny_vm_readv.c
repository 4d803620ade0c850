/* deny_vm_readv PROGRAM [ARGS...]: runs PROGRAM with process_vm_readv and
 * process_vm_writev refused (EPERM), as container runtimes' seccomp profiles
 * without CAP_SYS_PTRACE may do (older Docker, gVisor-like sandboxes),
 * through a hand-written seccomp-BPF filter (no libseccomp) that PROGRAM and
 * its children inherit. Checks that the filter works before it execs: exit 3
 * if process_vm_readv is still allowed, 4 if the filter cannot be installed,
 * 127 if the exec fails. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HARM_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define HARM_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "deny_vm_readv: unsupported architecture"
#endif

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: deny_vm_readv PROGRAM [ARGS...]\n");
    return 2;
  }
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, HARM_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
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
