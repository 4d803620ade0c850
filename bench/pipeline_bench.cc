// Throughput of everything after the signal handler, per sample:
//   - the writer: the collector draining a thread's sample ring, deduplicating
//     stacks and stage paths, encoding and appending checksummed chunks
//     (core/collector.h, driven directly with synthetic rings);
//   - the reporter: ReadDlprofFile, ReadGperftools, the symbolizer, the
//     analysis, each report writer, and all of them together.
//
//   build/bench/pipeline_bench --benchmark_min_time=0.2
//
// The synthetic samples look like a profiled data loader's: 32-frame stacks
// whose pcs are real code addresses of this binary and the libraries it maps
// (so the symbolizer does real DWARF lookups), drawn from a pool of 2000
// locations into 500 distinct stacks, with stage paths and step markers. Each
// result has `ns_per_sample` (the time of the measured section divided by
// the samples it handled), which is what the BENCHMARKS.md table quotes.
// Measured sections are timed with the thread's CPU clock, not wall time: the
// machine these run on is shared and often overloaded.
//
// Run it without DLPROF_SAMPLE: it uses the runtime's thread slots itself.
#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <dlprof/dlprof.h>
#include <dlprof/format.h>

#include "core/annotations.h"
#include "core/collector.h"
#include "core/signal_handler.h"
#include "core/thread_registry.h"
#include "readers/dlprof_reader.h"
#include "readers/gperftools_reader.h"
#include "readers/profile.h"
#include "readers/symbolizer.h"
#include "reports/analysis.h"
#include "reports/report_writer.h"

namespace dlprof {
namespace {

constexpr int kDepth = 32;
constexpr int kPoolPcs = 2000;
constexpr int kDistinctStacks = 500;
constexpr int kFileThreads = 4;
constexpr int kFileSamples = 100000;  // 4 threads x 25 s at 1000 Hz

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// CPU time of this thread: what the measured work costs, whatever the load.
int64_t CpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A scratch folder, removed at exit.
struct TempDir {
  std::string path;
  int fd = -1;
  TempDir() {
    char tmpl[] = "/tmp/dlprof-pipeline-bench-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path = tmpl;
    fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  ~TempDir() {
    if (DIR* d = opendir(path.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') unlinkat(fd, e->d_name, 0);
      }
      closedir(d);
    }
    close(fd);
    rmdir(path.c_str());
  }
};
TempDir& Scratch() {
  static TempDir* dir = new TempDir();
  return *dir;
}

// Code addresses of this process: random offsets inside every executable
// PT_LOAD segment of every loaded object.
std::vector<uint64_t> CodePool() {
  struct Range {
    uint64_t lo, hi;
  };
  std::vector<Range> ranges;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        auto* out = static_cast<std::vector<Range>*>(arg);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_memsz > 4096) {
            out->push_back({info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz});
          }
        }
        return 0;
      },
      &ranges);
  std::mt19937_64 rng(42);
  std::vector<uint64_t> pool;
  for (int i = 0; i < kPoolPcs; ++i) {
    const Range& r = ranges[rng() % ranges.size()];
    pool.push_back(r.lo + rng() % (r.hi - r.lo));
  }
  return pool;
}

struct Synth {
  std::vector<std::vector<uint64_t>> stacks;  // leaf first
  std::vector<std::vector<uint32_t>> paths;   // stage paths, outermost first
  std::mt19937_64 rng{7};
  uint64_t unique = 0;
};

Synth& Synthetic() {
  static Synth* s = [] {
    auto* s = new Synth();
    std::vector<uint64_t> pool = CodePool();
    std::mt19937_64 rng(1);
    // A shared base (thread start, main loop) and varied upper frames.
    std::vector<uint64_t> base;
    for (int i = 0; i < 8; ++i) base.push_back(pool[i]);
    for (int k = 0; k < kDistinctStacks; ++k) {
      std::vector<uint64_t> st;
      for (int i = 0; i < kDepth - 8; ++i) st.push_back(pool[8 + rng() % (kPoolPcs - 8)]);
      st.insert(st.end(), base.rbegin(), base.rend());
      s->stacks.push_back(std::move(st));
    }
    const uint32_t read = InternStage("read"), decode = InternStage("decode"),
                   augment = InternStage("augment");
    s->paths = {{}, {read}, {decode}, {decode, augment}};
    return s;
  }();
  return *s;
}

// Writes one sample into the slot's ring exactly as the signal handler does.
// unique_stacks: the leaf pc is new every time (no deduplication possible).
bool PutSample(ThreadSlot* slot, Synth& syn, int64_t time, bool unique_stacks) {
  const std::vector<uint64_t>& stack = syn.stacks[syn.rng() % syn.stacks.size()];
  const std::vector<uint32_t>& path = syn.paths[syn.rng() % syn.paths.size()];
  const uint32_t depth = static_cast<uint32_t>(path.size());
  const size_t stage_words = (depth + 1) / 2;
  const size_t n = 2 + stage_words + stack.size();
  uint64_t pos = slot->samples.Reserve(n);
  if (pos == UINT64_MAX) return false;
  slot->samples.Put(pos, kSampleTag << 56 | static_cast<uint64_t>(depth) << 16 | stack.size());
  slot->samples.Put(pos + 1, static_cast<uint64_t>(time));
  for (size_t w = 0; w < stage_words; ++w) {
    uint64_t lo = path[2 * w], hi = 2 * w + 1 < depth ? path[2 * w + 1] : 0;
    slot->samples.Put(pos + 2 + w, lo | hi << 32);
  }
  for (size_t f = 0; f < stack.size(); ++f) {
    uint64_t pc = stack[f];
    if (unique_stacks && f == 0) pc += ++syn.unique % 4096;
    slot->samples.Put(pos + 2 + stage_words + f, pc);
  }
  slot->samples.Commit(pos, n);
  slot->samples_taken.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void PutEvent(ThreadSlot* slot, uint64_t kind, int64_t time) {
  uint64_t pos = slot->events.Reserve(2);
  if (pos == UINT64_MAX) return;
  slot->events.Put(pos, kind << 56);
  slot->events.Put(pos + 1, static_cast<uint64_t>(time));
  slot->events.Commit(pos, 2);
}

// The slots the synthetic process samples: this thread's, plus fake threads.
std::vector<ThreadSlot*>& Slots() {
  static std::vector<ThreadSlot*>* slots = [] {
    auto* v = new std::vector<ThreadSlot*>();
    const pid_t self = CurrentTid();
    for (int i = 0; i < kFileThreads; ++i) {
      ThreadSlot* s = ClaimSlot(i == 0 ? self : 0x3fff0000 + i);
      if (s == nullptr) std::abort();
      PublishSlot(s);
      v->push_back(s);
    }
    return v;
  }();
  return *slots;
}

void SetFields(Collector* c) {
  c->SetProcessField("pid", std::to_string(getpid()));
  c->SetProcessField("ppid", std::to_string(getppid()));
  c->SetProcessField("role", "main");
  c->SetProcessField("worker", "-1");
  c->SetProcessField("run_id", "bench");
  c->SetProcessField("hz", "1000");
  c->SetProcessField("mode", "light");
  c->SetProcessField("unwinder", "libunwind");
  c->SetProcessField("timer", "perf");
  c->SetProcessField("clock", "monotonic");
  c->SetProcessField("start_ns", std::to_string(NowNs()));
  c->SetProcessField("command", "pipeline_bench");
}

// A collector starting on the synthetic slots: the slots forget what an
// earlier collector knew of them (file thread index, CPU clock baseline).
void ResetSlotsForNewCollector() {
  for (ThreadSlot* s : Slots()) ResetSlot(s);
}

dlprof_buffer* PrefetchBuffer() {
  static dlprof_buffer* buffer = CreateBuffer("prefetch", 8);
  return buffer;
}

bool NotWhileSampling(benchmark::State& state) {
  if (!dlprof_enabled()) return true;
  state.SkipWithError("run without DLPROF_SAMPLE: this benchmark drives the runtime's slots itself");
  return false;
}

// The writer: per iteration, one second of one thread at 1000 Hz — 1000
// samples, drained every 10 (the collector's 10 ms period), one flush.
void BM_CollectorDrainFlush(benchmark::State& state) {
  if (!NotWhileSampling(state)) return;
  const bool unique_stacks = state.range(0) != 0;
  Synth& syn = Synthetic();
  ThreadSlot* slot = Slots()[0];
  ResetSlotsForNewCollector();
  static int file_seq = 0;
  Collector c;
  std::string error;
  if (!c.Open(Scratch().fd, Scratch().path, "writer-" + std::to_string(++file_seq) + ".dlprof", &error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  SetFields(&c);
  c.Flush();  // the header chunks and memory maps, written once per process
  const uint64_t bytes0 = c.bytes_written(), samples0 = c.samples_written();
  int64_t t = NowNs(), measured = 0, total = 0;
  for (auto _ : state) {
    for (int tick = 0; tick < 100; ++tick) {
      for (int i = 0; i < 10; ++i) PutSample(slot, syn, t += 1000000, unique_stacks);
      const int64_t start = CpuNs();
      c.Drain();
      if (tick == 99) c.Flush();
      measured += CpuNs() - start;
    }
    state.SetIterationTime(static_cast<double>(measured) * 1e-9);
    total += measured;
    measured = 0;
  }
  const double samples = static_cast<double>(c.samples_written() - samples0);
  state.counters["samples"] = samples;
  state.counters["ns_per_sample"] = static_cast<double>(total) / samples;
  state.counters["bytes_per_sample"] = (c.bytes_written() - bytes0) / samples;
  c.Finish(t);
}
BENCHMARK(BM_CollectorDrainFlush)->ArgName("unique_stacks")->Arg(0)->Arg(1)->UseManualTime()
    ->Iterations(300)->Unit(benchmark::kMicrosecond);

// The collector's 10 ms tick for one live thread that looks blocked (its CPU
// clock barely moved), the case that reads /proc/self/task/<tid>/syscall.
void BM_CollectorSnapshotTick(benchmark::State& state) {
  if (!NotWhileSampling(state)) return;
  ResetSlotsForNewCollector();
  dlprof_buffer* buffer = PrefetchBuffer();
  Collector c;
  std::string error;
  static int file_seq = 0;
  if (!c.Open(Scratch().fd, Scratch().path, "ticks-" + std::to_string(++file_seq) + ".dlprof", &error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  int64_t t = NowNs(), measured = 0;
  int n = 0;
  for (auto _ : state) {
    buffer->size.store(static_cast<uint64_t>(n & 7), std::memory_order_relaxed);
    const int64_t start = CpuNs();
    c.SnapshotTick(t += 10000000);
    if (++n % 100 == 0) c.Flush();
    measured += CpuNs() - start;
  }
  state.counters["ns_per_tick"] = static_cast<double>(measured) / static_cast<double>(state.iterations());
  c.Finish(t);
}
BENCHMARK(BM_CollectorSnapshotTick)->Unit(benchmark::kMicrosecond);

// A profile file like a real run's: kFileThreads threads at 1000 Hz, 10 ms
// ticks, a step every 100 ms with a data wait in it, flushed every second.
const std::string& DlprofFile() {
  static std::string* path = [] {
    auto* p = new std::string(Scratch().path + "/main-1.dlprof");
    Synth& syn = Synthetic();
    std::vector<ThreadSlot*>& slots = Slots();
    ResetSlotsForNewCollector();
    dlprof_buffer* buffer = PrefetchBuffer();
    Collector c;
    std::string error;
    if (!c.Open(Scratch().fd, Scratch().path, "main-1.dlprof", &error)) std::abort();
    SetFields(&c);
    int64_t t = NowNs();
    c.SetProcessField("start_ns", std::to_string(t));
    const int per_thread = kFileSamples / kFileThreads;
    for (int ms = 0; ms < per_thread; ++ms) {
      t += 1000000;
      for (size_t i = 0; i < slots.size(); ++i) {
        while (!PutSample(slots[i], syn, t + static_cast<int64_t>(i) * 1000, false)) c.Drain();
      }
      if (ms % 100 == 0) PutEvent(slots[0], DLPROF_EVENT_STEP_BEGIN, t);
      if (ms % 100 == 10) PutEvent(slots[0], DLPROF_EVENT_WAIT_BEGIN, t);
      if (ms % 100 == 40) PutEvent(slots[0], DLPROF_EVENT_WAIT_END, t);
      if (ms % 100 == 99) PutEvent(slots[0], DLPROF_EVENT_STEP_END, t);
      if (ms % 10 == 9) {
        buffer->size.store(static_cast<uint64_t>(ms % 9), std::memory_order_relaxed);
        c.SnapshotTick(t);
        c.Drain();
      }
      if (ms % 1000 == 999) c.Flush();
    }
    c.Finish(t + 1000000);
    return p;
  }();
  return *path;
}

// The gperftools CPU profile of the same samples (gperftools aggregates a
// run's identical stacks into one record with a count).
const std::string& GperftoolsFile() {
  static std::string* path = [] {
    auto* p = new std::string(Scratch().path + "/cpu.prof");
    Synth& syn = Synthetic();
    std::vector<uint64_t> counts(syn.stacks.size(), 0);
    std::mt19937_64 rng(3);
    for (int i = 0; i < kFileSamples; ++i) ++counts[rng() % counts.size()];
    std::vector<uint64_t> words = {0, 3, 0, 1000, 0};
    for (size_t k = 0; k < counts.size(); ++k) {
      if (counts[k] == 0) continue;
      words.push_back(counts[k]);
      words.push_back(syn.stacks[k].size());
      words.insert(words.end(), syn.stacks[k].begin(), syn.stacks[k].end());
    }
    words.insert(words.end(), {0, 1, 0});
    std::ofstream out(*p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(words.data()),
              static_cast<std::streamsize>(words.size() * sizeof(uint64_t)));
    std::ifstream maps("/proc/self/maps");
    out << maps.rdbuf();
    return p;
  }();
  return *path;
}

int64_t CpuSamples(const Profile& p) {
  int64_t n = 0;
  for (const Sample& s : p.samples) n += s.kind == SampleKind::kCpu ? s.count : 0;
  return n;
}

// Sets ns_per_sample from the time measured around the work itself.
void PerSample(benchmark::State& state, int64_t measured_ns, int64_t samples) {
  state.counters["samples"] = static_cast<double>(samples);
  state.counters["ns_per_sample"] =
      static_cast<double>(measured_ns) / static_cast<double>(state.iterations()) / samples;
}

Profile ReadFileOrDie(const std::string& path) {
  Profile p;
  std::string error;
  if (!ReadDlprofFile(path, &p, &error)) {
    std::fprintf(stderr, "pipeline_bench: %s\n", error.c_str());
    std::abort();
  }
  return p;
}

void BM_ReadDlprofFile(benchmark::State& state) {
  if (!NotWhileSampling(state)) return;
  const std::string& path = DlprofFile();
  int64_t measured = 0, samples = 0;
  for (auto _ : state) {
    const int64_t start = CpuNs();
    Profile p = ReadFileOrDie(path);
    measured += CpuNs() - start;
    samples = CpuSamples(p);
  }
  struct stat st;
  stat(path.c_str(), &st);
  state.counters["file_bytes_per_sample"] = static_cast<double>(st.st_size) / samples;
  PerSample(state, measured, samples);
}
BENCHMARK(BM_ReadDlprofFile)->Unit(benchmark::kMillisecond);

void BM_ReadGperftools(benchmark::State& state) {
  if (!NotWhileSampling(state)) return;
  const std::string& path = GperftoolsFile();
  int64_t measured = 0, samples = 0;
  for (auto _ : state) {
    const int64_t start = CpuNs();
    Profile p;
    ReadGperftools(path, &p);
    measured += CpuNs() - start;
    samples = CpuSamples(p);
  }
  PerSample(state, measured, samples);
}
BENCHMARK(BM_ReadGperftools)->Unit(benchmark::kMillisecond);

// A cold symbolizer per iteration, as `dlprof report` has: DWARF loading of
// every module included.
void BM_Symbolize(benchmark::State& state) {
  if (!NotWhileSampling(state)) return;
  const Profile read = ReadFileOrDie(DlprofFile());
  int64_t measured = 0;
  for (auto _ : state) {
    Profile p = read;
    const int64_t start = CpuNs();
    Symbolizer symbolizer;
    symbolizer.SymbolizeProfile(&p);
    measured += CpuNs() - start;
    benchmark::DoNotOptimize(p.locations.data());
  }
  state.counters["locations"] = static_cast<double>(read.locations.size());
  PerSample(state, measured, CpuSamples(read));
}
BENCHMARK(BM_Symbolize)->Unit(benchmark::kMillisecond);

const Profile& SymbolizedProfile() {
  static Profile* p = [] {
    auto* p = new Profile(ReadFileOrDie(DlprofFile()));
    Symbolizer symbolizer;
    symbolizer.SymbolizeProfile(p);
    return p;
  }();
  return *p;
}

void BM_Analyze(benchmark::State& state) {
  if (!NotWhileSampling(state)) return;
  const Profile& p = SymbolizedProfile();
  int64_t measured = 0;
  for (auto _ : state) {
    const int64_t start = CpuNs();
    Analysis a = Analyze(p);
    measured += CpuNs() - start;
    benchmark::DoNotOptimize(a.stages.data());
  }
  PerSample(state, measured, CpuSamples(p));
}
BENCHMARK(BM_Analyze)->Unit(benchmark::kMillisecond);

void BM_Render(benchmark::State& state, const std::string& file) {
  if (!NotWhileSampling(state)) return;
  const Profile& p = SymbolizedProfile();
  const Analysis a = Analyze(p);
  std::unique_ptr<ReportWriter> writer;
  for (auto& w : AllReportWriters()) {
    if (w->file_name() == file) writer = std::move(w);
  }
  if (writer == nullptr) {
    state.SkipWithError(("no writer for " + file).c_str());
    return;
  }
  int64_t measured = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    const int64_t start = CpuNs();
    std::string out = writer->Render(p, a);
    measured += CpuNs() - start;
    bytes = out.size();
  }
  state.counters["out_bytes"] = static_cast<double>(bytes);
  PerSample(state, measured, CpuSamples(p));
}

// The whole of `dlprof report` but the disk writes: read, symbolize (cold),
// analyse, render every output.
void BM_ReportAll(benchmark::State& state) {
  if (!NotWhileSampling(state)) return;
  const std::string& path = DlprofFile();
  int64_t measured = 0, samples = 0;
  for (auto _ : state) {
    const int64_t start = CpuNs();
    Profile p = ReadFileOrDie(path);
    Symbolizer symbolizer;
    symbolizer.SymbolizeProfile(&p);
    Analysis a = Analyze(p);
    for (const auto& w : AllReportWriters()) benchmark::DoNotOptimize(w->Render(p, a).size());
    measured += CpuNs() - start;
    samples = CpuSamples(p);
  }
  PerSample(state, measured, samples);
}
BENCHMARK(BM_ReportAll)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dlprof

int main(int argc, char** argv) {
  for (const auto& w : dlprof::AllReportWriters()) {
    const std::string file = w->file_name();
    benchmark::RegisterBenchmark(("BM_Render/" + file).c_str(), dlprof::BM_Render, file)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
