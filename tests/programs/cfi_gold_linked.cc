// Linked with gold (-fuse-ld=gold, tests/CMakeLists.txt), which puts
// .eh_frame before .eh_frame_hdr (GNU ld and lld put it after); its
// functions below main are built without frame pointers. Spins ~1 s in
// cfi_gold_leaf, called through cfi_gold_middle and cfi_gold_outer.
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

extern "C" NO_FP double cfi_gold_leaf(double x) {
  for (int i = 0; i < 200000; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

extern "C" NO_FP double cfi_gold_middle(double x) {
  x = cfi_gold_leaf(x) + 1;
  __asm__ volatile("" ::: "memory");
  return x;
}

extern "C" NO_FP double cfi_gold_outer(double x) {
  x = cfi_gold_middle(x) + 1;
  __asm__ volatile("" ::: "memory");
  return x;
}

int main() {
  double x = 0;
  const double end = Now() + 1.0;
  while (Now() < end) x = cfi_gold_outer(x);
  g_sink = x;
  std::printf("ok\n");
  return 0;
}
