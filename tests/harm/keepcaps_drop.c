/* A privilege drop that keeps capabilities, as setpriv, ping and dumpcap
 * do: PR_SET_KEEPCAPS, setresuid (every thread's effective capabilities are
 * cleared), capset on the calling thread alone (capabilities are per
 * thread), then setgroups and setresgid, which glibc runs on every thread
 * and aborts the process if any other thread fails: so the program itself
 * has one thread (a second one would fail the broadcast as dlprof's did).
 * Prints "not root" where it cannot drop anything. */
#define _GNU_SOURCE
#include <linux/capability.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harm.h"

/* keepcaps_drop [GROUPS]: with GROUPS supplementary groups first (420 push
 * the capability lines of /proc/<tid>/status past its first 4 KiB). */
int main(int argc, char** argv) {
  if (geteuid() != 0) {
    printf("not root\n");
    return 0;
  }
  const int groups = argc > 1 ? atoi(argv[1]) : 0;
  if (groups > 0) {
    gid_t* g = malloc(sizeof(gid_t) * (size_t)groups);
    if (g == NULL) return 8;
    for (int i = 0; i < groups; ++i) g[i] = 1000000 + (gid_t)i;
    if (setgroups((size_t)groups, g) != 0) return 9;
    free(g);
  }
  harm_burn_ms(100);
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &h, d) != 0) return 2;
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return 3;
  if (setresuid(65534, 65534, 65534) != 0) return 4;
  d[0].effective = d[0].permitted;
  d[1].effective = d[1].permitted;
  if (syscall(SYS_capset, &h, d) != 0) return 5;
  if (setgroups(0, NULL) != 0) return 6;
  if (setresgid(65534, 65534, 65534) != 0) return 7;
  harm_burn_ms(50);
  printf("dropped to uid %d gid %d\n", (int)getuid(), (int)getgid());
  return 0;
}
