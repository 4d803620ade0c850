// The analysis on profiles built by hand, where every number is known.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "readers/profile.h"
#include "reports/analysis.h"

namespace dlprof {
namespace {

constexpr int64_t kMs = 1000000;

// One main process whose training loop runs steps of the given lengths back
// to back from t = 1 s; sampling starts 1 ms after step `sampling_from`
// ends (0: from the start).
Profile StepsProfile(const std::vector<int64_t>& step_ms, int baseline_steps, int warmup_steps,
                     size_t sampling_from) {
  Profile p;
  Process proc;
  proc.pid = 1;
  proc.hz = 100;
  proc.fields["baseline_steps"] = std::to_string(baseline_steps);
  proc.fields["warmup_steps"] = std::to_string(warmup_steps);
  int64_t t = 1000 * kMs;
  for (size_t i = 0; i < step_ms.size(); ++i) {
    Interval step;
    step.kind = IntervalKind::kStep;
    step.tid = 7;
    step.begin_ns = t;
    step.end_ns = t + step_ms[i] * kMs;
    p.intervals.push_back(step);
    t = step.end_ns;
    if (i + 1 == sampling_from) proc.sampling_start_ns = t + kMs;
  }
  proc.start_ns = 1000 * kMs;
  proc.end_ns = t;
  p.processes.push_back(proc);
  return p;
}

TEST(AnalysisSteps, WarmUpIsTheRunsFirstStepsAndTheBaselineIsWhatFollows) {
  // Two cold steps, two warm unprofiled ones at 10 ms, profiled ones at 11 ms.
  Analysis a = Analyze(StepsProfile({100, 100, 10, 10, 11, 11, 11, 11, 11, 11}, 4, 2, 4));
  EXPECT_EQ(a.steps.warmup_dropped, 2);
  EXPECT_EQ(a.steps.baseline_count, 2);
  EXPECT_EQ(a.steps.count, 6);
  EXPECT_NEAR(a.steps.baseline_median_s, 0.010, 1e-12);
  EXPECT_NEAR(a.steps.median_s, 0.011, 1e-12);
  EXPECT_NEAR(a.steps.distortion, 0.10, 1e-9);  // a cold baseline said -0.80
  EXPECT_TRUE(a.cost.distortion_measured);
}

TEST(AnalysisSteps, DistortionComparesTheBaselineWithTheStepsRightAfterIt) {
  // The run speeds up later (data cached): 10 ms unprofiled, 11 ms profiled
  // right after, then 5 ms. The profiler's cost is the 10%, not -50%.
  std::vector<int64_t> ms = {50, 50, 10, 10, 10, 10, 11, 11, 11, 11};
  ms.insert(ms.end(), 20, 5);
  Analysis a = Analyze(StepsProfile(ms, 6, 2, 6));
  EXPECT_EQ(a.steps.baseline_count, 4);
  EXPECT_NEAR(a.steps.median_s, 0.005, 1e-12);
  EXPECT_NEAR(a.steps.distortion, 0.10, 1e-9);
}

TEST(AnalysisSteps, ABaselineNoLongerThanTheWarmUpIsNamedAndNotUsed) {
  Analysis a = Analyze(StepsProfile({100, 100, 11, 11, 11}, 2, 2, 2));
  EXPECT_EQ(a.steps.baseline_count, 0);
  EXPECT_EQ(a.steps.count, 3);
  EXPECT_FALSE(a.cost.distortion_measured);
  bool named = false;
  for (const std::string& w : a.warnings) named |= w.find("DLPROF_BASELINE_STEPS=2") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(AnalysisSteps, TooFewStepsForTheWarmUpAreAllKept) {
  Analysis a = Analyze(StepsProfile({20, 30}, 0, 2, 0));
  EXPECT_EQ(a.steps.warmup_dropped, 0);
  EXPECT_EQ(a.steps.count, 2);
  EXPECT_NEAR(a.steps.mean_s, 0.025, 1e-12);
  ASSERT_FALSE(a.warnings.empty());
  EXPECT_NE(a.warnings[0].find("warm-up steps kept"), std::string::npos) << a.warnings[0];
}

// A wait is [begin, end): a sample at its end is the loop's own work again.
TEST(AnalysisStages, WaitIntervalsAreHalfOpen) {
  Profile p = StepsProfile({10, 10, 10}, 0, 0, 0);
  Interval wait;
  wait.kind = IntervalKind::kWait;
  wait.tid = 7;
  wait.begin_ns = 1000 * kMs;
  wait.end_ns = 1005 * kMs;
  p.intervals.push_back(wait);
  auto sample_in = [&](const char* stage, int64_t t) {
    Sample s;
    s.tid = 7;
    s.time_ns = t;
    s.cpu_ns = 10 * kMs;
    s.stage_path = p.InternStagePath({p.InternStage(stage)});
    p.samples.push_back(s);
  };
  sample_in("at_wait_begin", wait.begin_ns);  // waiting: the data side's time
  sample_in("at_wait_end", wait.end_ns);      // not waiting: the model's
  Analysis a = Analyze(p);
  ASSERT_EQ(a.stages.size(), 2u);
  for (const StageStats& st : a.stages) {
    if (st.name == "at_wait_begin") EXPECT_TRUE(st.data_stage);
    else if (st.name == "at_wait_end") EXPECT_FALSE(st.data_stage);
    else ADD_FAILURE() << st.name;
  }
}

}  // namespace
}  // namespace dlprof
