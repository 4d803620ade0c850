// The dlprof command follows the conventions people expect of a CLI:
// --version, every environment variable in --help, no internal options in a
// command's help, and `convert -o -` writing the profile to stdout.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <set>
#include <string>

#include <dlprof/version.h>

#include "core/config.h"
#include "readers/pprof_reader.h"
#include "readers/profile.h"
#include "reports/pprof_writer.h"
#include "tests/support/files.h"

namespace dlprof {
namespace {

using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";

std::string Dlprof(const std::string& args, int* exit_code) {
  int status = 0;
  std::string out = RunCommand(kDlprof + " " + args, &status);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(CommandConventions, VersionIsTheProjectVersion) {
  int code = 0;
  EXPECT_EQ(Dlprof("--version", &code), std::string("dlprof ") + DLPROF_VERSION_STRING + "\n");
  EXPECT_EQ(code, 0);
}

TEST(CommandConventions, HelpListsEveryVariableTheRuntimeReads) {
  // The variables ParseConfig asks for, as it asks: a new one fails this test
  // until --help names it.
  std::set<std::string> asked;
  ParseConfig(
      [&](const char* name) {
        asked.insert(name);
        return nullptr;
      },
      [](const std::string&) {});
  ASSERT_GE(asked.size(), 8u);
  asked.insert("DLPROF_RUN_ID");  // read by core/run_folder.cc
  asked.insert("DLPROF_LIB");     // read by `dlprof run`
  asked.insert("DLPROF_RUN_MAIN_PID");         // set by `dlprof run` and core/run_folder.cc
  asked.insert("_DLPROF_PYTHONPATH_BEFORE");  // set by core/python_bootstrap.cc
  int code = 0;
  const std::string help = Dlprof("--help", &code);
  EXPECT_EQ(code, 0);
  for (const std::string& var : asked) {
    EXPECT_NE(help.find("  " + var + "="), std::string::npos) << var << " is not in --help:\n" << help;
  }
}

TEST(CommandConventions, CommandHelpShowsNoInternalOption) {
  for (const char* cmd : {"report", "convert", "run"}) {
    int code = 0;
    const std::string help = Dlprof(std::string(cmd) + " --help", &code);
    EXPECT_EQ(code, 0) << cmd;
    EXPECT_NE(help.find("--output"), std::string::npos) << cmd << ":\n" << help;
    EXPECT_EQ(help.find("--input"), std::string::npos) << cmd << ":\n" << help;
  }
}

Profile SmallProfile() {
  Profile p;
  Process proc;
  proc.pid = 42;
  proc.hz = 100;
  p.processes.push_back(proc);
  Location loc;
  loc.module = "/opt/app/train";
  loc.module_offset = 0x1234;
  loc.address = 0x555500001234;
  loc.frames.push_back(Frame{"Decode(char const*)", "/src/decode.cc", 12});
  const uint32_t stack = p.InternStack({p.InternLocation(loc)});
  for (int i = 0; i < 7; ++i) {
    Sample s;
    s.stack = stack;
    s.tid = 42;
    s.cpu_ns = 10000000;
    p.samples.push_back(s);
  }
  return p;
}

TEST(CommandConventions, ConvertToDashWritesTheProfileToStdout) {
  TempDir dir;
  WritePprof(SmallProfile(), dir.File("in.pb.gz"));
  int code = 0;
  Dlprof("convert " + dir.File("in.pb.gz") + " -o " + dir.File("file.pb.gz"), &code);
  ASSERT_EQ(code, 0);
  // stdout alone is the profile: the note goes to stderr.
  const std::string out = RunCommand("(" + kDlprof + " convert " + dir.File("in.pb.gz") +
                                     " -o - 2>" + dir.File("err") + " >" +
                                     dir.File("stdout.pb.gz") + ")");
  EXPECT_EQ(out, "");
  EXPECT_NE(ReadFile(dir.File("err")).find("samples to stdout"), std::string::npos)
      << ReadFile(dir.File("err"));
  const std::string a = RunCommand("gzip -dc " + dir.File("file.pb.gz"));
  const std::string b = RunCommand("gzip -dc " + dir.File("stdout.pb.gz"));
  EXPECT_GT(a.size(), 100u);
  EXPECT_EQ(a, b);
}

// --wall writes the wall-clock ticks, and only them; without it, the CPU
// samples only.
TEST(CommandConventions, ConvertWallWritesTheWallClockTicks) {
  TempDir dir;
  Profile in = SmallProfile();
  for (int i = 0; i < 3; ++i) {
    Sample s = in.samples[0];
    s.kind = SampleKind::kWall;
    s.on_cpu = false;
    s.count = 0;
    s.cpu_ns = 1000000;
    s.wall_ns = 10000000;
    s.wait_ns = 2000000;
    in.samples.push_back(s);
  }
  WritePprof(in, dir.File("in.pb.gz"));
  WritePprof(in, dir.File("in.wall.pb.gz"), PprofView::kWall);
  for (const bool wall : {false, true}) {
    int code = 0;
    const std::string out = Dlprof("convert " + dir.File(wall ? "in.wall.pb.gz" : "in.pb.gz") +
                                       (wall ? " --wall" : "") + " -o " + dir.File("out.pb.gz"),
                                   &code);
    ASSERT_EQ(code, 0) << out;
    EXPECT_NE(out.find(wall ? "(3 wall-clock ticks)" : "(7 samples)"), std::string::npos) << out;
    Profile back;
    ReadPprof(dir.File("out.pb.gz"), &back);
    int64_t ticks = 0, cpu_samples = 0, wall_ns = 0, cpu_ns = 0, wait_ns = 0;
    for (const Sample& s : back.samples) {
      (s.kind == SampleKind::kWall ? ticks : cpu_samples) += s.count;
      if (s.kind == SampleKind::kWall) {
        wall_ns += s.wall_ns;
        cpu_ns += s.cpu_ns;
        wait_ns += s.wait_ns;
      }
    }
    EXPECT_EQ(cpu_samples, wall ? 0 : 7);
    EXPECT_EQ(ticks, wall ? 3 : 0);
    EXPECT_EQ(wall_ns, wall ? 30000000 : 0);
    EXPECT_EQ(cpu_ns, wall ? 3000000 : 0);
    EXPECT_EQ(wait_ns, wall ? 6000000 : 0);
  }
}

TEST(CommandConventions, ConvertRefusesToWriteGzipToATerminal) {
  TempDir dir;
  WritePprof(SmallProfile(), dir.File("in.pb.gz"));
  // script(1) gives the command a terminal for stdout.
  if (RunCommand("command -v script").empty()) GTEST_SKIP() << "no script(1)";
  const std::string out = RunCommand("script -qec '" + kDlprof + " convert " + dir.File("in.pb.gz") +
                                     " -o -' /dev/null");
  EXPECT_NE(out.find("will not write gzip to a terminal"), std::string::npos) << out;
}

}  // namespace
}  // namespace dlprof
