// The fixed CPU workload of bench/whole_process.sh: N threads, each does the
// same fixed amount of integer work at the bottom of a ~30-frame call chain,
// so every profiler is measured on the same deep stacks. It links nothing of
// dlprof: profilers are brought in from outside (LD_PRELOAD, perf record).
//
//   workload --threads 8 --work 100
//
// prints one line, from its own clocks:
//   workload: threads=8 work=100 cpu_s=... user_s=... sys_s=... thread_cpu_s=... wall_s=... checksum=...
// cpu_s is getrusage(RUSAGE_SELF) at the end of main (every thread, the
// profiler's own threads and signal handlers included); thread_cpu_s is the sum
// of the worker threads' CLOCK_THREAD_CPUTIME_ID, the CPU time a per-thread
// sampler is expected to sample (the main thread only waits in join).
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// One work unit is about 10 ms of CPU on a 2 GHz x86-64 core.
constexpr uint64_t kItersPerUnit = 6500000;
constexpr int kChainDepth = 30;

double Seconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// Two leaves of different cost, so stacks differ at the top as in real code.
__attribute__((noinline)) uint64_t MixA(uint64_t x, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    x += i;
  }
  asm volatile("" : "+r"(x));
  return x;
}

__attribute__((noinline)) uint64_t MixB(uint64_t x, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    x = (x << 7 | x >> 57) + 0x632be59bd9b4e019ull;
    x ^= i * 0xff51afd7ed558ccdull;
  }
  asm volatile("" : "+r"(x));
  return x;
}

__attribute__((noinline)) uint64_t Burn(uint64_t seed, uint64_t iters) {
  uint64_t x = seed;
  constexpr uint64_t kSlice = 50000;  // ~0.25 ms, so both leaves get samples
  for (uint64_t done = 0; done < iters; done += kSlice) {
    uint64_t n = iters - done < kSlice ? iters - done : kSlice;
    x = (done / kSlice) % 3 == 0 ? MixB(x, n) : MixA(x, n);
  }
  return x;
}

// Three mutually recursive frames, so the chain is not one function repeated.
uint64_t ChainA(int depth, uint64_t seed, uint64_t iters);
uint64_t ChainB(int depth, uint64_t seed, uint64_t iters);
uint64_t ChainC(int depth, uint64_t seed, uint64_t iters);

__attribute__((noinline)) uint64_t ChainA(int depth, uint64_t seed, uint64_t iters) {
  uint64_t r = depth <= 0 ? Burn(seed, iters) : ChainB(depth - 1, seed + 1, iters);
  asm volatile("" : "+r"(r));  // keep the frame: no tail call
  return r;
}

__attribute__((noinline)) uint64_t ChainB(int depth, uint64_t seed, uint64_t iters) {
  uint64_t r = depth <= 0 ? Burn(seed, iters) : ChainC(depth - 1, seed + 2, iters);
  asm volatile("" : "+r"(r));
  return r;
}

__attribute__((noinline)) uint64_t ChainC(int depth, uint64_t seed, uint64_t iters) {
  uint64_t r = depth <= 0 ? Burn(seed, iters) : ChainA(depth - 1, seed + 3, iters);
  asm volatile("" : "+r"(r));
  return r;
}

struct Worker {
  pthread_t thread{};
  int index = 0;
  uint64_t units = 0;
  uint64_t result = 0;
  double cpu_s = 0;
};

void* WorkerMain(void* arg) {
  auto* w = static_cast<Worker*>(arg);
  uint64_t x = static_cast<uint64_t>(w->index) + 1;
  // One unit per descent: the chain is re-entered 100 times a second, as a
  // data-loading stage re-enters its code for every item.
  for (uint64_t u = 0; u < w->units; ++u) x = ChainA(kChainDepth, x, kItersPerUnit);
  w->result = x;
  w->cpu_s = Seconds(CLOCK_THREAD_CPUTIME_ID);
  return nullptr;
}

int Usage() {
  std::fprintf(stderr, "usage: workload [--threads N] [--work UNITS_PER_THREAD]  (1 unit ~ 10 ms CPU)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  long work = 100;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--work") == 0 && i + 1 < argc) {
      work = std::atol(argv[++i]);
    } else {
      return Usage();
    }
  }
  if (threads < 1 || threads > 256 || work < 1) return Usage();

  const double wall0 = Seconds(CLOCK_MONOTONIC);
  std::vector<Worker> workers(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    workers[i].index = i;
    workers[i].units = static_cast<uint64_t>(work);
    if (pthread_create(&workers[i].thread, nullptr, WorkerMain, &workers[i]) != 0) {
      std::perror("workload: pthread_create");
      return 1;
    }
  }
  uint64_t checksum = 0;
  double thread_cpu = 0;
  for (Worker& w : workers) {
    pthread_join(w.thread, nullptr);
    checksum ^= w.result;
    thread_cpu += w.cpu_s;
  }
  const double wall = Seconds(CLOCK_MONOTONIC) - wall0;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
  const double sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
  std::printf("workload: threads=%d work=%ld cpu_s=%.4f user_s=%.4f sys_s=%.4f thread_cpu_s=%.4f "
              "wall_s=%.4f checksum=%016llx\n",
              threads, work, user + sys, user, sys, thread_cpu, wall,
              static_cast<unsigned long long>(checksum));
  return 0;
}
