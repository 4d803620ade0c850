// The collector's one-time cost per object for the cfi unwinder: decoding a
// loaded object's .eh_frame into rows (DecodeEhFrame), as CfiMaintain does
// the first time a sample lands in it. In a torch process the big one is
// libtorch_cpu.so (9.9 MB of .eh_frame, ~220k FDEs): `perf record` put that
// decode at 4.7% of an 8-epoch training run's CPU (BENCHMARKS.md).
//
// The object is dlopen'ed and decoded in place (no copy), once per iteration.
// Counters: rows, and FDEs from the header's table.
//
//   build/bench/cfi_decode_bench [--benchmark_repetitions=5]
//   BENCH_CFI_LIBS="/path/a.so /path/b.so" build/bench/cfi_decode_bench
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "backends/eh_frame.h"

namespace dlprof {
namespace {

struct Found {
  const char* wanted;
  LoadedEhFrame frame;
  bool ok = false;
};

// The loaded object whose path ends with `suffix`.
bool FindLoaded(const std::string& suffix, LoadedEhFrame* out) {
  Found f{suffix.c_str(), {}, false};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* f = static_cast<Found*>(data);
        const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const size_t n = strlen(name), m = strlen(f->wanted);
        if (n < m || strcmp(name + n - m, f->wanted) != 0) return 0;
        f->ok = FindLoadedEhFrame(info, &f->frame);
        return 1;
      },
      &f);
  *out = f.frame;
  return f.ok;
}

void BM_DecodeEhFrame(benchmark::State& state, const std::string& path) {
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
    state.SkipWithError(("cannot dlopen " + path).c_str());
    return;
  }
  const std::string base = path.substr(path.rfind('/') + 1);
  LoadedEhFrame frame;
  if (!FindLoaded(base, &frame)) {
    state.SkipWithError(("no .eh_frame_hdr found for " + base).c_str());
    return;
  }
  size_t rows = 0;
  for (auto _ : state) {
    CfiRowVector out;
    std::string error;
    long skipped = 0;
    if (!DecodeEhFrame(frame.source, &out, &error, &skipped)) {
      state.SkipWithError(error.c_str());
      return;
    }
    rows = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["rows"] = static_cast<double>(rows);
}

// Default: the C++ runtime (always there) and, when python3-torch is
// installed, libtorch_cpu.so.
std::vector<std::string> Libraries() {
  std::vector<std::string> libs;
  if (const char* env = getenv("BENCH_CFI_LIBS")) {
    std::istringstream in(env);
    for (std::string p; in >> p;) libs.push_back(p);
    return libs;
  }
  libs.push_back("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
  const char* torch = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13";
  if (access(torch, R_OK) == 0) libs.push_back(torch);
  return libs;
}

}  // namespace
}  // namespace dlprof

int main(int argc, char** argv) {
  for (const std::string& lib : dlprof::Libraries()) {
    const std::string label = "BM_DecodeEhFrame/" + lib.substr(lib.rfind('/') + 1);
    benchmark::RegisterBenchmark(label.c_str(), dlprof::BM_DecodeEhFrame, lib)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
