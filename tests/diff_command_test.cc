// `dlprof diff` end to end, and `dlprof report` over two runs: the example
// pipeline's io-bound scenario runs twice, with 1 worker and with 4 (its
// readers sleep on throttled storage, so more workers read more at once and
// the loop waits less, however few cores the machine has). The diff must
// show that direction, its page must load in headless Chromium, and a report
// merging the two runs must say that it did.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <string>
#include <vector>

#include "tests/support/browser.h"
#include "tests/support/files.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using nlohmann::json;
using testing::BrowserResult;
using testing::ChromiumPath;
using testing::LoadPage;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ReadFile;
using testing::RunProcess;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";
const std::string kExample =
    std::string(DLPROF_BUILD_DIR) + "/examples/pipeline/dlprof_example_pipeline";

int Lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class DiffCommand : public ::testing::Test {
 protected:
  // Two runs, each in its own DLPROF_OUT: ~3 s with one worker, ~1 s with 4.
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("dlprof-diff"));
    ProcessResult r = RunProcess(
        {kExample, "--generate-only", "--images", "256", "--data-dir", *dir_ + "/data"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* workers : {"1", "4"}) {
      const std::string out = *dir_ + "/out" + workers;
      r = RunProcess({kDlprof, "run", "--no-report", "-o", out, "--", kExample, "--scenario",
                      "io-bound", "--workers", workers, "--steps", "20", "--images", "256",
                      "--data-dir", *dir_ + "/data"},
                     {}, 120);
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Run1() { return *dir_ + "/out1"; }  // DLPROF_OUT: its newest run
  static std::string Run4() { return *dir_ + "/out4"; }
  static std::string* dir_;
};
std::string* DiffCommand::dir_;

TEST_F(DiffCommand, MoreWorkersShowLessDataWait) {
  ASSERT_NE(dir_, nullptr);
  const std::string out = MakeTempDir("dlprof-diff-out");
  ProcessResult r = RunProcess({kDlprof, "diff", Run1(), Run4(), "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The table on stdout is diff.txt.
  EXPECT_EQ(r.out, ReadFile(out + "/diff.txt"));
  EXPECT_NE(r.out.find("data-wait share"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("dlprof: diff written to " + out), std::string::npos) << r.err;

  const json d = json::parse(ReadFile(out + "/diff.json"));
  SCOPED_TRACE(d.dump(2));
  // Each side is its own run.
  ASSERT_EQ(d["before"]["run_ids"].size(), 1u);
  ASSERT_EQ(d["after"]["run_ids"].size(), 1u);
  EXPECT_NE(d["before"]["run_ids"][0], d["after"]["run_ids"][0]);
  EXPECT_EQ(d["workers"]["concurrent"]["before"], 1);
  EXPECT_EQ(d["workers"]["concurrent"]["after"], 4);
  EXPECT_EQ(d["workers"]["concurrent"]["change"], 3);
  // The known effect: the loop waits less, and steps take less time.
  const json& wait = d["steps"]["data_wait_fraction"];
  EXPECT_LT(wait["change"].get<double>(), -0.1);
  EXPECT_LT(wait["after"].get<double>(), wait["before"].get<double>());
  EXPECT_LT(d["steps"]["median_s"]["change"].get<double>(), 0);
  EXPECT_LT(d["steps"]["median_s"]["relative"].get<double>(), 0);
  // Both runs' throttled reads are the bottleneck stage, in the workers.
  EXPECT_EQ(d["before"]["verdict"]["bottleneck_stage"], "read");
  bool read_in_both = false;
  for (const json& s : d["stages"]) {
    if (s["name"] == "read") {
      read_in_both = s["status"] == "both" && s["role_before"] == "worker" &&
                     s["role_after"] == "worker" && s["offcpu_fraction"]["before"].is_number();
    }
  }
  EXPECT_TRUE(read_in_both);
  // The training loop's prefetch buffer is matched by name, and fuller.
  bool prefetch = false;
  for (const json& b : d["buffers"]) {
    if (b["name"] == "prefetch") {
      prefetch = b["status"] == "both";
      EXPECT_GE(b["mean_occupancy"]["change"].get<double>(), 0) << b.dump();
    }
  }
  EXPECT_TRUE(prefetch);
}

TEST_F(DiffCommand, PageLoadsInChromiumWithoutErrors) {
  ASSERT_NE(dir_, nullptr);
  if (ChromiumPath().empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/setup.sh installs it)";
  const std::string out = MakeTempDir("dlprof-diff-page");
  ProcessResult r = RunProcess({kDlprof, "diff", Run1(), Run4(), "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = ReadFile(out + "/diff.html");
  EXPECT_NE(page.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_FALSE(std::regex_search(
      page, std::regex(R"((src|href)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase)));
  BrowserResult b = LoadPage("file://" + out + "/diff.html");
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_EQ(b.exit_code, 0) << b.log;
  std::string console;
  for (const std::string& line : b.console) console += line + "\n";
  EXPECT_TRUE(b.console.empty()) << console;
  // The page's state is on its <html> element (the script's own text names it too).
  const size_t html_at = b.dom.find("<html");
  ASSERT_NE(html_at, std::string::npos) << b.dom.substr(0, 2000);
  const std::string html_tag = b.dom.substr(html_at, b.dom.find('>', html_at) - html_at);
  EXPECT_NE(html_tag.find("data-dlprof-ready=\"1\""), std::string::npos) << html_tag;
  EXPECT_EQ(html_tag.find("data-dlprof-error"), std::string::npos) << html_tag;
  // Drawn from the data: the verdicts, the stage table, the workers' count.
  EXPECT_NE(b.dom.find("bottleneck 'read' (io, worker)"), std::string::npos) << b.dom;
  EXPECT_NE(b.dom.find("<td class=\"name\">read</td>"), std::string::npos) << b.dom;
  EXPECT_NE(b.dom.find("Workers at a time"), std::string::npos);
  // A screenshot for people to look at (a load with a screenshot dumps no DOM).
  const std::string png = std::string(DLPROF_BUILD_DIR) + "/test-artifacts/diff.png";
  RunProcess({"/bin/mkdir", "-p", std::string(DLPROF_BUILD_DIR) + "/test-artifacts"});
  b = LoadPage("file://" + out + "/diff.html", 1280, 1600, png);
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_TRUE(b.console.empty()) << b.log;
  EXPECT_EQ(testing::PngSize(png), std::make_pair(1280, 1600)) << b.log;
}

TEST_F(DiffCommand, ReportOfTwoRunsSaysItMergedThem) {
  ASSERT_NE(dir_, nullptr);
  const std::string out = MakeTempDir("dlprof-diff-merged");
  ProcessResult r = RunProcess({kDlprof, "report", Run1(), Run4(), "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex note(
      "dlprof: warning: merged 2 runs \\(([^,]+), ([^)]+)\\) into one report; steps come from the "
      "training process of ([^ ]+) \\(pid [0-9]+\\)\\. To compare runs, use `dlprof diff "
      "BEFORE AFTER`\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, note)) << r.err;
  EXPECT_NE(m[1], m[2]);
  EXPECT_TRUE(m[3] == m[1] || m[3] == m[2]) << r.err;
  // Once, and recorded where the report's warnings are.
  EXPECT_EQ(r.err.find("merged 2 runs", r.err.find("merged 2 runs") + 1), std::string::npos);
  const json s = json::parse(ReadFile(out + "/summary.json"));
  ASSERT_FALSE(s["warnings"].empty());
  EXPECT_EQ(s["warnings"][0].get<std::string>().rfind("merged 2 runs (", 0), 0u) << s["warnings"];

  // One run is not a merge.
  r = RunProcess({kDlprof, "report", Run1(), "-o", out + "/one"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("merged"), std::string::npos) << r.err;
}

TEST(DiffCommandInput, MissingFolderIsOneLineAndExitOne) {
  const std::string empty = MakeTempDir("dlprof-diff-empty");
  ProcessResult r = RunProcess({kDlprof, "diff", empty + "/missing", empty, "-o", empty + "/o"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "dlprof: before: " + empty + "/missing: no such file or folder\n");
  EXPECT_EQ(r.out, "");
}

TEST(DiffCommandInput, FolderWithoutProfilesIsOneLineAndExitOne) {
  const std::string empty = MakeTempDir("dlprof-diff-empty");
  ProcessResult r = RunProcess({kDlprof, "diff", empty, empty, "-o", empty + "/o"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("dlprof: before: " + empty + ": no .dlprof files", 0), 0u) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(DiffCommandInput, OneRunIsAUsageError) {
  ProcessResult r = RunProcess({kDlprof, "diff", "/tmp"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "dlprof: diff: give two runs, BEFORE and AFTER\n");
  r = RunProcess({kDlprof, "diff", "a", "b", "c"});
  EXPECT_EQ(r.exit_code, 2);
  r = RunProcess({kDlprof, "diff", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("dlprof diff BEFORE AFTER"), std::string::npos);
  EXPECT_EQ(r.out.find("--input"), std::string::npos) << r.out;  // internal
}

}  // namespace
}  // namespace dlprof
