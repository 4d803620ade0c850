// What `dlprof report` and `convert` write, and print, in hostile places: an
// output folder whose file names are symbolic links to someone's files, and
// file names full of terminal controls (ESC, OSC, BEL, C1 CSI, RLO).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/utf8.h"
#include "tests/support/files.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::ProcessResult;
using testing::ProgramPath;
using testing::ReadFile;
using testing::RunCommand;
using testing::RunProcess;
using testing::TempDir;
using testing::WriteFile;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";
const std::vector<std::string> kOutputs = {"summary.json",  "summary.txt",   "stacks.folded",
                                           "stacks.offcpu.folded", "profile.pb.gz",
                                           "profile.wall.pb.gz", "trace.json",
                                           "trace.json.gz", "report.html"};

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.insert(e->d_name);
    }
    closedir(d);
  }
  return names;
}

bool IsRegular(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

// No byte of a terminal control or ill-formed UTF-8.
bool TerminalClean(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t bad = 0;
    const size_t n = Utf8At(s, i, &cp, &bad);
    if (n == 0 || (IsTerminalControl(cp) && cp != '\n')) return false;
    i += n;
  }
  return true;
}

class ReportOutputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    source_ = new TempDir;
    ProcessResult r = RunProcess({kDlprof, "run", "--no-report", "-o", source_->File("out"), "--",
                                  ProgramPath("rt_workload"), "steps", "4"});
    run_ok_ = r.exit_code == 0;
    run_log_ = new std::string(r.err);
  }
  static void TearDownTestSuite() {
    delete source_;
    delete run_log_;
  }
  void SetUp() override { ASSERT_TRUE(run_ok_) << *run_log_; }
  static std::string Run() { return source_->File("out"); }

  static TempDir* source_;
  static bool run_ok_;
  static std::string* run_log_;
  TempDir dir_;
};
TempDir* ReportOutputs::source_;
bool ReportOutputs::run_ok_;
std::string* ReportOutputs::run_log_;

TEST_F(ReportOutputs, LinksInTheOutputFolderAreReplacedNotWrittenThrough) {
  const std::string out = dir_.File("report"), victims = dir_.File("victims");
  ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(victims.c_str(), 0755), 0);
  for (size_t i = 0; i < kOutputs.size(); ++i) {
    const std::string target = victims + "/" + kOutputs[i];
    if (i > 0) WriteFile(target, "precious " + kOutputs[i]);  // the first dangles
    ASSERT_EQ(symlink(target.c_str(), (out + "/" + kOutputs[i]).c_str()), 0);
  }
  ProcessResult r = RunProcess({kDlprof, "report", Run(), "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (size_t i = 0; i < kOutputs.size(); ++i) {
    EXPECT_TRUE(IsRegular(out + "/" + kOutputs[i])) << kOutputs[i];
    if (i > 0) {
      EXPECT_EQ(ReadFile(victims + "/" + kOutputs[i]), "precious " + kOutputs[i]);
    }
  }
  EXPECT_EQ(Entries(victims).size(), kOutputs.size() - 1) << "a dangling link's target was created";
  // Nothing but the outputs is left behind (no temporary file).
  EXPECT_EQ(Entries(out), std::set<std::string>(kOutputs.begin(), kOutputs.end()));
  EXPECT_FALSE(nlohmann::json::parse(ReadFile(out + "/summary.json"))["processes"].empty());

  // convert's -o too.
  const std::string pb = dir_.File("cpu.pb.gz"), victim = victims + "/convert";
  WriteFile(victim, "precious");
  ASSERT_EQ(symlink(victim.c_str(), pb.c_str()), 0);
  std::string file;  // the run's profile (a collector process leaves its lock file beside it)
  for (const std::string& name : Entries(Run() + "/latest")) {
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".dlprof") == 0) file = name;
  }
  ASSERT_FALSE(file.empty());
  ProcessResult conv = RunProcess({kDlprof, "convert", Run() + "/latest/" + file, "-o", pb});
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  EXPECT_TRUE(IsRegular(pb));
  EXPECT_EQ(ReadFile(victim), "precious");
}

TEST_F(ReportOutputs, NamesOnTheTerminalAreEscaped) {
  // A run folder and a file in it whose names retitle the terminal (OSC),
  // recolour it (CSI, and C1 CSI), ring its bell and reverse the line (RLO).
  const std::string hostile = "\x1b]0;owned\x07\xe2\x80\xae\xc2\x9b" "2J";
  const std::string run = dir_.File("run" + hostile);
  int status = 0;
  RunCommand("cp -r '" + Run() + "/latest/.' '" + run + "'", &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(mkfifo((run + "/worker-9\x1b[31m.dlprof").c_str(), 0600), 0);
  const std::string out = dir_.File("report" + hostile);
  ProcessResult r = RunProcess({kDlprof, "report", run, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(TerminalClean(r.err)) << r.err;
  EXPECT_TRUE(TerminalClean(r.out)) << r.out;
  const std::string shown = "run\\x1b]0;owned\\x07\\xe2\\x80\\xae\\xc2\\x9b2J/worker-9\\x1b[31m.dlprof";
  EXPECT_NE(r.err.find(shown + ": not a regular file (a FIFO)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("report\\x1b]0;owned"), std::string::npos) << r.out;
  // An error line too.
  ProcessResult missing = RunProcess({kDlprof, "report", dir_.File("gone" + hostile), "-o", out});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(TerminalClean(missing.err)) << missing.err;
  EXPECT_NE(missing.err.find("gone\\x1b]0;owned"), std::string::npos) << missing.err;
}

TEST(TerminalSafe, KeepsTextAndEscapesEveryControlByte) {
  EXPECT_EQ(TerminalSafe("plain /path/to-file_1.dlprof"), "plain /path/to-file_1.dlprof");
  EXPECT_EQ(TerminalSafe("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(TerminalSafe("a\x1b[2Jb\rc\x7f"), "a\\x1b[2Jb\\x0dc\\x7f");
  EXPECT_EQ(TerminalSafe("\xc2\x9b" "31m \xe2\x80\xae \xe2\x81\xa6 \xe2\x80\xa8"),
            "\\xc2\\x9b31m \\xe2\\x80\\xae \\xe2\\x81\\xa6 \\xe2\\x80\\xa8");
  EXPECT_EQ(TerminalSafe("bad \xff\xc3 end"), "bad \\xff\\xc3 end");
  EXPECT_EQ(TerminalSafe("0123456789", 4), "0123...");
  // Whatever the bytes, the result shows no control and is valid UTF-8.
  std::mt19937 rng(15);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 24, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    const std::string t = TerminalSafe(s);
    ASSERT_TRUE(TerminalClean(t) && t.find('\n') == std::string::npos) << ::testing::PrintToString(s);
  }
}

}  // namespace
}  // namespace dlprof
