/* heap_at_main: prints the bytes in use on the malloc heap when main starts
 * (mallinfo2), before the program allocates anything itself. A C program
 * with no C++ runtime of its own: what a preloaded library leaves there is
 * all there is. */
#include <malloc.h>

#include "harm.h"

int main(void) {
  struct mallinfo2 m = mallinfo2();
  printf("in use at main: %zu bytes\n", m.uordblks + m.hblkhd);
  return 0;
}
