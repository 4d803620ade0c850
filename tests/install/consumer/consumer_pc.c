/* A C program built against an installed dlprof through pkg-config alone
 * (tests/install/check_install.sh): the header, the version header and the
 * library all come from `pkg-config --cflags --libs dlprof`. */
#include <dlprof/dlprof.h>
#include <dlprof/version.h>

#include <stdio.h>
#include <time.h>

int main(void) {
  dlprof_step_begin();
  dlprof_stage_enter(dlprof_stage_intern("consume_c"));
  volatile unsigned long x = 0;
  const clock_t end = clock() + CLOCKS_PER_SEC / 5; /* 200 ms of CPU */
  while (clock() < end) x = x + 1;
  dlprof_stage_exit();
  dlprof_step_end();
  printf("version=%s enabled=%d\n", DLPROF_VERSION_STRING, dlprof_enabled());
  return 0;
}
