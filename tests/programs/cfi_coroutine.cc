// A coroutine on a stack of its own (makecontext/swapcontext, as greenlet
// and boost.context do) that spends its time in a loop; the main thread
// switches to it and back for ~1 s.
#include <time.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>

namespace {

ucontext_t g_main, g_co;
volatile double g_sink;

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

}  // namespace

extern "C" __attribute__((noinline)) void cfi_coroutine_spin() {
  double x = g_sink;
  for (int i = 0; i < 2000000; ++i) x = x * 1.0000001 + 1e-9;
  g_sink = x;
}

extern "C" __attribute__((noinline)) void cfi_coroutine_body() {
  for (;;) {
    cfi_coroutine_spin();
    swapcontext(&g_co, &g_main);
  }
}

int main() {
  if (getcontext(&g_co) != 0) return 2;
  g_co.uc_stack.ss_size = 1 << 18;
  g_co.uc_stack.ss_sp = std::malloc(g_co.uc_stack.ss_size);
  g_co.uc_link = nullptr;
  makecontext(&g_co, cfi_coroutine_body, 0);
  long switches = 0;
  const double end = Now() + 1.0;
  while (Now() < end) {
    swapcontext(&g_main, &g_co);
    ++switches;
  }
  std::printf("ok %d\n", switches > 0 ? 1 : 0);
  return 0;
}
