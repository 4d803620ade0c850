// Every figure a report gives in more than one place is the same figure
// (issue 14, item 5): summary.json against summary.txt, report.html's data,
// stacks.folded, profile.pb.gz and trace.json, in the report folder of one
// real run. Used by tests/report_agreement_test.cc (the C++ example) and
// tests/torch_pipeline_test.cc (PyTorch runs). Each check reports failures
// with gtest's non-fatal EXPECTs.
#ifndef DLPROF_TESTS_SUPPORT_REPORT_AGREEMENT_H_
#define DLPROF_TESTS_SUPPORT_REPORT_AGREEMENT_H_

#include <string>

#include <nlohmann/json.hpp>

namespace dlprof::testing {

struct ReportFolder {
  std::string dir;
  nlohmann::json summary;  // summary.json
  nlohmann::json page;     // report.html's embedded data
  std::string File(const std::string& name) const { return dir + "/" + name; }
};

// Reads summary.json and report.html's data (null where missing or unreadable).
ReportFolder ReadReportFolder(const std::string& dir);

// The sample total: profiler.samples, processes[].samples, report.html's
// cost section and CPU flame graph, stacks.folded, profile.pb.gz, summary.txt.
void ExpectOneSampleCount(const ReportFolder& r);
// Each stage's self_samples are profile.pb.gz's samples with that stage
// innermost; its self wall and CPU time are profile.wall.pb.gz's ticks there.
void ExpectStageSamplesArePprofs(const ReportFolder& r);
// A stage's CPU, wait for a core and blocked time fill its wall time; its
// row in summary.txt, report.html and the verdict's evidence says the same.
void ExpectStageRowsAddUp(const ReportFolder& r, bool expect_bottleneck_stage);
// A process's figures in summary.json, report.html and summary.txt; its
// samples stand for CPU time its clocks also counted.
void ExpectProcessesAgree(const ReportFolder& r);
// The training loop's steps and data waits in trace.json (the timeline) give
// summary.json's step statistics, and report.html's per-step bars.
void ExpectTimelineGivesTheSteps(const ReportFolder& r);
// Each buffer's snapshots in trace.json give summary.json's occupancy,
// empty and full shares, as summary.txt and report.html show them.
void ExpectBuffersAreTheirSnapshots(const ReportFolder& r);

// All of the above.
void ExpectReportAgrees(const ReportFolder& r, bool expect_bottleneck_stage);

}  // namespace dlprof::testing

#endif  // DLPROF_TESTS_SUPPORT_REPORT_AGREEMENT_H_
