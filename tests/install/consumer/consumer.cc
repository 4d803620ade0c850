#include <dlprof/dlprof.hpp>

#include <cstdio>
#include <ctime>

int main() {
  dlprof::StepScope step;
  DLPROF_STAGE("consume");
  volatile unsigned long x = 0;
  const std::clock_t end = std::clock() + CLOCKS_PER_SEC / 5;  // 200 ms of CPU
  while (std::clock() < end) x = x + 1;
  std::printf("enabled=%d\n", dlprof_enabled());
  return 0;
}
