// Per-sample cost of each unwinder, on a real signal context.
//
// Each iteration descends `depth` extra frames of a noipa recursion, sends
// SIGUSR2 to its own thread from the innermost one (tgkill through libc's
// syscall(), so the interrupted pc is in libc, as for a real sample landing in
// a system call wrapper), and the handler times kRepeats Unwind() calls on the
// ucontext the kernel gave it, with CLOCK_MONOTONIC (vDSO, ~20 ns, included).
// The reported time per iteration is the mean time of one Unwind() call (manual
// time), i.e. what the profiler pays per sample with warm caches: after the
// first iteration libunwind's per-thread caches hold every pc of the chain, as
// they do for the hot stacks of a profiled program. `frames` is the number of
// pcs returned: the recursion plus the ~10 frames of main() and the benchmark
// library below it (fp loses the syscall() caller and stops early in libc).
//
//   build-backends/bench/unwinder_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cfi_tables.h"
#include "backends/unwinder.h"
#include "core/stack_switch.h"

namespace dlprof {
namespace {

constexpr int kRepeats = 8;
constexpr int kMaxPcs = 512;

struct Shot {
  Unwinder* unwinder = nullptr;
  StackBounds bounds;
  uintptr_t pcs[kMaxPcs];
  int frames = 0;
  double seconds_per_unwind = 0;
  uintptr_t stack_top = 0;  // the "switched" runs: unwind on this stack, as the handler does
};
Shot g_shot;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void TimedUnwinds(void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
  const double start = Now();
  int n = 0;
  for (int i = 0; i < kRepeats; ++i) {
    n = g_shot.unwinder->Unwind(uc, g_shot.bounds, g_shot.pcs, kMaxPcs);
  }
  g_shot.seconds_per_unwind = (Now() - start) / kRepeats;
  g_shot.frames = n;
}

void Handler(int, siginfo_t*, void* context) {
  if (g_shot.stack_top != 0) {
    RunOnStack(context, TimedUnwinds, g_shot.stack_top);
  } else {
    TimedUnwinds(context);
  }
}

__attribute__((noipa)) void Descend(int depth, pid_t pid, pid_t tid) {
  if (depth == 0) {
    syscall(SYS_tgkill, pid, tid, SIGUSR2);
  } else {
    Descend(depth - 1, pid, tid);
  }
  asm volatile("" ::: "memory");  // Keep the frame: no tail call.
}

void BM_Unwind(benchmark::State& state, const std::string& name, bool switched) {
  std::string error;
  std::unique_ptr<Unwinder> unwinder = MakeUnwinder(name, &error);
  if (unwinder == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = Handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, nullptr);
  unwinder->PrepareThread();
  CfiDecodeAllLoaded();
  unwinder->Maintain();  // as the collector does (the cfi tables)
  g_shot.unwinder = unwinder.get();
  g_shot.bounds = CurrentStackBounds();
  static const uintptr_t stack = MapStack(64 << 10);
  g_shot.stack_top = switched ? stack : 0;
  if (switched && !StackSwitchSupported()) {
    state.SkipWithError("no stack switch on this architecture");
    return;
  }
  const int depth = static_cast<int>(state.range(0));
  const pid_t pid = getpid();
  const pid_t tid = gettid();
  Descend(depth, pid, tid);  // Warm the caches for this chain.
  double frames = 0;
  double seconds = 0;
  for (auto _ : state) {
    Descend(depth, pid, tid);
    state.SetIterationTime(g_shot.seconds_per_unwind);
    seconds += g_shot.seconds_per_unwind;
    frames = g_shot.frames;
  }
  state.counters["frames"] = frames;
  const double iterations = static_cast<double>(state.iterations());
  state.counters["ns_per_frame"] =
      frames > 0 && iterations > 0 ? seconds / iterations * 1e9 / frames : 0;
  g_shot.unwinder = nullptr;
}

}  // namespace
}  // namespace dlprof

int main(int argc, char** argv) {
  for (bool switched : {false, true}) {
    for (const char* name : {"fp", "cfi", "libunwind", "gperftools"}) {
      // "switched": Unwind() runs on another stack, as in the profiler's
      // handler (core/signal_handler.cc), so libunwind's fast trace and
      // gperftools' walk from their own frame cross the stack switch.
      std::string label = std::string("BM_Unwind/") + name + (switched ? "/switched" : "");
      benchmark::RegisterBenchmark(label.c_str(), dlprof::BM_Unwind, std::string(name), switched)
          ->Arg(8)
          ->Arg(32)
          ->Arg(128)
          ->UseManualTime()
          ->Unit(benchmark::kNanosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
