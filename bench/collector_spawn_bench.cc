// What starting the collector helper costs the program (core/collector_spawn.h)
// against fork + _exit + waitpid and posix_spawn + waitpid, from a process of
// the argument's size in MiB (mapped and touched first: page tables to copy).
// The child is /bin/true. SpawnInvisibleChild and BM_Fork time the call
// alone (what the calling thread is blocked for) and wait, untimed, for the
// child's end: children left running would compete for the CPUs.
//   build/bench/collector_spawn_bench --benchmark_repetitions=3
// "Time" is the caller's wall time per call, "CPU" its thread's CPU time.
#include <benchmark/benchmark.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "core/collector_spawn.h"

namespace {

const char* const kTrue = "/bin/true";

// A mapping of `mib` MiB, every page written, for the benchmark's duration.
class Touched {
 public:
  explicit Touched(long mib) : size_(static_cast<size_t>(mib) << 20) {
    if (size_ == 0) return;
    base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base_ != MAP_FAILED) memset(base_, 1, size_);
  }
  ~Touched() {
    if (size_ != 0 && base_ != MAP_FAILED) munmap(base_, size_);
  }
  bool ok() const { return base_ != MAP_FAILED; }

 private:
  size_t size_;
  void* base_ = nullptr;
};

void BM_SpawnInvisibleChild(benchmark::State& state) {
  Touched memory(state.range(0));
  if (!memory.ok()) return state.SkipWithError("mmap failed");
  const char* argv[] = {kTrue, nullptr};
  for (auto _ : state) {
    const pid_t pid = dlprof::SpawnInvisibleChild(kTrue, argv, nullptr, -1, nullptr);
    state.PauseTiming();
    if (pid <= 0) return state.SkipWithError("spawn failed");
    // Not our child: its end is seen through a pidfd (ESRCH: gone already).
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
      pollfd p = {pidfd, POLLIN, 0};
      poll(&p, 1, -1);
      close(pidfd);
    }
    state.ResumeTiming();
  }
}

void BM_Fork(benchmark::State& state) {
  Touched memory(state.range(0));
  if (!memory.ok()) return state.SkipWithError("mmap failed");
  for (auto _ : state) {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    state.PauseTiming();
    waitpid(pid, nullptr, 0);
    state.ResumeTiming();
  }
}

void BM_ForkExitWait(benchmark::State& state) {
  Touched memory(state.range(0));
  if (!memory.ok()) return state.SkipWithError("mmap failed");
  for (auto _ : state) {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, nullptr, 0);
  }
}

void BM_PosixSpawnWait(benchmark::State& state) {
  Touched memory(state.range(0));
  if (!memory.ok()) return state.SkipWithError("mmap failed");
  char* argv[] = {const_cast<char*>(kTrue), nullptr};
  char* envp[] = {nullptr};
  for (auto _ : state) {
    pid_t pid;
    if (posix_spawn(&pid, kTrue, nullptr, nullptr, argv, envp) != 0) {
      return state.SkipWithError("posix_spawn failed");
    }
    waitpid(pid, nullptr, 0);
  }
}

BENCHMARK(BM_SpawnInvisibleChild)->Arg(0)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Fork)->Arg(0)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ForkExitWait)->Arg(0)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PosixSpawnWait)->Arg(0)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
