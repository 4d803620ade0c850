// Counts the CPU samples a profiler recorded, with dlprof's own readers, for
// bench/whole_process.sh's fidelity column.
//
//   count_samples dlprof RUN_DIR_OR_FILE...   (.dlprof files, run folders)
//   count_samples gperftools PROFILE
//
// prints one line:
//   samples=N weighted=W processes=P dropped=D handler_ns=H files_bytes=B
// samples is the number of CPU samples recorded (signals that became a stack
// in the file; gperftools aggregates equal stacks, so there it is the sum of
// the records' counts). weighted is the sum of dlprof's sample weights: a
// sample also stands for timer periods that raised no signal of their own
// (POSIX timer overruns, perf periods that ended in the kernel), which the
// report uses to apportion CPU time. dropped and handler_ns are the runtime's
// own counters (dlprof only); files_bytes is the size on disk of what was read.
// COUNT_SAMPLES_COUNTERS=1 also prints each process's counters to stderr.
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "readers/dlprof_reader.h"
#include "readers/gperftools_reader.h"
#include "readers/profile.h"

namespace {

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::strcmp(argv[1], "dlprof") != 0 && std::strcmp(argv[1], "gperftools") != 0)) {
    std::fprintf(stderr, "usage: count_samples dlprof|gperftools PATH...\n");
    return 2;
  }
  const bool dlprof = std::strcmp(argv[1], "dlprof") == 0;
  dlprof::Profile profile;
  uint64_t bytes = 0;
  try {
    for (int i = 2; i < argc; ++i) {
      std::vector<std::string> files;
      std::string error;
      if (dlprof && IsDirectory(argv[i])) {
        files = dlprof::ListRunFiles(argv[i], &error);
        if (files.empty()) {
          std::fprintf(stderr, "count_samples: %s: %s\n", argv[i],
                       error.empty() ? "no .dlprof files" : error.c_str());
          return 1;
        }
      } else {
        files.push_back(argv[i]);
      }
      for (const std::string& f : files) {
        bytes += FileSize(f);
        if (!dlprof) {
          dlprof::ReadGperftools(f, &profile);
        } else if (!dlprof::ReadDlprofFile(f, &profile, &error)) {
          std::fprintf(stderr, "count_samples: %s\n", error.c_str());
          return 1;
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "count_samples: %s\n", e.what());
    return 1;
  }
  int64_t samples = 0, weighted = 0;
  for (const dlprof::Sample& s : profile.samples) {
    if (s.kind != dlprof::SampleKind::kCpu) continue;
    samples += dlprof ? 1 : s.count;
    weighted += s.count;
  }
  uint64_t dropped = 0, handler_ns = 0;
  const char* counters_env = std::getenv("COUNT_SAMPLES_COUNTERS");
  const bool show_counters = counters_env != nullptr && std::strcmp(counters_env, "1") == 0;
  for (const dlprof::Process& p : profile.processes) {
    for (const char* name : {"dropped_ring", "dropped_busy", "dropped_nothread"}) {
      auto it = p.counters.find(name);
      if (it != p.counters.end()) dropped += it->second;
    }
    auto it = p.counters.find("handler_ns");
    if (it != p.counters.end()) handler_ns += it->second;
    for (const std::string& w : p.warnings) std::fprintf(stderr, "count_samples: warning: %s\n", w.c_str());
    if (show_counters) {
      std::fprintf(stderr, "pid %d %s:", p.pid, p.role.c_str());
      for (const auto& [key, value] : p.counters) {
        std::fprintf(stderr, " %s=%llu", key.c_str(), static_cast<unsigned long long>(value));
      }
      std::fprintf(stderr, "\n");
    }
  }
  std::printf("samples=%lld weighted=%lld processes=%zu dropped=%llu handler_ns=%llu files_bytes=%llu\n",
              static_cast<long long>(samples), static_cast<long long>(weighted), profile.processes.size(),
              static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(handler_ns),
              static_cast<unsigned long long>(bytes));
  return 0;
}
