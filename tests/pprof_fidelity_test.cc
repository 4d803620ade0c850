// profile.pb.gz as pprof itself expects it, read back by the real
// `go tool pprof`: mapping[0] is the main binary, a frame nothing named is
// left for pprof to symbolize from PPROF_BINARY_PATH (checked as pprof does
// it, with addr2line), functions carry their
// start line, lambdas keep their identity, and the profile says what wrote
// it.
#include <gtest/gtest.h>

#include <dlprof/version.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <unistd.h>

#include "readers/profile.h"
#include "reports/pprof_writer.h"
#include "tests/support/files.h"

namespace dlprof {
namespace {

using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

const std::string kBuild = DLPROF_BUILD_DIR;
const std::string kDlprof = kBuild + "/tools/dlprof";
const std::string kProgram = kBuild + "/tests/unnamed_hot";

bool HaveGo() { return RunCommand("command -v go").find("/go") != std::string::npos; }

std::string Pprof(const std::string& args) {
  int status = 0;
  std::string out = RunCommand("go tool pprof " + args, &status);
  EXPECT_EQ(status, 0) << out;
  return out;
}

// The standalone pprof (github.com/google/pprof, from the sources of Debian's
// golang-github-google-pprof-dev, which scripts/setup.sh installs), built
// once into the build tree. `go tool pprof` cannot stand in for it with C
// programs: its object reader knows Go's build ids only, so it refuses the
// right binary in PPROF_BINARY_PATH ("build-id mismatch (f906... != )").
// "" with *why set when it cannot be built.
std::string StandalonePprof(std::string* why) {
  static std::string error;
  static const std::string path = []() -> std::string {
    const std::string sources = "/usr/share/gocode/src/github.com/google/pprof";
    const std::string out = kBuild + "/tests/google-pprof";
    if (access(out.c_str(), X_OK) == 0) return out;
    if (access(sources.c_str(), R_OK) != 0) {
      error = sources + " is missing (scripts/setup.sh installs golang-github-google-pprof-dev)";
      return "";
    }
    // Built under a name of this process's, then renamed: test processes
    // running side by side may build it at once.
    const std::string tmp = out + "." + std::to_string(getpid());
    int status = 0;
    const std::string log = RunCommand("GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE=" + kBuild +
                                           "/go-cache go build -o " + tmp + " github.com/google/pprof 2>&1",
                                       &status);
    if (status != 0 || rename(tmp.c_str(), out.c_str()) != 0) {
      error = "building pprof failed: " + log;
      return "";
    }
    return out;
  }();
  *why = error;
  return path;
}

// Profiles `program` (400 ms of CPU in BurnUnnamed) and reports it into
// dir/report; returns the report folder.
std::string ProfileAndReport(const TempDir& dir, const std::string& program) {
  int status = 0;
  // Preloaded, as the README profiles a program: it does not link libdlprof.
  std::string out = RunCommand("DLPROF_SAMPLE=1 DLPROF_OUT=" + dir.File("out") +
                                   " LD_PRELOAD=" DLPROF_LIB_PATH " " + program,
                               &status);
  EXPECT_EQ(status, 0) << out;
  out = RunCommand(kDlprof + " report " + dir.File("out") + " -o " + dir.File("report"), &status);
  EXPECT_EQ(status, 0) << out;
  return dir.File("report");
}

// The line of `needle` in the program's source (1-based), 0 if absent.
int SourceLine(const std::string& needle) {
  std::ifstream in(std::string(DLPROF_SOURCE_DIR) + "/tests/programs/unnamed_hot.cc");
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find(needle) != std::string::npos) return n;
  }
  return 0;
}

class PprofFidelity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGo()) GTEST_SKIP() << "go is not installed (scripts/setup.sh installs golang-go)";
  }
  TempDir dir_;
};

TEST_F(PprofFidelity, StrippedFrameIsLeftForPprofToSymbolizeFromBinaryPath) {
  // The same binary without its symbol table: dlprof cannot name BurnUnnamed.
  RunCommand("mkdir -p " + dir_.File("bin"));
  const std::string stripped = dir_.File("bin/unnamed_hot");
  int status = 0;
  const std::string out = RunCommand("strip -o " + stripped + " " + kProgram, &status);
  ASSERT_EQ(status, 0) << out;
  const std::string report = ProfileAndReport(dir_, stripped);
  const std::string folded = ReadFile(report + "/stacks.folded");
  EXPECT_EQ(folded.find("BurnUnnamed"), std::string::npos) << folded;
  EXPECT_NE(folded.find("unnamed_hot+0x"), std::string::npos) << folded;

  // pprof names the profile after the program, not the loader.
  const std::string plain = Pprof("-symbolize=none -top " + report + "/profile.pb.gz");
  EXPECT_NE(plain.find("File: unnamed_hot\n"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("BurnUnnamed"), std::string::npos) << plain;
  // No invented name reaches pprof: the frame is an address in the module.
  EXPECT_EQ(plain.find("unnamed_hot+0x"), std::string::npos) << plain;

  // What pprof does with PPROF_BINARY_PATH: for a mapping without
  // has_functions, find the binary, turn each location's address into the
  // mapping's file offset, then the file's virtual address, and ask
  // addr2line. (`go tool pprof` cannot do this last step for C code: its
  // own object reader symbolizes Go binaries only; the standalone pprof runs
  // addr2line as here.)
  const std::string raw = Pprof("-raw " + report + "/profile.pb.gz");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      raw, m, std::regex(R"(\n1: 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) (\S+) *([^\n]*)\n)")))
      << raw;
  const uint64_t start = std::stoull(m[1], nullptr, 16), limit = std::stoull(m[2], nullptr, 16),
                 offset = std::stoull(m[3], nullptr, 16);
  EXPECT_EQ(m[4].str(), stripped);
  EXPECT_EQ(m[5].str().find("[FN]"), std::string::npos) << "has_functions set: " << m[0];
  // The file's loadable segments: (file offset, virtual address, size).
  std::vector<std::array<uint64_t, 3>> loads;
  const std::string headers = RunCommand("readelf -lW " + kProgram);
  const std::regex load(R"(LOAD +0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x([0-9a-f]+))");
  for (auto it = std::sregex_iterator(headers.begin(), headers.end(), load);
       it != std::sregex_iterator(); ++it) {
    loads.push_back({std::stoull((*it)[1], nullptr, 16), std::stoull((*it)[2], nullptr, 16),
                     std::stoull((*it)[3], nullptr, 16)});
  }
  ASSERT_FALSE(loads.empty()) << headers;
  int unnamed = 0, burn = 0;
  const std::regex location(R"(\n +\d+: 0x([0-9a-f]+) M=1 ([^\n]*))");
  for (auto it = std::sregex_iterator(raw.begin(), raw.end(), location);
       it != std::sregex_iterator(); ++it) {
    EXPECT_EQ((*it)[2].str(), "") << "a name reached pprof: " << (*it)[0];
    const uint64_t address = std::stoull((*it)[1], nullptr, 16);
    ASSERT_TRUE(address >= start && address < limit) << std::hex << address;
    const uint64_t file_offset = address - start + offset;
    for (const auto& [seg_offset, vaddr, size] : loads) {
      if (file_offset < seg_offset || file_offset >= seg_offset + size) continue;
      char hex[32];
      snprintf(hex, sizeof(hex), "0x%llx",
               static_cast<unsigned long long>(file_offset - seg_offset + vaddr));
      const std::string name = RunCommand("addr2line -f -C -e " + kProgram + " " + hex);
      burn += name.find("BurnUnnamed") != std::string::npos;
    }
    ++unnamed;
  }
  EXPECT_GE(unnamed, 2) << raw;
  EXPECT_GE(burn, 1) << raw;

  // And the real thing: pprof itself, given the unstripped binary in
  // PPROF_BINARY_PATH, finds it by its build-id and names the frame.
  std::string why;
  const std::string pprof = StandalonePprof(&why);
  ASSERT_FALSE(pprof.empty()) << why;
  RunCommand("mkdir -p " + dir_.File("symbols") + " && cp " + kProgram + " " + dir_.File("symbols/"));
  const std::string top = RunCommand("PPROF_BINARY_PATH=" + dir_.File("symbols") + " " + pprof +
                                         " -top -sample_index=samples " + report + "/profile.pb.gz 2>&1",
                                     &status);
  ASSERT_EQ(status, 0) << top;
  // The samples are under BurnUnnamed (cum 100% here; under TSan, whose
  // signals come late, one of 40 was elsewhere), named by pprof.
  std::smatch cum;
  ASSERT_TRUE(std::regex_search(top, cum, std::regex(R"(\n +\d+ +[\d.]+% +[\d.]+% +\d+ +([\d.]+)% +[^\n]*BurnUnnamed\n)")))
      << top;
  EXPECT_GE(std::stod(cum[1]), 90.0) << top;
  // Without the binary the frame stays an address, named by nobody.
  const std::string bare = RunCommand("PPROF_BINARY_PATH=" + dir_.File("none") + " " + pprof +
                                      " -top -sample_index=samples " + report + "/profile.pb.gz 2>&1");
  EXPECT_EQ(bare.find("BurnUnnamed"), std::string::npos) << bare;
}

TEST_F(PprofFidelity, FunctionsHaveTheirStartLineAndTheProfileItsWriter) {
  const std::string report = ProfileAndReport(dir_, kProgram);
  const std::string raw = Pprof("-raw " + report + "/profile.pb.gz");
  // -raw lists "ID: 0xADDR M=N Function /file:line s=START".
  const int def = SourceLine("__attribute__((noinline)) unsigned long BurnUnnamed(");
  ASSERT_GT(def, 0);
  EXPECT_TRUE(std::regex_search(
      raw, std::regex("BurnUnnamed [^\\n]*unnamed_hot\\.cc:\\d+ s=" + std::to_string(def) + "\\n")))
      << raw;
  const std::string comments = Pprof("-comments " + report + "/profile.pb.gz");
  EXPECT_NE(comments.find("dlprof " DLPROF_VERSION_STRING), std::string::npos) << comments;
  EXPECT_NE(comments.find("main process: " + kProgram + " (pid "), std::string::npos) << comments;
}

// Two lambdas called through std::function: GCC names both frames
// "std::_Function_handler<...{lambda()#N}>::_M_invoke(...)". pprof must see
// two functions, not one "_M_invoke".
TEST_F(PprofFidelity, LambdasStayDistinctFunctions) {
  Profile p;
  Process proc;
  proc.pid = 7;
  proc.hz = 100;
  p.processes.push_back(proc);
  auto add = [&](const std::string& name, uint64_t offset, int n) {
    Location loc;
    loc.module = "/opt/app/train";
    loc.module_offset = offset;
    loc.address = 0x555500000000 + offset;
    loc.frames.push_back(Frame{name, "/usr/include/c++/12/bits/std_function.h", 290});
    const uint32_t stack = p.InternStack({p.InternLocation(loc)});
    for (int i = 0; i < n; ++i) {
      Sample s;
      s.stack = stack;
      s.tid = 7;
      s.cpu_ns = 10000000;
      p.samples.push_back(s);
    }
  };
  add("std::_Function_handler<void (), main::{lambda()#1}>::_M_invoke(std::_Any_data const&)", 0x100, 3);
  add("std::_Function_handler<void (), main::{lambda()#2}>::_M_invoke(std::_Any_data const&)", 0x200, 5);
  add("(anonymous namespace)::Decode<int>(char const*, int)", 0x300, 2);
  WritePprof(p, dir_.File("l.pb.gz"));
  const std::string top = Pprof("-top -sample_index=samples " + dir_.File("l.pb.gz"));
  EXPECT_NE(top.find(" std::_Function_handler<void (), main::{lambda()#1}>::_M_invoke\n"),
            std::string::npos) << top;
  EXPECT_NE(top.find(" std::_Function_handler<void (), main::{lambda()#2}>::_M_invoke\n"),
            std::string::npos) << top;
  EXPECT_NE(top.find(" (anonymous namespace)::Decode\n"), std::string::npos) << top;
}

}  // namespace
}  // namespace dlprof
