// The gperftools CPU profile reader: a real program profiled with Debian's
// libprofiler reads, symbolizes and agrees with google-pprof on the same file;
// hand-made files cover every word size and byte order, truncation and
// corruption.
#include "readers/gperftools_reader.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "readers/symbolizer.h"
#include "reports/pprof_writer.h"
#include "tests/support/files.h"

namespace dlprof {
namespace {

using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;

constexpr char kLibProfiler[] = "/usr/lib/x86_64-linux-gnu/libprofiler.so.0";

// Words in a chosen size and byte order, to build profiles by hand.
std::string Words(const std::vector<uint64_t>& words, size_t size, bool big_endian) {
  std::string out;
  for (uint64_t v : words) {
    for (size_t i = 0; i < size; ++i) {
      size_t shift = 8 * (big_endian ? size - 1 - i : i);
      out.push_back(static_cast<char>((v >> shift) & 0xff));
    }
  }
  return out;
}

// Two records in a program mapped at 0x400000 (file offset 0x1000), and a
// return address exactly at the end of the mapping (its call is inside).
std::string HandMadeProfile(size_t size, bool big_endian) {
  std::vector<uint64_t> words = {0, 3, 0,        10000,    0,  // header, 10 ms
                                 7, 2, 0x400123, 0x400456,     // 7 × leaf, caller
                                 2, 2, 0x400200, 0x401000,     // 2 ×, caller at limit
                                 0, 1, 0};                     // trailer
  return Words(words, size, big_endian) +
         "00400000-00401000 r-xp 00001000 08:01 42    /nonexistent/prog\n"
         "00601000-00602000 rw-p 00002000 08:01 42    /nonexistent/prog\n"
         "7f0000000000-7f0000001000 r-xp 00000000 00:00 0    [vdso]\n";
}

TEST(GperftoolsReaderTest, EveryWordSizeAndByteOrderReadsTheSame) {
  TempDir dir;
  for (size_t size : {8u, 4u}) {
    for (bool big : {false, true}) {
      SCOPED_TRACE(std::to_string(size) + (big ? " big" : " little"));
      std::string data = HandMadeProfile(size, big);
      EXPECT_TRUE(LooksLikeGperftoolsProfile(data));
      WriteFile(dir.File("p.prof"), data);
      Profile p;
      ReadGperftools(dir.File("p.prof"), &p);
      EXPECT_TRUE(p.warnings.empty());
      ASSERT_EQ(p.processes.size(), 1u);
      const Process& proc = p.processes[0];
      EXPECT_EQ(proc.pid, 0);
      EXPECT_EQ(proc.role, "main");
      EXPECT_EQ(proc.hz, 100);
      EXPECT_TRUE(proc.complete);
      EXPECT_EQ(proc.samples, 9u);
      ASSERT_EQ(proc.mappings.size(), 2u);  // executable ones only
      EXPECT_EQ(proc.mappings[0].path, "/nonexistent/prog");
      EXPECT_EQ(proc.mappings[1].path, "[vdso]");
      ASSERT_EQ(p.samples.size(), 2u);
      EXPECT_EQ(p.samples[0].count, 7);
      EXPECT_EQ(p.samples[0].cpu_ns, 70000000);
      EXPECT_EQ(p.samples[1].cpu_ns, 20000000);
      const std::vector<uint32_t>& stack = p.stacks[p.samples[1].stack];
      ASSERT_EQ(stack.size(), 2u);
      EXPECT_EQ(p.locations[stack[0]].module_offset, 0x1200u);
      EXPECT_EQ(p.locations[stack[1]].module, "/nonexistent/prog");
      EXPECT_EQ(p.locations[stack[1]].module_offset, 0x2000u);
      EXPECT_EQ(p.locations[stack[1]].address, 0x401000u);
    }
  }
}

TEST(GperftoolsReaderTest, TruncatedRecordKeepsEarlierOnesAndNamesItsOffset) {
  TempDir dir;
  std::string data = HandMadeProfile(8, false);
  const size_t second_record = (5 + 4) * 8;
  WriteFile(dir.File("cut.prof"), data.substr(0, second_record + 3 * 8 + 5));
  Profile p;
  ReadGperftools(dir.File("cut.prof"), &p);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0], dir.File("cut.prof") + ": offset " + std::to_string(second_record) +
                               ": record of 2 pcs cut short (29 bytes left); kept 1 complete "
                               "records, no memory map (addresses stay unsymbolized)");
  ASSERT_EQ(p.processes.size(), 1u);
  EXPECT_FALSE(p.processes[0].complete);
  EXPECT_EQ(p.processes[0].warnings, p.warnings);
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_EQ(p.samples[0].count, 7);

  // Cut right after a record: the trailer is what is missing.
  WriteFile(dir.File("cut2.prof"), data.substr(0, second_record));
  Profile q;
  ReadGperftools(dir.File("cut2.prof"), &q);
  ASSERT_EQ(q.warnings.size(), 1u);
  EXPECT_NE(q.warnings[0].find(": offset 72: file ends before the trailer"), std::string::npos)
      << q.warnings[0];
  EXPECT_EQ(q.samples.size(), 1u);
}

TEST(GperftoolsReaderTest, CorruptDepthStopsWithAWarning) {
  TempDir dir;
  std::string data = HandMadeProfile(8, false);
  data[(5 + 4 + 1) * 8 + 6] = 0x7f;  // the second record's depth becomes huge
  WriteFile(dir.File("bad.prof"), data);
  Profile p;
  ReadGperftools(dir.File("bad.prof"), &p);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("bad.prof: offset 72: stack depth"), std::string::npos)
      << p.warnings[0];
  EXPECT_EQ(p.samples.size(), 1u);
}

// A count no profiler writes (2^64 - 2, "samples -2" as it was shown): one
// warning with its offset, and the process's total stays a real count.
TEST(GperftoolsReaderTest, HostileCountIsBoundedAndNamed) {
  TempDir dir;
  std::string data = HandMadeProfile(8, false);
  const size_t second_record = (5 + 4) * 8;
  const std::string huge = Words({~uint64_t{0} - 1}, 8, false);
  data.replace(second_record, 8, huge);
  WriteFile(dir.File("hostile.prof"), data);
  Profile p;
  ReadGperftools(dir.File("hostile.prof"), &p);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0], dir.File("hostile.prof") + ": offset " + std::to_string(second_record) +
                               ": record count 18446744073709551614 is not a sample count; "
                               "counted as 1099511627776");
  ASSERT_EQ(p.processes.size(), 1u);
  EXPECT_EQ(p.processes[0].samples, 7u + (uint64_t{1} << 40));
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_EQ(p.samples[1].count, int64_t{1} << 40);
}

TEST(GperftoolsReaderTest, NotAProfileThrowsNamingTheFile) {
  TempDir dir;
  WriteFile(dir.File("text.prof"), "this is not a profile, just some text here");
  Profile p;
  try {
    ReadGperftools(dir.File("text.prof"), &p);
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir.File("text.prof") + ": offset 0:", 0), 0u)
        << e.what();
  }
  EXPECT_FALSE(LooksLikeGperftoolsProfile("short"));
}

// Flat and cumulative sample counts per function, as pprof counts them: flat
// goes to the innermost frame of the leaf, cum once per sample to every
// function on the stack.
struct Counts {
  std::map<std::string, int64_t> flat, cum;
  int64_t total = 0;
};

Counts CountByFunction(const Profile& p) {
  Counts c;
  for (const Sample& s : p.samples) {
    c.total += s.count;
    const std::vector<uint32_t>& stack = p.stacks.at(s.stack);
    if (stack.empty()) continue;
    c.flat[p.locations.at(stack[0]).frames.at(0).function] += s.count;
    std::set<std::string> seen;
    for (uint32_t id : stack) {
      for (const Frame& f : p.locations.at(id).frames) seen.insert(f.function);
    }
    for (const std::string& f : seen) c.cum[f] += s.count;
  }
  return c;
}

// Rows of `google-pprof --text` or `go tool pprof -top`: name -> (flat, cum).
std::map<std::string, std::pair<int64_t, int64_t>> ParseTop(const std::string& out) {
  std::map<std::string, std::pair<int64_t, int64_t>> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    long long flat, cum;
    char name[512];
    if (std::sscanf(line.c_str(), " %lld %*f%% %*f%% %lld %*f%% %511[^\n]", &flat, &cum, name) ==
        3) {
      rows[name] = {flat, cum};
    }
  }
  return rows;
}

// Profiles one real program once for all tests of the suite.
class RealProfileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (access(kLibProfiler, R_OK) != 0) return;
    dir_ = new TempDir;
    // Time-based spinning: heavy() burns 3× the CPU of light(), whatever the machine.
    WriteFile(dir_->File("busy.c"), R"(#include <stdio.h>
#include <time.h>
volatile unsigned long sink;
static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
__attribute__((noinline)) void spin(double seconds) {
  double end = cpu_seconds() + seconds;
  while (cpu_seconds() < end)
    for (unsigned long i = 0; i < 1000000; ++i) sink += i * i;
}
__attribute__((noinline)) void heavy(void) { spin(0.9); }
__attribute__((noinline)) void light(void) { spin(0.3); }
int main(void) { heavy(); light(); printf("%lu\n", sink); return 0; }
)");
    program_ = dir_->File("busy");
    profile_ = dir_->File("busy.prof");
    int status = 0;
    std::string out = RunCommand(
        "cc -g -O1 -fno-omit-frame-pointer -o " + program_ + " " + dir_->File("busy.c"), &status);
    if (status != 0) {
      setup_error_ = out;
      return;
    }
    out = RunCommand(
        "LD_PRELOAD=" + std::string(kLibProfiler) + " CPUPROFILE=" + profile_ + " " + program_,
        &status);
    if (status != 0 || !LooksLikeGperftoolsProfile(ReadFile(profile_))) setup_error_ = out;
  }

  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (access(kLibProfiler, R_OK) != 0) GTEST_SKIP() << "libprofiler is not installed";
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  }

  static TempDir* dir_;
  static std::string program_, profile_, setup_error_;
};

TempDir* RealProfileTest::dir_ = nullptr;
std::string RealProfileTest::program_, RealProfileTest::profile_, RealProfileTest::setup_error_;

// Functions of the program and of libc (via libc6-dbg or its symbol table).
constexpr const char* kCompared[] = {"spin", "heavy", "light", "main", "__libc_start_call_main"};

TEST_F(RealProfileTest, TopFunctionsAgreeWithGooglePprof) {
  Profile p;
  ReadGperftools(profile_, &p);
  ASSERT_TRUE(p.warnings.empty()) << p.warnings[0];
  ASSERT_EQ(p.processes.size(), 1u);
  EXPECT_TRUE(p.processes[0].complete);
  EXPECT_EQ(p.processes[0].hz, 100);
  bool found_program = false;
  for (const Mapping& m : p.processes[0].mappings) {
    if (m.path == program_) {
      found_program = true;
      EXPECT_EQ(m.build_id, ReadElfBuildId(program_));
      EXPECT_FALSE(m.build_id.empty());
    }
  }
  EXPECT_TRUE(found_program);

  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&p);
  Counts ours = CountByFunction(p);
  EXPECT_GE(ours.total, 60);  // 1.2 s of CPU at 100 Hz, minus the timer's slack

  int status = 0;
  std::string text = RunCommand("google-pprof --text " + program_ + " " + profile_, &status);
  ASSERT_EQ(status, 0) << text;
  auto theirs = ParseTop(text);
  EXPECT_NE(text.find("Total: " + std::to_string(ours.total) + " samples"), std::string::npos)
      << text;
  for (const char* fn : kCompared) {
    SCOPED_TRACE(fn);
    ASSERT_EQ(theirs.count(fn), 1u) << text;
    EXPECT_EQ(ours.flat[fn], theirs[fn].first) << text;
    EXPECT_EQ(ours.cum[fn], theirs[fn].second) << text;
  }
  // heavy() ran three times as long as light().
  EXPECT_GT(ours.cum["heavy"], 2 * ours.cum["light"]);

  // The leaf frames carry the source position inside spin().
  for (const Sample& s : p.samples) {
    const Location& leaf = p.locations.at(p.stacks.at(s.stack).at(0));
    if (leaf.frames.at(0).function != "spin") continue;
    EXPECT_EQ(leaf.frames[0].file, dir_->File("busy.c"));
    EXPECT_GE(leaf.frames[0].line, 9);
    EXPECT_LE(leaf.frames[0].line, 13);
  }
}

TEST_F(RealProfileTest, ConvertedToPprofGoPprofAgreesWithGooglePprof) {
  if (RunCommand("command -v go").find("/go") == std::string::npos) {
    GTEST_SKIP() << "go is not installed";
  }
  Profile p;
  ReadGperftools(profile_, &p);
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&p);
  WritePprof(p, dir_->File("busy.pb.gz"));
  int status = 0;
  std::string go =
      RunCommand("go tool pprof -top -sample_index=samples " + dir_->File("busy.pb.gz"), &status);
  ASSERT_EQ(status, 0) << go;
  std::string text = RunCommand("google-pprof --text " + program_ + " " + profile_, &status);
  ASSERT_EQ(status, 0) << text;
  auto theirs = ParseTop(text);
  auto ours = ParseTop(go);

  for (const char* fn : kCompared) {
    SCOPED_TRACE(fn);
    EXPECT_EQ(ours[fn], theirs[fn]) << go << "\n" << text;
  }
}

TEST_F(RealProfileTest, TruncatedRealProfileKeepsCompleteRecords) {
  std::string data = ReadFile(profile_);
  // Walk the 64-bit records to find their boundaries.
  auto word = [&](size_t at) {
    uint64_t v = 0;
    std::memcpy(&v, data.data() + at, 8);
    return v;
  };
  std::vector<size_t> starts;
  size_t pos = 5 * 8;
  while (!(word(pos) == 0 && word(pos + 8) == 1)) {
    starts.push_back(pos);
    pos += (2 + word(pos + 8)) * 8;
  }
  ASSERT_GE(starts.size(), 2u);
  size_t k = starts.size() / 2;
  WriteFile(dir_->File("half.prof"), data.substr(0, starts[k] + 20));
  Profile p;
  ReadGperftools(dir_->File("half.prof"), &p);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("half.prof: offset " + std::to_string(starts[k]) + ": "),
            std::string::npos)
      << p.warnings[0];
  EXPECT_EQ(p.samples.size(), k);
  // Without the memory map the symbolizer still names every pc.
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&p);
  for (const Location& l : p.locations) EXPECT_EQ(l.frames.at(0).function.rfind("0x", 0), 0u);
}

}  // namespace
}  // namespace dlprof
