// A CPU-bound program whose hot function has no symbol once the binary is
// stripped: it is static (not in .dynsym) and not inlined
// (tests/pprof_fidelity_test.cc). Spins for about <ms> of CPU time (default
// 400) in BurnUnnamed and prints the sum, so the loop is not optimised away.
#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace {

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long BurnUnnamed(double until) {
  unsigned long x = 1;
  while (CpuSeconds() < until) {
    for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005UL + 1442695040888963407UL;
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  const double ms = argc > 1 ? std::atof(argv[1]) : 400;
  std::printf("%lu\n", BurnUnnamed(CpuSeconds() + ms / 1000));
  return 0;
}
