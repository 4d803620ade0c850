// What the shared arena adds to a fork (core/shared_arena.h): the copy of
// the arena the parent's prepare handler makes for the child (a memfd, the
// pages ever written copied) and the child's mappings of it, against a
// bare fork, _exit and waitpid in the same process before the arena
// existed. The argument is the number of threads whose slots and rings
// exist (a DataLoader's parent has ~10-40). fork_call_us: the parent's
// time inside fork().
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include "core/shared_arena.h"
#include "core/thread_registry.h"

namespace {

void ClaimSlots(int threads) {
  static int claimed = 0;
  for (; claimed < threads; ++claimed) {
    // Claimed for fake tids: only the table and rings matter here.
    dlprof::ThreadSlot* s = dlprof::ClaimSlot(1000000 + claimed);
    if (s != nullptr) dlprof::PublishSlot(s);
  }
}

// The parent's time in fork() itself (its atfork handlers: the arena's
// prepare handler copies the child's arena), in ns.
int64_t ForkAndWait() {
  timespec a{}, b{};
  clock_gettime(CLOCK_MONOTONIC, &a);
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  clock_gettime(CLOCK_MONOTONIC, &b);
  int status = 0;
  waitpid(pid, &status, 0);
  return (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
}

void Run(benchmark::State& state) {
  int64_t in_fork_ns = 0;
  for (auto _ : state) in_fork_ns += ForkAndWait();
  state.counters["extents"] = dlprof::ArenaUsageNow().extents;
  state.counters["fork_call_us"] = static_cast<double>(in_fork_ns) / 1e3 / state.iterations();
}

// First, before any arena exists in this process: a bare fork.
void BM_ForkWithoutArena(benchmark::State& state) { Run(state); }
BENCHMARK(BM_ForkWithoutArena)->UseRealTime();

// Then with slots for `threads` threads (only ever added: the counts go up).
void BM_ForkWithArena(benchmark::State& state) {
  ClaimSlots(static_cast<int>(state.range(0)));
  Run(state);
}
BENCHMARK(BM_ForkWithArena)->ArgName("threads")->Arg(1)->Arg(40)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
