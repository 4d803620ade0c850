/* The seccomp filter of the hostile programs that sandbox themselves
 * (seccomp_openat, deny_perf, deny_vm_readv): two system calls get `action`,
 * every other call, and any call of another architecture, is allowed. */
#ifndef DLPROF_TESTS_HARM_HARM_SECCOMP_H_
#define DLPROF_TESTS_HARM_HARM_SECCOMP_H_

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HARM_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define HARM_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "tests/harm: unsupported architecture for the seccomp filter"
#endif

/* Installs, after PR_SET_NO_NEW_PRIVS, a filter that answers system calls
 * `nr_a` and `nr_b` (the same number twice for one) with `action`
 * (SECCOMP_RET_ERRNO | errno, or SECCOMP_RET_KILL_PROCESS). With `tsync`,
 * for every thread of the process (seccomp(2), SECCOMP_FILTER_FLAG_TSYNC, as
 * Chromium and libseccomp's TSYNC attribute do), else for the calling thread
 * (prctl). Returns 0, or -1 with errno set. */
static inline int harm_install_deny_filter(long nr_a, long nr_b, unsigned action, int tsync) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, HARM_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr_a, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr_b, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, action),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  if (tsync) {
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0 ? 0
                                                                                                : -1;
  }
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0 ? 0 : -1;
}

#endif  // DLPROF_TESTS_HARM_HARM_SECCOMP_H_
