// `dlprof report` on small crafted files that multiply: stage paths that
// repeat one name deep, long names at full depth, many thread definitions,
// many spellings of one module's path, a module whose debug file is a FIFO.
// Each is put in a real run folder beside its good files; the real command
// reports them, and its output and peak memory (ru_maxrss of the child, from
// wait4) must stay within the stated bounds while the good files are still
// reported.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <dlprof/dlprof.h>
#include <dlprof/format.h>

#include "core/varint.h"
#include "readers/dlprof_reader.h"
#include "readers/profile.h"
#include "reports/utf8.h"
#include "tests/support/files.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

extern char** environ;

namespace dlprof {
namespace {

using nlohmann::json;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::ReadFile;
using testing::RunCommand;
using testing::RunProcess;
using testing::TempDir;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";

// The stated bounds (docs/ARCHITECTURE.md, "Bounds on what an input
// multiplies"): the outputs together at most 50 times the input's bytes plus
// 64 MiB, and the report's peak memory at most 100 times plus 128 MiB.
constexpr uint64_t kOutputFactor = 50;
constexpr uint64_t kOutputConstant = uint64_t{64} << 20;
constexpr uint64_t kRssFactor = 100;
constexpr uint64_t kRssConstant = uint64_t{128} << 20;

// A .dlprof file written chunk by chunk.
class FileBuilder {
 public:
  // `extra`: more fields of the process chunk, after the usual ones.
  explicit FileBuilder(const std::vector<std::pair<std::string, std::string>>& extra = {}) {
    data_ = std::string(DLPROF_FILE_MAGIC, 8);
    PutU32(DLPROF_FORMAT_VERSION);
    PutU32(0);
    std::string b;
    std::vector<std::pair<std::string, std::string>> fields = {
        {"pid", "4242"}, {"ppid", "1"}, {"role", "worker"}, {"worker", "9"}, {"hz", "100"},
        {"mode", "light"}, {"start_ns", "1000000"}, {"command", "hostile"}};
    fields.insert(fields.end(), extra.begin(), extra.end());
    PutVarint(&b, fields.size());
    for (const auto& [k, v] : fields) PutBytes(&b, k), PutBytes(&b, v);
    Chunk(DLPROF_CHUNK_PROCESS, b);
  }
  // Appends a chunk; returns its offset.
  size_t Chunk(uint32_t type, const std::string& payload) {
    const size_t at = data_.size();
    PutU32(DLPROF_CHUNK_MAGIC);
    PutU32(type);
    PutU32(static_cast<uint32_t>(payload.size()));
    PutU32(static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size()))));
    data_ += payload;
    return at;
  }
  // Threads index first..first+n-1, tid 10000+index.
  void Threads(uint32_t first, uint32_t n) {
    std::string b;
    PutVarint(&b, n);
    for (uint32_t i = 0; i < n; ++i) {
      PutVarint(&b, first + i);
      PutVarint(&b, 10000 + first + i);
      PutBytes(&b, "");
    }
    Chunk(DLPROF_CHUNK_THREADS, b);
  }
  size_t Stages(const std::vector<std::string>& names) {  // ids 1, 2, ...
    std::string b;
    PutVarint(&b, names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      PutVarint(&b, i + 1);
      PutBytes(&b, names[i]);
    }
    return Chunk(DLPROF_CHUNK_STAGES, b);
  }
  size_t Paths(uint32_t first, const std::vector<std::vector<uint32_t>>& paths) {
    std::string b;
    PutVarint(&b, first);
    PutVarint(&b, paths.size());
    for (const auto& path : paths) {
      PutVarint(&b, path.size());
      for (uint32_t s : path) PutVarint(&b, s);
    }
    return Chunk(DLPROF_CHUNK_STAGE_PATHS, b);
  }
  void Map(uint64_t start, uint64_t limit, const std::string& path, const std::string& build_id) {
    std::string b;
    PutVarint(&b, 1);
    PutVarint(&b, start);
    PutVarint(&b, limit);
    PutVarint(&b, 0);
    PutBytes(&b, path);
    PutBytes(&b, build_id);
    Chunk(DLPROF_CHUNK_MAPS, b);
  }
  // Stacks first, first+1, ... of one frame each.
  void Stacks(uint32_t first, const std::vector<uint64_t>& pcs) {
    std::string b;
    PutVarint(&b, first);
    PutVarint(&b, pcs.size());
    for (uint64_t pc : pcs) {
      PutVarint(&b, 1);
      PutVarint(&b, ZigZag(static_cast<int64_t>(pc)));
    }
    Chunk(DLPROF_CHUNK_STACKS, b);
  }
  struct Rec {
    uint32_t thread, stack, path;
  };
  void Samples(const std::vector<Rec>& recs) {
    std::string b;
    PutVarint(&b, 2000000);
    PutVarint(&b, recs.size());
    for (const Rec& r : recs) {
      PutVarint(&b, ZigZag(1000));
      PutVarint(&b, r.thread);
      PutVarint(&b, r.stack);
      PutVarint(&b, r.path);
      PutVarint(&b, 0);
    }
    Chunk(DLPROF_CHUNK_SAMPLES, b);
  }
  const std::string& End() {
    std::string b;
    PutVarint(&b, 9000000);
    Chunk(DLPROF_CHUNK_END, b);
    return data_;
  }

 private:
  void PutU32(uint32_t v) {
    for (int i = 0; i < 4; ++i) data_.push_back(static_cast<char>(v >> (8 * i)));
  }
  std::string data_;
};

struct Measured {
  int exit_code = -1;
  uint64_t max_rss = 0;  // bytes
  std::string err;
};

// Runs argv with stderr to a file and waits for it with wait4, whose rusage
// is that child's alone.
Measured RunMeasured(const std::vector<std::string>& argv, const std::string& err_file) {
  Measured m;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) return m;
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) != pid) return m;
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  m.max_rss = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  m.err = ReadFile(err_file);
  return m;
}

uint64_t FolderBytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

int Lines(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

class ReportBounds : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    source_ = new TempDir;
    ProcessResult r = RunProcess({kDlprof, "run", "--no-report", "-o", source_->File("out"), "--",
                                  ProgramPath("rt_workload"), "fork", "2"});
    run_ok_ = r.exit_code == 0;
    run_log_ = new std::string(r.err);
  }
  static void TearDownTestSuite() {
    delete source_;
    delete run_log_;
  }
  void SetUp() override {
    ASSERT_TRUE(run_ok_) << *run_log_;
    run_ = dir_.File("run");
    int status = 0;
    RunCommand("cp -r '" + source_->File("out") + "/latest/.' '" + run_ + "'", &status);
    ASSERT_EQ(status, 0);
    hostile_ = run_ + "/worker-99.dlprof";
  }

  // Reports the run folder with `hostile_` in it (under a 3 GiB address
  // space limit outside the sanitizers, killed after 60 s), and checks the
  // bounds and that all four processes are reported.
  Measured ReportAndCheckBounds() {
    const uint64_t input = FolderBytes(run_);
    std::vector<std::string> argv;
    if (!testing::kUnderSanitizer) {
      argv = {"/usr/bin/timeout", "60", "/usr/bin/prlimit", "--as=3221225472", "--"};
    }
    argv.insert(argv.end(), {kDlprof, "report", run_, "-o", dir_.File("report")});
    Measured m = RunMeasured(argv, dir_.File("report.err"));
    EXPECT_EQ(m.exit_code, 0) << m.err.substr(0, 4000);
    const std::string summary = ReadFile(dir_.File("report/summary.json"));
    EXPECT_EQ(summary.empty() ? -1 : static_cast<int>(json::parse(summary)["processes"].size()), 4)
        << m.err.substr(0, 4000);
    const uint64_t output = std::filesystem::exists(dir_.File("report"))
                                ? FolderBytes(dir_.File("report")) : 0;
    EXPECT_LE(output, kOutputFactor * input + kOutputConstant)
        << "input " << input << " bytes, output " << output << " bytes";
    if (!testing::kUnderSanitizer) {
      EXPECT_LE(m.max_rss, kRssFactor * input + kRssConstant) << "input " << input << " bytes";
    }
    std::fprintf(stderr, "input %llu bytes, output %llu bytes, peak RSS %llu MiB\n",
                 static_cast<unsigned long long>(input), static_cast<unsigned long long>(output),
                 static_cast<unsigned long long>(m.max_rss >> 20));
    return m;
  }

  static TempDir* source_;
  static bool run_ok_;
  static std::string* run_log_;
  TempDir dir_;
  std::string run_, hostile_;
};
TempDir* ReportBounds::source_;
bool ReportBounds::run_ok_;
std::string* ReportBounds::run_log_;

// `stages` stage ids, one path of `path` (ids), and `stacks` samples, each on
// a stack of its own (so each is a line of stacks.folded).
std::string StageFile(const std::vector<std::string>& stages, const std::vector<uint32_t>& path,
                      uint32_t stacks) {
  FileBuilder f;
  f.Threads(1, 1);
  f.Stages(stages);
  f.Paths(1, {path});
  std::vector<uint64_t> pcs;
  std::vector<FileBuilder::Rec> recs;
  for (uint32_t i = 0; i < stacks; ++i) {
    pcs.push_back(0x1000 + 16 * i);
    recs.push_back({1, i + 1, 1});
  }
  f.Stacks(1, pcs);
  f.Samples(recs);
  return f.End();
}

// A profile's own fields that reach a warning on the terminal (why CPU
// sampling stepped aside, the Python version) are escaped there as file
// names are: an escape sequence in a profile must not retitle or recolour
// the user's terminal. The field reaches the terminal, shown.
TEST(ReportTerminal, AProfilesFieldsInWarningsAreEscaped) {
  const std::string hostile = "\x1b]0;owned\x07\xe2\x80\xae\xc2\x9b" "2J";
  FileBuilder f({{"cpu_sampling", "off: " + hostile}, {"python", "3.11" + hostile},
                 {"python_frames", "off: no table" + hostile}});
  f.Threads(1, 1);
  f.Stages({"stage" + hostile});
  f.Paths(1, {{1}});
  f.Stacks(1, {0x1000});
  f.Samples({{1, 1, 1}});
  TempDir dir;
  testing::WriteFile(dir.File("hostile.dlprof"), f.End());
  ProcessResult r = RunProcess({kDlprof, "report", dir.File("hostile.dlprof"), "-o", dir.File("report")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string* text : {&r.out, &r.err}) {
    for (size_t i = 0; i < text->size();) {
      uint32_t cp;
      size_t bad = 0;
      const size_t n = Utf8At(*text, i, &cp, &bad);
      ASSERT_TRUE(n != 0 && (!IsTerminalControl(cp) || cp == '\n')) << "byte " << i << " of\n" << *text;
      i += n;
    }
  }
  const std::string shown = "\\x1b]0;owned\\x07\\xe2\\x80\\xae\\xc2\\x9b2J";
  EXPECT_NE(r.err.find("CPU sampling off: " + shown), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Python 3.11" + shown), std::string::npos) << r.err;
}

// The case: one name repeated 1,024 deep (537 MB of stacks.folded
// from 66 KB before the reader cut paths to the runtime's depth).
TEST_F(ReportBounds, AStageNameRepeatedDeepIsCutToTheRuntimesDepth) {
  testing::WriteFile(hostile_, StageFile({std::string(60, 's')}, std::vector<uint32_t>(1024, 1), 6000));
  Measured m = ReportAndCheckBounds();
  EXPECT_EQ(Lines(m.err, ": 1 stage path deeper than the runtime's 16 (down to depth 1024) cut to "
                         "their outermost 16 stages"), 1) << m.err.substr(0, 4000);
  EXPECT_EQ(Lines(m.err, hostile_ + ": offset "), 1) << m.err.substr(0, 4000);
}

// The reader alone: a path deeper than the runtime's 16 keeps its outermost
// 16 stages, a name longer than its 1 KiB is cut as the runtime cuts (not
// inside a UTF-8 sequence, then "..."), one warning each for the file.
TEST(ReportBoundsReader, DeepPathsAndLongNamesAreCutAsTheRuntimeCutsThem) {
  std::vector<std::string> names = {std::string(3000, 'x') + "\xc3\xa9", "y" + std::string(2000, '\xc3')};
  for (size_t i = 0; i < 2000; ++i) names[1][1 + i] = i % 2 ? '\xa9' : '\xc3';  // "é" 1,000 times
  std::vector<uint32_t> path;
  for (int i = 0; i < 40; ++i) path.push_back(i < 20 ? 1 : 2);
  FileBuilder f;
  f.Threads(1, 1);
  const size_t stages_at = f.Stages(names);
  const size_t paths_at = f.Paths(1, {path, {2}});
  f.Stacks(1, {0x1000});
  f.Samples({{1, 1, 1}, {1, 1, 2}});
  const std::string data = f.End();
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(data, "hostile.dlprof", &p, &error)) << error;
  ASSERT_EQ(p.processes.size(), 1u);
  ASSERT_EQ(p.stage_paths.size(), 3u);  // empty, the cut path, {2}
  EXPECT_EQ(p.stage_paths[1].size(), 16u);
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[1], std::string(1024, 'x') + "...");
  EXPECT_EQ(p.stages[2].size(), 1023u + 3u);  // "y" and 511 "é", not half of the 512th
  EXPECT_EQ(p.stages[2].substr(1021), "\xc3\xa9...");
  std::string warnings;
  for (const std::string& w : p.processes[0].warnings) warnings += w + "\n";
  EXPECT_EQ(warnings,
            "hostile.dlprof: offset " + std::to_string(paths_at) + ": 1 stage path deeper than the "
            "runtime's 16 (down to depth 40) cut to their outermost 16 stages\n"
            "hostile.dlprof: offset " + std::to_string(stages_at) + ": 2 stage names longer than the "
            "runtime's 1024 bytes (up to 3002 bytes) cut to it and marked \"...\"\n");
  EXPECT_EQ(p.input_bytes, data.size());
}

// Within the runtime's depth and name length, 16 names of 1 KiB on 6,000
// stacks would still be 100 MB of stacks.folded: the writer keeps its
// budget, the stacks with the most samples first.
TEST_F(ReportBounds, LongNamesAtFullDepthKeepStacksFoldedWithinItsBudget) {
  std::vector<std::string> names;
  std::vector<uint32_t> path;
  for (uint32_t i = 0; i < DLPROF_MAX_STAGE_DEPTH; ++i) {
    names.push_back(std::string(1024, static_cast<char>('a' + i)));
    path.push_back(i + 1);
  }
  testing::WriteFile(hostile_, StageFile(names, path, 6000));
  Measured m = ReportAndCheckBounds();
  EXPECT_NE(m.err.find("stacks.folded: "), std::string::npos) << m.err.substr(0, 4000);
}

// Many threads, each with samples: every per-thread table of the analysis
// and the writers.
TEST_F(ReportBounds, ManyThreadDefinitionsCostMemoryInProportion) {
  FileBuilder f;
  const uint32_t kThreads = 80000;
  f.Threads(1, kThreads);
  f.Stacks(1, {0x1000});
  std::vector<FileBuilder::Rec> recs;
  for (uint32_t i = 0; i < kThreads; ++i) recs.push_back({i + 1, 1, 0});
  f.Samples(recs);
  testing::WriteFile(hostile_, f.End());
  ReportAndCheckBounds();
}

std::string LibcPath() {
  const std::string maps = ReadFile("/proc/self/maps");
  const size_t at = maps.find("/libc.so.6");
  if (at == std::string::npos) return "";
  const size_t start = maps.rfind(' ', at) + 1;
  return maps.substr(start, at + 10 - start);
}

// `n` spellings of libc's path ("/usr/lib/x86_64-linux-gnu/././libc.so.6"),
// each mapped at its own address with samples in it: one module, opened once.
std::string SpellingsFile(const std::string& libc, int n, const std::string& build_id) {
  FileBuilder f;
  f.Threads(1, 1);
  const size_t slash = libc.rfind('/');
  std::vector<uint64_t> pcs;
  std::vector<FileBuilder::Rec> recs;
  for (int k = 0; k < n; ++k) {
    std::string spelling = libc.substr(0, slash);
    for (int i = 0; i < k; ++i) spelling += i % 2 ? "/." : "/";
    spelling += libc.substr(slash);
    const uint64_t start = 0x10000000 + uint64_t(k) * 0x1000000;
    f.Map(start, start + 0x200000, spelling, build_id);
    for (uint64_t off : {0x30000, 0x50000, 0x90000}) {
      pcs.push_back(start + off);
      recs.push_back({1, static_cast<uint32_t>(pcs.size()), 0});
    }
  }
  f.Stacks(1, pcs);
  f.Samples(recs);
  return f.End();
}

TEST_F(ReportBounds, SpellingsOfOnePathWithoutBuildIdAreOneModule) {
  const std::string libc = LibcPath();
  ASSERT_FALSE(libc.empty());
  testing::WriteFile(hostile_, SpellingsFile(libc, 300, ""));
  ReportAndCheckBounds();
}

// A module whose .gnu_debuglink names a FIFO next to it, or without one a
// FIFO "<module>.debug" (planted in a folder the profile names): the
// symbolizer must not open it.
void PlantedModule(const std::string& dir, bool debuglink) {
  const std::string module = dir + "/libplanted.so";
  const std::string debug = dir + "/libplanted.so.debug";
  int status = 0;
  RunCommand("cp '" + ProgramPath("rt_workload") + "' '" + module + "' && objcopy --only-keep-debug '" +
                 module + "' '" + debug + "' && strip --strip-debug '" + module + "'" +
                 (debuglink ? " && cd '" + dir + "' && objcopy --add-gnu-debuglink=libplanted.so.debug "
                              "libplanted.so" : ""),
             &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(unlink(debug.c_str()), 0);
  ASSERT_EQ(mkfifo(debug.c_str(), 0600), 0);
}

std::string PlantedModuleFile(const std::string& module) {
  FileBuilder f;
  f.Threads(1, 1);
  f.Map(0x10000000, 0x10100000, module, "");
  f.Stacks(1, {0x10001100});
  f.Samples({{1, 1, 0}});
  return f.End();
}

TEST_F(ReportBounds, ADebuglinkToAFifoIsNotOpened) {
  PlantedModule(dir_.path(), true);
  testing::WriteFile(hostile_, PlantedModuleFile(dir_.File("libplanted.so")));
  ReportAndCheckBounds();
}

TEST_F(ReportBounds, AFifoNamedAfterAModuleWithoutDebuglinkIsNotOpened) {
  PlantedModule(dir_.path(), false);
  testing::WriteFile(hostile_, PlantedModuleFile(dir_.File("libplanted.so")));
  ReportAndCheckBounds();
}

}  // namespace
}  // namespace dlprof
