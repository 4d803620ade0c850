/* tsc_sigsegv: disables RDTSC for itself (prctl PR_SET_TSC, PR_TSC_SIGSEGV,
 * as some record-replay and sandboxing tools do), then burns 1 s of CPU
 * (timed with raw syscalls: no vDSO, no RDTSC) and exits 0. Prints
 * "PR_SET_TSC unsupported" when the kernel refuses. */
#include <errno.h>
#include <sys/prctl.h>

#include "harm.h"

int main(void) {
#if defined(PR_SET_TSC)
  harm_burn_ms(50);
  if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) != 0) {
    printf("PR_SET_TSC unsupported: %s\n", strerror(errno));
    return 0;
  }
  harm_burn_ms(1000);
  printf("1 s of CPU with RDTSC disabled\n");
#else
  printf("PR_SET_TSC unsupported: not on this architecture\n");
#endif
  return 0;
}
