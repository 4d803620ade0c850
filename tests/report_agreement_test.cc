// Every figure the report gives in more than one place is the same figure
// (issue 14, item 5), in real profiled runs of the example pipeline: a
// decode-bound run (two workers busy on 2 cores beside the loop: samples
// after periods in the kernel, waits for a core) and an io-bound one
// (readers asleep, short stages between their waits, buffers mostly empty).
// The checks are tests/support/report_agreement.h's; the torch runs of
// tests/torch_pipeline_test.cc get the same. Before, the flame graph and
// stacks.folded counted a sample's periods (820) where the cost section and
// the processes counted its records (652), and a stage's row took its CPU
// from the samples and its wall from the ticks ("self CPU 160 ms, self wall
// 73 ms").
#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/files.h"
#include "tests/support/report_agreement.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::ExpectBuffersAreTheirSnapshots;
using testing::ExpectOneSampleCount;
using testing::ExpectProcessesAgree;
using testing::ExpectStageRowsAddUp;
using testing::ExpectStageSamplesArePprofs;
using testing::ExpectTimelineGivesTheSteps;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ReportFolder;
using testing::RunProcess;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";
const std::string kPipeline =
    std::string(DLPROF_BUILD_DIR) + "/examples/pipeline/dlprof_example_pipeline";
const std::string kRunScript = std::string(DLPROF_SOURCE_DIR) + "/tests/fixtures/agreement_run.sh";

struct AgreementRun {
  bool ok = false;
  std::string log;
  ReportFolder report;
};

// The profiled run of `scenario`: under ctest, the one its fixture made for
// every test here (DLPROF_AGREEMENT_RUNS, tests/CMakeLists.txt); run alone,
// this process makes its own with the same script.
const AgreementRun& RunOf(const std::string& scenario) {
  static std::map<std::string, AgreementRun> runs;
  auto [it, added] = runs.emplace(scenario, AgreementRun());
  if (!added) return it->second;
  AgreementRun& run = it->second;
  std::string dir;
  if (const char* shared = std::getenv("DLPROF_AGREEMENT_RUNS"); shared != nullptr && *shared != '\0') {
    dir = std::string(shared) + "/" + scenario;
  } else {
    dir = MakeTempDir("dlprof-agreement") + "/" + scenario;
    ProcessResult r = RunProcess({kRunScript, kDlprof, kPipeline, dir, scenario}, {}, 300);
    if (r.exit_code != 0) {
      run.log = "agreement_run.sh failed: " + r.out + r.err;
      return run;
    }
  }
  const std::string status = testing::ReadFile(dir + "/status");
  run.log = "the run in " + dir + " (exit status " + status + "):\n" + testing::ReadFile(dir + "/log");
  run.ok = status == "0\n";
  if (run.ok) run.report = testing::ReadReportFolder(dir + "/report");
  return run;
}

class ReportAgreement : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string scenario = GetParam();
    run_ = &RunOf(scenario);
    ASSERT_TRUE(run_->ok) << run_->log;
    ASSERT_FALSE(run_->report.summary.is_null()) << run_->log;
    ASSERT_FALSE(run_->report.page.is_null()) << "no data in report.html";
  }
  const ReportFolder& R() const { return run_->report; }
  const AgreementRun* run_ = nullptr;
};

TEST_P(ReportAgreement, TheSampleCountIsOneNumberEverywhere) { ExpectOneSampleCount(R()); }

// A stage's samples are the flame graph's and pprof's samples with that
// stage innermost.
TEST_P(ReportAgreement, AStagesSamplesArePprofsSamplesOfThatStage) { ExpectStageSamplesArePprofs(R()); }

// A stage's row is one measurement: its CPU time, its wait for a core and
// its blocked time fill its wall time, and what it says in summary.txt and
// in the verdict's evidence is what summary.json says. Under a sanitizer the
// instrumented model slows more than the uninstrumented libjpeg and I/O, and
// the known bottleneck moves (the Scenarios/ tests are out of the sanitizer
// passes for it): in two fresh-clone TSan passes the decode-bound run came
// out model-bound, with no bottleneck stage to check the evidence of.
TEST_P(ReportAgreement, AStagesRowAddsUpToItsWallTime) {
  ExpectStageRowsAddUp(R(), !testing::kUnderSanitizer);
}

// Each process's figures are the same in summary.json, report.html and
// summary.txt; its samples stand for CPU time its clocks also counted.
TEST_P(ReportAgreement, AProcessesFiguresAgreeWithEachOtherAndWithItsClocks) { ExpectProcessesAgree(R()); }

// The timeline's steps and data waits (trace.json) are the steps summary.json
// counts and measures, and report.html draws.
TEST_P(ReportAgreement, TheTimelinesStepsAreTheSummarysSteps) { ExpectTimelineGivesTheSteps(R()); }

// Each buffer's occupancy counter in the timeline gives its statistics.
TEST_P(ReportAgreement, EachBuffersStatisticsAreItsSnapshots) {
  ASSERT_FALSE(R().summary["buffers"].empty()) << "the example's prefetch buffers";
  ExpectBuffersAreTheirSnapshots(R());
}

INSTANTIATE_TEST_SUITE_P(Runs, ReportAgreement, ::testing::Values("decode-bound", "io-bound"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace dlprof
