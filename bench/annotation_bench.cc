// Cost of the annotation API (include/dlprof/dlprof.h) per call, with
// sampling off and on. "On" is a real session: run the binary with
// DLPROF_SAMPLE=1 (DLPROF_OUT somewhere disposable); the library constructor
// starts sampling this process (SIGPROF at DLPROF_HZ on this thread) before
// main. Every result carries `enabled` (dlprof_enabled()) and a label, so a
// run that silently failed to start the session cannot pass for "on".
//
//   DLPROF_SAMPLE=1 DLPROF_OUT=/tmp/x build/bench/annotation_bench
//
// Only the public C/C++ API is used, so the same source builds twice (see
// bench/CMakeLists.txt): annotation_bench links dlprof_core statically,
// annotation_bench_so calls libdlprof.so through the PLT, as a program that
// links -ldlprof or is LD_PRELOADed does.
//
// Each benchmark iteration times a batch of kBatch operations with the
// thread's CPU clock (manual time): on a shared, overloaded machine, wall time
// would also count the time this thread waited for a core. Step and wait markers append to the thread's
// event ring (8192 words, drained every 10 ms); a tight loop would fill it in
// microseconds and then measure the cheaper drop path, so between batches,
// outside the timed region, dlprof_flush() lets the collector drain the ring.
// The time column is per batch; the `ns_per_op` counter is per operation (one
// enter+exit pair, one set_size, one begin+end pair), what BENCHMARKS.md quotes.
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include <benchmark/benchmark.h>
#include <dlprof/dlprof.h>
#include <dlprof/dlprof.hpp>

namespace {

// 1024 marker pairs = 2048 events = 4096 ring words: half the event ring.
constexpr int kBatch = 1024;

int64_t CpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

void Describe(benchmark::State& state) {
  const bool on = dlprof_enabled() != 0;
  state.counters["enabled"] = on ? 1 : 0;
  state.SetLabel(on ? "sampling=on mode=" + Env("DLPROF_MODE", "light") +
                          " hz=" + Env("DLPROF_HZ", "default")
                    : std::string("sampling=off"));
}

// Runs `op` kBatch times per iteration and reports the time per op.
template <typename Op>
void RunBatches(benchmark::State& state, bool drain_events, Op op) {
  int64_t total = 0;
  for (auto _ : state) {
    const int64_t start = CpuNs();
    for (int i = 0; i < kBatch; ++i) op(i);
    const int64_t elapsed = CpuNs() - start;
    state.SetIterationTime(static_cast<double>(elapsed) * 1e-9);
    total += elapsed;
    // Not timed: let the collector empty the event ring before the next batch.
    if (drain_events && dlprof_enabled()) dlprof_flush(100);
  }
  state.counters["ns_per_op"] =
      static_cast<double>(total) / (static_cast<double>(state.iterations()) * kBatch);
  Describe(state);
}

uint32_t StageId() {
  static const uint32_t id = dlprof_stage_intern("bench_stage");
  return id;
}

void BM_Enabled(benchmark::State& state) {
  int sink = 0;
  RunBatches(state, false, [&](int) { sink += dlprof_enabled(); });
  benchmark::DoNotOptimize(sink);
}

void BM_StageEnterExit(benchmark::State& state) {
  const uint32_t id = StageId();
  const bool detailed = Env("DLPROF_MODE", "light") == "detailed";
  RunBatches(state, detailed, [&](int) {
    dlprof_stage_enter(id);
    dlprof_stage_exit();
  });
}

// The C++ RAII scope, one level inside another stage (a realistic nesting).
void BM_StageScopeNested(benchmark::State& state) {
  const uint32_t id = StageId();
  const bool detailed = Env("DLPROF_MODE", "light") == "detailed";
  dlprof_stage_enter(id);
  RunBatches(state, detailed, [&](int) {
    dlprof::StageScope scope(id);
    benchmark::ClobberMemory();
  });
  dlprof_stage_exit();
}

void BM_BufferSetSize(benchmark::State& state) {
  static dlprof_buffer* const buffer = dlprof_buffer_create("bench_buffer", 64);
  RunBatches(state, false, [&](int i) { dlprof_buffer_set_size(buffer, static_cast<uint64_t>(i & 63)); });
}

void BM_StepBeginEnd(benchmark::State& state) {
  RunBatches(state, true, [](int) {
    dlprof_step_begin();
    dlprof_step_end();
  });
}

void BM_WaitBeginEnd(benchmark::State& state) {
  RunBatches(state, true, [](int) {
    dlprof_wait_begin();
    dlprof_wait_end();
  });
}

}  // namespace

int main(int argc, char** argv) {
  // Benchmarks that add events flush between batches, which waits for the
  // collector's next 10 ms tick: a fixed number of batches keeps that to a
  // few seconds. The others run for the usual minimum time.
  const bool detailed = Env("DLPROF_MODE", "light") == "detailed";
  struct Entry {
    const char* name;
    void (*fn)(benchmark::State&);
    bool adds_events;
  };
  const Entry entries[] = {{"BM_Enabled", BM_Enabled, false},
                           {"BM_StageEnterExit", BM_StageEnterExit, detailed},
                           {"BM_StageScopeNested", BM_StageScopeNested, detailed},
                           {"BM_BufferSetSize", BM_BufferSetSize, false},
                           {"BM_StepBeginEnd", BM_StepBeginEnd, true},
                           {"BM_WaitBeginEnd", BM_WaitBeginEnd, true}};
  for (const Entry& e : entries) {
    auto* b = benchmark::RegisterBenchmark(e.name, e.fn)->UseManualTime()->Unit(benchmark::kMicrosecond);
    if (e.adds_events) b->Iterations(100);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
