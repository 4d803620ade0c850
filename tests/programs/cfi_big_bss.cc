// A program with a 1 GiB .bss array under an address-space limit that leaves
// it 512 MiB of room (RLIMIT_AS, set by the program itself), which spends
// ~300 ms in a loop and exits 0. Run by tests/cfi_hostile_test.cc with and
// without dlprof: the cfi tables' decoder must not copy the zero pages of
// .bss (it copied every segment adjacent to .eh_frame_hdr, .data and .bss
// included: 1 GiB here, and std::bad_alloc on the collector killed the
// program under the limit).
#include <sys/resource.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

char g_big[1u << 30];  // .bss: never touched but for one byte

namespace {

long VmSizeKb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kb = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmSize:", 7) == 0) kb = std::atol(line + 7);
  }
  std::fclose(f);
  return kb;
}

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) double Spin(double x) {
  for (int i = 0; i < 1000000; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

}  // namespace

int main() {
  g_big[0] = 1;
  __asm__ volatile("" : : "r"(g_big) : "memory");
  const long kb = VmSizeKb();
  if (kb <= 0) return 2;
  rlimit lim{};
  lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(kb + (512 << 10)) * 1024;
  if (setrlimit(RLIMIT_AS, &lim) != 0) return 3;
  double x = 0;
  const double end = Now() + 0.3;
  while (Now() < end) x = Spin(x);
  std::printf("ok %d\n", x > 0 ? 1 : 0);
  return 0;
}
