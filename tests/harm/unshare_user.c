/* unshare_user: after 100 ms of CPU, enters a new user namespace (as
 * bubblewrap and rootless containers do) and prints the result. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>

#include "harm.h"

int main(void) {
  harm_burn_ms(100);
  int r = unshare(CLONE_NEWUSER);
  printf("unshare(CLONE_NEWUSER) = %d (%s)\n", r, r == 0 ? "ok" : strerror(errno));
  harm_burn_ms(100);
  return 0;
}
