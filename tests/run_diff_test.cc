// reports/run_diff on analyses built by hand, where every number is known;
// and the note `dlprof report` gives when the processes it merges belong to
// several runs (reports/analysis.cc, RunIds).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "readers/profile.h"
#include "reports/analysis.h"
#include "reports/run_diff.h"

namespace dlprof {
namespace {

constexpr int64_t kMs = 1000000;

StageStats Stage(const std::string& name, const std::string& role, double self_wall, double off,
                 double wait) {
  StageStats s;
  s.name = name;
  s.main_role = role;
  s.self_wall_s = self_wall;
  s.self_cpu_s = self_wall * (1 - off - wait);
  s.total_wall_s = self_wall;
  s.offcpu_fraction = off;
  s.cpu_wait_fraction = wait;
  return s;
}

BufferStats Buffer(const std::string& name, int pid, uint64_t capacity, uint64_t snapshots,
                   double mean, double empty, double full) {
  BufferStats b;
  b.name = name;
  b.pid = pid;
  b.role = "worker";
  b.capacity = capacity;
  b.snapshots = snapshots;
  b.mean_occupancy = mean;
  b.empty_fraction = empty;
  b.full_fraction = full;
  return b;
}

const StageDiff& FindStage(const RunDiff& d, const std::string& name) {
  for (const StageDiff& s : d.stages) {
    if (s.name == name) return s;
  }
  throw std::runtime_error("no stage " + name);
}

TEST(RunDiff, ChangeIsAfterMinusBeforeAndRelativeNeedsABefore) {
  const Change c = Changed(0.4, 0.1);
  EXPECT_NEAR(c.delta(), -0.3, 1e-12);
  double r = 0;
  ASSERT_TRUE(c.Relative(&r));
  EXPECT_NEAR(r, -0.75, 1e-12);
  EXPECT_FALSE(Changed(0, 0.5).Relative(&r));  // from nothing: no ratio
  Change only_after;
  only_after.has_after = true;
  only_after.after = 2;
  EXPECT_FALSE(only_after.both());
  EXPECT_EQ(only_after.delta(), 0);
  EXPECT_FALSE(only_after.Relative(&r));
}

TEST(RunDiff, StagesAreMatchedByNameAndKeepBothRoles) {
  Analysis before, after;
  before.stages = {Stage("decode", "main", 2.0, 0.0, 0.1), Stage("read", "main", 1.0, 0.8, 0.0),
                   Stage("collate", "main", 0.2, 0.0, 0.0)};
  after.stages = {Stage("decode", "worker", 1.0, 0.0, 0.4), Stage("read", "worker", 3.0, 0.9, 0.0),
                  Stage("shuffle", "worker", 0.1, 0.0, 0.0)};
  const RunDiff d = DiffRuns(before, after);
  ASSERT_EQ(d.stages.size(), 4u);
  // The largest self time in either run first: read (3 s after), decode (2 s before).
  EXPECT_EQ(d.stages[0].name, "read");
  EXPECT_EQ(d.stages[1].name, "decode");
  const StageDiff& decode = FindStage(d, "decode");
  EXPECT_TRUE(decode.in_before && decode.in_after);
  EXPECT_EQ(decode.role_before, "main");
  EXPECT_EQ(decode.role_after, "worker");
  EXPECT_NEAR(decode.self_wall_s.delta(), -1.0, 1e-12);
  EXPECT_NEAR(decode.on_cpu_fraction.before, 0.9, 1e-12);
  EXPECT_NEAR(decode.on_cpu_fraction.after, 0.6, 1e-12);
  EXPECT_NEAR(decode.cpu_wait_fraction.delta(), 0.3, 1e-12);
  EXPECT_NEAR(FindStage(d, "read").offcpu_fraction.delta(), 0.1, 1e-12);
  const StageDiff& collate = FindStage(d, "collate");
  EXPECT_TRUE(collate.in_before && !collate.in_after);
  EXPECT_FALSE(collate.self_wall_s.has_after);
  const StageDiff& shuffle = FindStage(d, "shuffle");
  EXPECT_TRUE(!shuffle.in_before && shuffle.in_after);
  EXPECT_EQ(shuffle.role_before, "");
}

TEST(RunDiff, StagesWithoutWallTimeHaveNoShares) {
  Analysis before, after;
  StageStats cpu_only;
  cpu_only.name = "decode";
  cpu_only.self_cpu_s = 1.5;
  before.stages = {cpu_only};
  after.stages = {cpu_only};
  const RunDiff d = DiffRuns(before, after);
  ASSERT_EQ(d.stages.size(), 1u);
  EXPECT_FALSE(d.stages[0].on_cpu_fraction.has_before);
  EXPECT_FALSE(d.stages[0].offcpu_fraction.has_after);
  EXPECT_TRUE(d.stages[0].self_cpu_s.both());
  // The text shows "-" for them rather than 100% on-CPU.
  EXPECT_EQ(DiffText(d).find("100.0%"), std::string::npos) << DiffText(d);
}

TEST(RunDiff, BuffersOfOneNameArePooledOverTheirSnapshots) {
  Analysis before, after;
  before.buffers = {Buffer("queue", 11, 4, 10, 0.5, 0.2, 0.1)};
  // Two workers' queues: 30 snapshots at 0.8 full and 10 at 0.0; and one
  // never snapshotted, which counts as a process but not in the shares.
  after.buffers = {Buffer("queue", 21, 4, 30, 0.8, 0.0, 0.5), Buffer("queue", 22, 8, 10, 0.0, 1.0, 0.0),
                   Buffer("queue", 23, 4, 0, 0, 0, 0), Buffer("spill", 21, 2, 0, 0, 0, 0)};
  const RunDiff d = DiffRuns(before, after);
  ASSERT_EQ(d.buffers.size(), 2u);
  const BufferDiff& q = d.buffers[0];
  EXPECT_EQ(q.name, "queue");
  EXPECT_EQ(q.processes.before, 1);
  EXPECT_EQ(q.processes.after, 3);
  EXPECT_EQ(q.capacity.after, 8);
  EXPECT_NEAR(q.mean_occupancy.after, (30 * 0.8) / 40, 1e-12);
  EXPECT_NEAR(q.empty_fraction.after, 10.0 / 40, 1e-12);
  EXPECT_NEAR(q.full_fraction.after, (30 * 0.5) / 40, 1e-12);
  EXPECT_NEAR(q.mean_occupancy.delta(), 0.6 - 0.5, 1e-12);
  const BufferDiff& spill = d.buffers[1];
  EXPECT_TRUE(!spill.in_before && spill.in_after);
  EXPECT_FALSE(spill.mean_occupancy.has_after);  // never snapshotted: not "never empty"
}

TEST(RunDiff, WorkersStepsAndVerdict) {
  Analysis before, after;
  before.verdict.basis = "steps";
  before.verdict.input_bound = true;
  before.verdict.severity = "high";
  before.verdict.data_wait_fraction = 0.5;
  before.steps.count = 10;
  before.steps.median_s = 0.2;
  before.steps.mean_s = 0.25;
  before.workers.concurrent = 2;
  before.workers.processes = 2;
  ProcessStats w;
  w.role = "worker";
  w.cpu_s = 1;
  w.wall_s = 2;
  before.processes = {w, w};
  after.verdict.basis = "none";  // no steps, no buffers: no wait share to compare
  after.workers.concurrent = 0;
  after.workers.processes = 0;
  const RunDiff d = DiffRuns(before, after);
  EXPECT_TRUE(d.data_wait_fraction.has_before);
  EXPECT_FALSE(d.data_wait_fraction.has_after);
  EXPECT_TRUE(d.step_median_s.has_before);
  EXPECT_FALSE(d.step_median_s.has_after);
  EXPECT_EQ(d.steps.after, 0);
  EXPECT_EQ(d.workers_concurrent.delta(), -2);
  EXPECT_NEAR(d.worker_busy_fraction.before, 0.5, 1e-12);
  EXPECT_FALSE(d.worker_busy_fraction.has_after);
  const std::string text = DiffText(d);
  EXPECT_NE(text.find("before: input-bound (high)"), std::string::npos) << text;
  EXPECT_NE(text.find("after:  unknown (no step markers and no buffers)"), std::string::npos);
  EXPECT_NE(text.find("(changed)"), std::string::npos);
  const nlohmann::json j = DiffJson(d);
  EXPECT_TRUE(j["steps"]["median_s"]["after"].is_null());
  EXPECT_TRUE(j["steps"]["median_s"]["change"].is_null());
  EXPECT_EQ(j["workers"]["concurrent"]["change"], -2);
  EXPECT_TRUE(j["verdict_changed"]);
}

TEST(RunDiff, NamesAreCleanedInTheTextAndKeptInTheJson) {
  Analysis before, after;
  before.stages = {Stage("evil\x1b]0;title\x07", "worker", 1, 0, 0)};
  after.stages = before.stages;
  const RunDiff d = DiffRuns(before, after);
  const std::string text = DiffText(d);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find('\x07'), std::string::npos);
  EXPECT_EQ(DiffJson(d)["stages"][0]["name"], "evil\x1b]0;title\x07");
  // The page carries the document without a '<' that could close its element.
  Analysis hostile;
  hostile.stages = {Stage("</script><script>alert(1)</script>", "main", 1, 0, 0)};
  const std::string page = DiffHtml(DiffRuns(hostile, hostile));
  EXPECT_EQ(page.find("</script><script>alert"), std::string::npos);
  EXPECT_NE(page.find("\\u003c/script\\u003e\\u003cscript\\u003ealert"), std::string::npos);
}

TEST(RunDiff, AnUnreadableSideIsNamed) {
  try {
    DiffInputs("/nonexistent/dlprof-before", "/nonexistent/dlprof-after", FileLimits());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "before: /nonexistent/dlprof-before: no such file or folder");
  }
}

// ---------------------------------------------------------------------------
// `dlprof report` over several runs.

// A training process (pid, run id, host) recording `steps` steps of 100 ms.
Process Trainer(int pid, const std::string& run_id, const std::string& host) {
  Process p;
  p.pid = pid;
  p.host = host;
  p.start_ns = 1000 * kMs;
  p.end_ns = 3000 * kMs;
  if (!run_id.empty()) p.fields["run_id"] = run_id;
  p.fields["warmup_steps"] = "0";
  return p;
}

Profile Merged(const std::vector<Process>& processes, const std::vector<int>& steps) {
  Profile p;
  p.processes = processes;
  for (size_t i = 0; i < processes.size(); ++i) {
    for (int s = 0; s < steps[i]; ++s) {
      Interval iv;
      iv.process = static_cast<uint32_t>(i);
      iv.tid = static_cast<uint32_t>(processes[i].pid);
      iv.kind = IntervalKind::kStep;
      iv.begin_ns = (1000 + 100 * s) * kMs;
      iv.end_ns = iv.begin_ns + 100 * kMs;
      p.intervals.push_back(iv);
    }
  }
  return p;
}

bool SaysMerged(const Analysis& a) {
  for (const std::string& w : a.warnings) {
    if (w.find("merged") != std::string::npos) return true;
  }
  return false;
}

TEST(MergedRuns, TwoRunIdsAreNamedFirstWithTheRunTheStepsComeFrom) {
  // The second run's trainer records more steps: the analysis takes its.
  const Profile p = Merged({Trainer(10, "run-a", "a"), Trainer(20, "run-b", "b")}, {3, 5});
  EXPECT_EQ(RunIds(p), (std::vector<std::string>{"run-a", "run-b"}));
  const Analysis a = Analyze(p);
  ASSERT_FALSE(a.warnings.empty());
  EXPECT_EQ(a.warnings[0],
            "merged 2 runs (run-a, run-b) into one report; steps come from the training process "
            "of run-b (pid 20). To compare runs, use `dlprof diff BEFORE AFTER`");
}

TEST(MergedRuns, HostsAndRanksOfOneRunShareItsIdAndSayNothing) {
  // DLPROF_RUN_ID exported to every rank: one run on two hosts.
  const Profile p = Merged({Trainer(10, "run-a", "node-1"), Trainer(10, "run-a", "node-2")}, {4, 4});
  EXPECT_EQ(RunIds(p), std::vector<std::string>{"run-a"});
  EXPECT_FALSE(SaysMerged(Analyze(p)));
  // Profiles of other formats carry no run id: nothing to say either.
  EXPECT_FALSE(SaysMerged(Analyze(Merged({Trainer(1, "", ""), Trainer(2, "", "")}, {2, 2}))));
}

TEST(MergedRuns, ManyRunsWithoutStepsAreCountedAndNotAllListed) {
  std::vector<Process> procs;
  for (int i = 0; i < 5; ++i) procs.push_back(Trainer(100 + i, "r" + std::to_string(i), ""));
  const Analysis a = Analyze(Merged(procs, {0, 0, 0, 0, 0}));
  ASSERT_FALSE(a.warnings.empty());
  EXPECT_EQ(a.warnings[0],
            "merged 5 runs (r0, r1, r2 and 2 more) into one report; no process recorded steps. "
            "To compare runs, use `dlprof diff BEFORE AFTER`");
}

}  // namespace
}  // namespace dlprof
