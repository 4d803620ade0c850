// Spends its time inside its own SIGUSR1 handler (raised from main, in a
// loop for ~1 s), so that SIGPROF lands in the handler and the walk crosses
// the kernel's signal frame (glibc's __restore_rt, augmentation 'S').
// Usage: cfi_signal_spin [alt]   alt: the handler runs on a sigaltstack.
#include <signal.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

volatile double g_sink;

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

}  // namespace

extern "C" __attribute__((noinline)) void cfi_in_handler_spin() {
  double x = g_sink;
  for (int i = 0; i < 2000000; ++i) x = x * 1.0000001 + 1e-9;
  g_sink = x;
}

extern "C" void cfi_handler(int) { cfi_in_handler_spin(); }

extern "C" __attribute__((noinline)) void cfi_raiser() {
  raise(SIGUSR1);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  const bool alt = argc > 1 && std::strcmp(argv[1], "alt") == 0;
  if (alt) {
    stack_t ss{};
    ss.ss_size = 1 << 16;
    ss.ss_sp = std::malloc(ss.ss_size);
    if (sigaltstack(&ss, nullptr) != 0) return 2;
  }
  struct sigaction sa{};
  sa.sa_handler = cfi_handler;
  sa.sa_flags = alt ? SA_ONSTACK : 0;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, nullptr) != 0) return 3;
  long raised = 0;
  const double end = Now() + 1.0;
  while (Now() < end) {
    cfi_raiser();
    ++raised;
  }
  std::printf("ok %d\n", raised > 0 ? 1 : 0);
  return 0;
}
