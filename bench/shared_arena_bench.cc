// What the shared arena adds to a fork (core/shared_arena.h): the child's
// privatization (a memfd of its own, the slot table copied up to its
// highest claimed slot, fresh ring pages), against a bare fork, _exit and
// waitpid. The argument is the number of threads whose slots and rings
// exist (a DataLoader's parent has ~10-40).
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

// Returns the child's own time for the privatization, in ns (0 without).
int64_t ForkAndWait(bool privatize, int report_fd) {
  const pid_t pid = fork();
  if (pid == 0) {
    int64_t ns = 0;
    if (privatize) {
      timespec a{}, b{};
      clock_gettime(CLOCK_MONOTONIC, &a);
      dlprof::ArenaPrivatizeInForkChild();
      clock_gettime(CLOCK_MONOTONIC, &b);
      ns = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
    }
    if (write(report_fd, &ns, sizeof(ns)) != sizeof(ns)) _exit(1);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return 0;
}

// Arguments: threads with slots, then 0 (bare fork) or 1 (privatizing).
// Slots are only ever added, so the thread counts go up.
void BM_Fork(benchmark::State& state) {
  ClaimSlots(static_cast<int>(state.range(0)));
  int fds[2];
  if (pipe(fds) != 0) {
    state.SkipWithError("pipe");
    return;
  }
  int64_t child_ns = 0;
  for (auto _ : state) {
    ForkAndWait(state.range(1) != 0, fds[1]);
    int64_t ns = 0;
    if (read(fds[0], &ns, sizeof(ns)) == sizeof(ns)) child_ns += ns;
  }
  close(fds[0]);
  close(fds[1]);
  state.counters["extents"] = dlprof::ArenaUsageNow().extents;
  // The privatization as the child timed it, per fork.
  state.counters["privatize_us"] = static_cast<double>(child_ns) / 1e3 / state.iterations();
}
BENCHMARK(BM_Fork)
    ->ArgNames({"threads", "privatize"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({40, 0})
    ->Args({40, 1})
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
