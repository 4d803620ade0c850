/* describe_sigprof [LIB]: calls dlprof_backends_describe() (from LIB, which
 * it dlopens, or from the preloaded library), then prints whether this
 * process now catches or ignores SIGPROF, as the kernel sees it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>

#include "harm.h"

int main(int argc, char** argv) {
  void* lib = RTLD_DEFAULT;
  if (argc > 1) {
    lib = dlopen(argv[1], RTLD_NOW);
    if (lib == NULL) {
      printf("dlopen: %s\n", dlerror());
      return 1;
    }
  }
  printf("before: SIGPROF caught %d\n", harm_sig_in(harm_status_mask("SigCgt"), SIGPROF));
  size_t (*describe)(char*, size_t) = (size_t (*)(char*, size_t))dlsym(lib, "dlprof_backends_describe");
  if (describe == NULL) {
    printf("no dlprof_backends_describe\n");
    return 1;
  }
  char buf[8192];
  size_t n = describe(buf, sizeof(buf));
  printf("described: %d\n", n > 0);
  printf("after: SIGPROF caught %d, ignored %d\n", harm_sig_in(harm_status_mask("SigCgt"), SIGPROF),
         harm_sig_in(harm_status_mask("SigIgn"), SIGPROF));
  return 0;
}
