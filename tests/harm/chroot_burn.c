/* chroot_burn DIR: burns 100 ms of CPU, makes DIR, chroots into it (a
 * sandbox or a daemon's privilege separation does; DIR has no /proc),
 * sleeps 300 ms, burns 400 ms more and prints "chrooted". Prints "not root"
 * and exits 0 when it may not chroot. */
#include <sys/stat.h>

#include "harm.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  harm_burn_ms(100);
  mkdir(argv[1], 0700);
  if (chroot(argv[1]) != 0) {
    printf("not root\n");
    return 0;
  }
  if (chdir("/") != 0) return 1;
  const struct timespec nap = {0, 300000000};
  nanosleep(&nap, NULL);
  harm_burn_ms(400);
  printf("chrooted\n");
  return 0;
}
