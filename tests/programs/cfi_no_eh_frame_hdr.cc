// Linked with -Wl,--no-eh-frame-hdr (tests/CMakeLists.txt): the executable
// has .eh_frame but no PT_GNU_EH_FRAME, and its functions below main are
// built without frame pointers. Spins ~1 s in cfi_nohdr_leaf, called through
// cfi_nohdr_middle and cfi_nohdr_outer.
#include <time.h>

#include <cstdio>

#define NO_FP __attribute__((noinline, optimize("omit-frame-pointer")))

namespace {

volatile double g_sink;

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

}  // namespace

extern "C" NO_FP double cfi_nohdr_leaf(double x) {
  for (int i = 0; i < 200000; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

extern "C" NO_FP double cfi_nohdr_middle(double x) {
  x = cfi_nohdr_leaf(x) + 1;
  __asm__ volatile("" ::: "memory");
  return x;
}

extern "C" NO_FP double cfi_nohdr_outer(double x) {
  x = cfi_nohdr_middle(x) + 1;
  __asm__ volatile("" ::: "memory");
  return x;
}

int main() {
  double x = 0;
  const double end = Now() + 1.0;
  while (Now() < end) x = cfi_nohdr_outer(x);
  g_sink = x;
  std::printf("ok\n");
  return 0;
}
