// End-to-end tests of `dlprof report`/`run`/`convert`: real profiled
// processes, and the real go tool pprof and google-pprof reading the output.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/files.h"
#include "tests/support/folded.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::ReadFile;

using nlohmann::json;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::RunProcess;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";

bool HaveGo() { return access("/usr/bin/go", X_OK) == 0; }

// The line of `needle` in a source file, 1-based (0 if absent).
int LineOf(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(needle) != std::string::npos) return n;
  }
  return 0;
}

// One profiled run of rt_workload, reported; shared by the tests below.
class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("dlprof-report"));
    ProcessResult r = RunProcess({kDlprof, "run", "--hz", "1000", "-o", *dir_ + "/out", "-r",
                                  *dir_ + "/report", "--", ProgramPath("rt_workload"), "mix",
                                  "1000"});
    run_ok_ = new bool(r.exit_code == 0);
    run_log_ = new std::string(r.out + r.err);
  }
  void SetUp() override { ASSERT_TRUE(*run_ok_) << *run_log_; }
  static std::string Report(const std::string& file) { return *dir_ + "/report/" + file; }
  static std::string* dir_;
  static bool* run_ok_;
  static std::string* run_log_;
};
std::string* ReportTest::dir_;
bool* ReportTest::run_ok_;
std::string* ReportTest::run_log_;

TEST_F(ReportTest, WritesEveryOutput) {
  for (const char* f : {"summary.json", "summary.txt", "stacks.folded", "profile.pb.gz"}) {
    struct stat st;
    EXPECT_EQ(stat(Report(f).c_str(), &st), 0) << f;
    EXPECT_GT(st.st_size, 0) << f;
  }
}

TEST_F(ReportTest, FoldedStacksHaveStageRootsAndSymbols) {
  std::string folded = ReadFile(Report("stacks.folded"));
  // Stage as the root frame, then the real call chain down to the burner.
  EXPECT_NE(folded.find("[stage a];"), std::string::npos);
  EXPECT_TRUE(testing::HasFoldedChain(folded, "[stage b];", {"main;", "BurnInStageB;", "Burn"}))
      << folded.substr(0, 2000);
  // Every line ends with a positive count.
  std::istringstream lines(folded);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ASSERT_TRUE(testing::IsFoldedLine(line)) << line.substr(0, 300);
    ++n;
  }
  EXPECT_GT(n, 3);
}

TEST_F(ReportTest, SummaryJsonCarriesTheContractKeys) {
  json j = json::parse(ReadFile(Report("summary.json")));
  for (const char* k : {"input_bound", "data_wait_fraction", "severity", "bottleneck_stage",
                        "bottleneck_kind", "bottleneck_role", "advice"}) {
    EXPECT_TRUE(j["verdict"].contains(k)) << k;
  }
  for (const char* k : {"name", "self_samples", "self_cpu_s", "self_wall_s", "offcpu_fraction",
                        "total_wall_s"}) {
    EXPECT_TRUE(j["stages"][0].contains(k)) << k;
  }
  EXPECT_EQ(j["processes"].size(), 1u);
  EXPECT_EQ(j["processes"][0]["role"], "main");
  // The measured split: a/b/c took 10/30/60% of their CPU.
  double a = 0, b = 0, c = 0, nap_off = -1;
  for (const auto& s : j["stages"]) {
    if (s["name"] == "a") a = s["self_samples"];
    if (s["name"] == "b") b = s["self_samples"];
    if (s["name"] == "c") c = s["self_samples"];
    if (s["name"] == "nap") nap_off = s["offcpu_fraction"];
  }
  ASSERT_GT(a + b + c, 500);
  EXPECT_NEAR(a / (a + b + c), 0.10, 0.03);
  EXPECT_NEAR(b / (a + b + c), 0.30, 0.03);
  EXPECT_NEAR(c / (a + b + c), 0.60, 0.03);
  EXPECT_GT(nap_off, 0.9);
}

TEST_F(ReportTest, SummaryTextMatchesGoldenShape) {
  // Golden output with placeholders: digits become '#', runs of spaces one space.
  auto shape = [](std::string s) {
    s = std::regex_replace(s, std::regex("[0-9]+"), "#");
    s = std::regex_replace(s, std::regex(" +"), " ");
    return s;
  };
  std::string text = shape(ReadFile(Report("summary.txt")));
  std::string golden = ReadFile(std::string(DLPROF_SOURCE_DIR) + "/tests/golden/summary_mix.txt");
  ASSERT_FALSE(golden.empty());
  // Each golden line must appear, in order (process-specific lines vary).
  size_t pos = 0;
  std::istringstream g(golden);
  std::string line;
  while (std::getline(g, line)) {
    size_t found = text.find(line, pos);
    ASSERT_NE(found, std::string::npos) << "missing: " << line << "\nin:\n" << text;
    pos = found + line.size();
  }
}

TEST_F(ReportTest, GoToolPprofReadsLabelsAndLines) {
  if (!HaveGo()) GTEST_SKIP() << "go is not installed";
  const std::string pb = Report("profile.pb.gz");
  ProcessResult top = RunProcess({"/usr/bin/go", "tool", "pprof", "-top", pb});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("Burn"), std::string::npos) << top.out;

  ProcessResult tags = RunProcess({"/usr/bin/go", "tool", "pprof", "-tags", pb});
  ASSERT_EQ(tags.exit_code, 0) << tags.err;
  for (const char* t : {"stage:", " a\n", " b\n", " c\n", "role:", "main", "cpu:", "tid:", "pid:"}) {
    EXPECT_NE(tags.out.find(t), std::string::npos) << t << "\n" << tags.out;
  }

  // -tagfocus selects exactly stage c: about 60% of a+b+c's CPU.
  auto focused_ms = [&](const std::string& focus) {
    ProcessResult r = RunProcess({"/usr/bin/go", "tool", "pprof", "-top", "-nodefraction=0",
                                  "-tagfocus=" + focus, pb});
    std::smatch m;
    std::regex shown(R"(Showing nodes accounting for ([0-9.]+)(ms|s))");
    if (!std::regex_search(r.out, m, shown)) return -1.0;
    return std::stod(m[1]) * (m[2] == "s" ? 1000 : 1);
  };
  double c = focused_ms("stage=^c$");
  double abc = focused_ms("stage=^(a|b|c)$");
  ASSERT_GT(abc, 0);
  EXPECT_NEAR(c / abc, 0.6, 0.05);

  // -tagroot=stage: the stage becomes the root frame of each trace.
  ProcessResult root = RunProcess({"/usr/bin/go", "tool", "pprof", "-traces", "-tagroot=stage", pb});
  ASSERT_EQ(root.exit_code, 0) << root.err;
  bool rooted = false;
  std::string block;
  std::istringstream traces(root.out);
  for (std::string line; std::getline(traces, line);) {
    if (line.rfind("-----------+", 0) == 0) {
      block.clear();
      continue;
    }
    block += line + "\n";
    std::string trimmed = std::regex_replace(line, std::regex(R"(^\s+|\s+$)"), "");
    if (trimmed == "c" && block.find("BurnInStageC") != std::string::npos) rooted = true;
  }
  EXPECT_TRUE(rooted) << root.out.substr(0, 1500);

  // Source lines: the burner's loop line, from DWARF, without the binary.
  int line = LineOf(std::string(DLPROF_SOURCE_DIR) + "/tests/programs/rt_workload.cc",
                    "x = x * 6364136223846793005ULL");
  ASSERT_GT(line, 0);
  ProcessResult lines = RunProcess({"/usr/bin/go", "tool", "pprof", "-top", "-lines", pb});
  EXPECT_NE(lines.out.find("rt_workload.cc:" + std::to_string(line)), std::string::npos)
      << lines.out.substr(0, 2000);
}

TEST_F(ReportTest, GoToolPprofMergesTwoRuns) {
  if (!HaveGo()) GTEST_SKIP() << "go is not installed";
  const std::string pb = Report("profile.pb.gz");
  ProcessResult two = RunProcess({"/usr/bin/go", "tool", "pprof", "-top", pb, pb});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.out.find("Burn"), std::string::npos);
}

TEST(ReportCommand, SeveralRunsMergeWithAHostLabel) {
  std::string dir = MakeTempDir("dlprof-hosts");
  for (const char* run : {"r1", "r2"}) {
    ProcessResult r = RunProcess({kDlprof, "run", "--no-report", "-o", dir + "/" + run, "--",
                                  ProgramPath("rt_workload"), "steps", "4"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  ProcessResult r = RunProcess({kDlprof, "report", dir + "/r1", dir + "/r2", "-o", dir + "/rep"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(ReadFile(dir + "/rep/summary.json"));
  ASSERT_EQ(j["processes"].size(), 2u);
  EXPECT_TRUE(j["processes"][0].contains("host"));
  EXPECT_NE(j["processes"][0]["host"], j["processes"][1]["host"]);
  if (HaveGo()) {
    ProcessResult tags = RunProcess({"/usr/bin/go", "tool", "pprof", "-tags", dir + "/rep/profile.pb.gz"});
    EXPECT_NE(tags.out.find("host:"), std::string::npos) << tags.out;
  }
}

// `dlprof run` of a parent and two fork workers into `out`, not reported.
void RecordForkRun(const std::string& out) {
  ProcessResult r = RunProcess({kDlprof, "run", "--no-report", "-o", out, "--",
                                ProgramPath("rt_workload"), "fork", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// `dlprof report DLPROF_OUT/*` names each run folder and the `latest` link
// to the last one: that run is read once, and is not two hosts.
TEST(ReportCommand, ARunReachedTwiceIsReadOnce) {
  std::string dir = MakeTempDir("dlprof-twice");
  ASSERT_NO_FATAL_FAILURE(RecordForkRun(dir + "/out"));
  ProcessResult ls = RunProcess({"/bin/sh", "-c", "ls -d " + dir + "/out/*/"});
  std::vector<std::string> inputs;
  std::istringstream lines(ls.out);
  for (std::string line; std::getline(lines, line);) inputs.push_back(line);
  ASSERT_EQ(inputs.size(), 2u) << ls.out;  // the run folder and `latest`
  std::vector<std::string> argv = {kDlprof, "report"};
  argv.insert(argv.end(), inputs.begin(), inputs.end());
  argv.insert(argv.end(), {"-o", dir + "/rep"});
  ProcessResult rep = RunProcess(argv);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_NE(rep.err.find("read once"), std::string::npos) << rep.err;
  json j = json::parse(ReadFile(dir + "/rep/summary.json"));
  EXPECT_EQ(j["processes"].size(), 3u);
  EXPECT_FALSE(j["processes"][0].contains("host"));
}

TEST(ReportCommand, CorruptInputGivesAClearMessageAndAPartialReport) {
  std::string dir = MakeTempDir("dlprof-corrupt");
  ASSERT_NO_FATAL_FAILURE(RecordForkRun(dir + "/out"));
  // Cut one worker's file in half.
  ProcessResult ls = RunProcess({"/bin/sh", "-c", "ls " + dir + "/out/latest/worker-*.dlprof | head -1"});
  std::string victim = ls.out.substr(0, ls.out.find('\n'));
  ASSERT_FALSE(victim.empty());
  // Inside a chunk: a cut on a chunk's first byte leaves whole chunks only
  // (a file the reader takes as killed, with no offset to name), and the
  // next byte is then inside it.
  const std::string bytes = ReadFile(victim);
  size_t cut = bytes.size() / 2;
  if (bytes.compare(cut, 4, "CHNK") == 0) ++cut;
  ASSERT_EQ(truncate(victim.c_str(), static_cast<off_t>(cut)), 0);
  ProcessResult rep = RunProcess({kDlprof, "report", dir + "/out", "-o", dir + "/rep"});
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_TRUE(std::regex_search(rep.err, std::regex("worker-[0-9]+\\.dlprof: offset [0-9]+: ")))
      << rep.err;
  json j = json::parse(ReadFile(dir + "/rep/summary.json"));
  EXPECT_EQ(j["processes"].size(), 3u);

  // Not a profile at all: one line naming the file and offset, exit 1.
  std::string junk = dir + "/junk.bin";
  std::ofstream(junk) << "hello, not a profile";
  ProcessResult bad = RunProcess({kDlprof, "report", junk, "-o", dir + "/rep2"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find(junk + ": offset 0: not a dlprof run"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

TEST(ReportCommand, UsageErrorsExitTwoWithOneLine) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"frobnicate"}, {"report"}, {"run", "--hz", "0", "--", "true"},
                                             {"convert", "a", "b"}, {"report", "--bogus", "x"}}) {
    std::vector<std::string> argv = {kDlprof};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult r = RunProcess(argv);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  for (const char* cmd : {"run", "report", "convert", "backends"}) {
    ProcessResult r = RunProcess({kDlprof, cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_FALSE(r.out.empty()) << cmd;
  }
}

TEST(ReportCommand, RunReturnsTheProgramsStatus) {
  std::string dir = MakeTempDir("dlprof-status");
  // fault_workload exits with status 7 on purpose. A program of this build,
  // not /bin/sh: in the sanitizer builds libdlprof.so is sanitized, and a
  // sanitizer runtime only works in a program built with it (it must come
  // before libc).
  ProcessResult r = RunProcess(
      {kDlprof, "run", "--no-report", "-o", dir, "--", ProgramPath("fault_workload"), "steady", "1", "1"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  ProcessResult missing = RunProcess({kDlprof, "run", "-o", dir, "--", "/nonexistent/prog"});
  EXPECT_EQ(missing.exit_code, 127);
}

TEST(ReportCommand, BackendsListsUnwindersAndTimers) {
  ProcessResult r = RunProcess({kDlprof, "backends"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"cfi", "libunwind", "gperftools", "fp", "perf", "posix", "itimer"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
}

TEST(ReportCommand, ConvertGperftoolsProfileAgreesWithGooglePprof) {
  if (access("/usr/bin/google-pprof", X_OK) != 0) GTEST_SKIP() << "google-pprof missing";
  std::string dir = MakeTempDir("dlprof-convert");
  std::string prof = dir + "/cpu.prof";
  ProcessResult run = RunProcess({ProgramPath("rt_workload"), "mix", "800"},
                                 {{"LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libprofiler.so.0"},
                                  {"CPUPROFILE", prof}, {"CPUPROFILE_FREQUENCY", "250"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ProcessResult conv = RunProcess({kDlprof, "convert", prof, "-o", dir + "/cpu.pb.gz"});
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  ProcessResult theirs = RunProcess({"/usr/bin/google-pprof", "--text", ProgramPath("rt_workload"), prof});
  ASSERT_EQ(theirs.exit_code, 0) << theirs.err;
  // google-pprof's top function by flat samples must be ours too.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(theirs.out, m, std::regex(R"(\n\s*\d+\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(\S+))")))
      << theirs.out;
  std::string top = m[1];
  if (HaveGo()) {
    ProcessResult ours = RunProcess({"/usr/bin/go", "tool", "pprof", "-top", dir + "/cpu.pb.gz"});
    ASSERT_EQ(ours.exit_code, 0) << ours.err;
    std::smatch o;
    ASSERT_TRUE(std::regex_search(ours.out, o, std::regex(R"(flat%[^\n]*\n\s*\S+\s+\S+%\s+\S+%\s+\S+\s+\S+%\s+(\S+))")))
        << ours.out;
    EXPECT_NE(top.find(o[1].str().substr(0, o[1].str().find('('))), std::string::npos)
        << "google-pprof: " << top << " dlprof: " << o[1];
  }
}

}  // namespace
}  // namespace dlprof
