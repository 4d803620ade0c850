// The analysis on profiles built by hand, where every number is known.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "readers/pprof_reader.h"
#include "readers/profile.h"
#include "reports/analysis.h"
#include "reports/report_writer.h"

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


// A loop whose 20 steps of 10 ms each wait 8 ms for data, beside one worker
// that parses. `loop_cpu_in_wait` 1 ms CPU samples of the loop's own thread
// fall in each wait, outside any stage (unpacking the batch); the worker
// parses `worker_parse` ms per step.
Profile ReceiveProfile(int loop_cpu_in_wait, int worker_parse) {
  std::vector<int64_t> steps(20, 10);
  Profile p = StepsProfile(steps, 0, 0, 0);
  Process worker = p.processes[0];
  worker.pid = 2;
  worker.ppid = 1;
  worker.role = "worker";
  worker.worker = 0;
  p.processes.push_back(worker);
  const uint32_t parse = p.InternStagePath({p.InternStage("parse")});
  for (int i = 0; i < 20; ++i) {
    const int64_t t = (1000 + 10 * i) * kMs;
    Interval wait;
    wait.kind = IntervalKind::kWait;
    wait.tid = 7;
    wait.begin_ns = t;
    wait.end_ns = t + 8 * kMs;
    p.intervals.push_back(wait);
    for (int k = 0; k < loop_cpu_in_wait; ++k) {
      Sample s;
      s.tid = 7;
      s.time_ns = t + k * kMs + kMs / 2;
      s.cpu_ns = kMs;
      p.samples.push_back(s);
    }
    for (int k = 0; k < worker_parse; ++k) {
      Sample s;
      s.process = 1;
      s.tid = 20;
      s.time_ns = t + k * kMs / 2;
      s.cpu_ns = kMs;
      s.stage_path = parse;
      p.samples.push_back(s);
    }
  }
  return p;
}

TEST(AnalysisVerdict, TheLoopsOwnReceiveWorkInsideItsWaitsIsTheBottleneckNotIdleWorkers) {
  const Analysis a = Analyze(ReceiveProfile(7, 1));
  EXPECT_EQ(a.verdict.severity, "high");
  EXPECT_NEAR(a.verdict.loop_receive_fraction, 7.0 / 8, 1e-6);
  EXPECT_EQ(a.verdict.bottleneck_stage, "");
  EXPECT_EQ(a.verdict.bottleneck_role, "main");
  EXPECT_EQ(a.verdict.bottleneck_kind, "cpu");
  EXPECT_TRUE(a.verdict.bottleneck_functions.empty());
  bool said = false;
  for (const std::string& e : a.verdict.evidence) said |= e.find("ran on its own CPU 88%") != std::string::npos;
  EXPECT_TRUE(said) << ::testing::PrintToString(a.verdict.evidence);
}

TEST(AnalysisVerdict, ALoopBlockedInItsWaitsBlamesTheWorkersStage) {
  const Analysis a = Analyze(ReceiveProfile(1, 8));
  EXPECT_EQ(a.verdict.severity, "high");
  EXPECT_NEAR(a.verdict.loop_receive_fraction, 1.0 / 8, 1e-6);
  EXPECT_EQ(a.verdict.bottleneck_stage, "parse");
  EXPECT_EQ(a.verdict.bottleneck_role, "worker");
}

// ReceiveProfile(loop_cpu_in_wait, worker_parse) on 2 cores, with wall
// records: the loop (pid 1, tid 7) runs `loop_cpu` and waits for a core
// `loop_core_wait` ms of each 10 ms, and `busy_workers` worker threads run 5
// and wait 5 ms of each.
Profile CrowdedReceiveProfile(int loop_cpu_in_wait, int worker_parse, int busy_workers) {
  Profile p = ReceiveProfile(loop_cpu_in_wait, worker_parse);
  auto wall = [&](uint32_t proc, uint32_t tid, int64_t cpu_ms, int64_t wait_ms) {
    for (int64_t t = 1000; t < 1200; t += 10) {
      Sample s;
      s.process = proc;
      s.tid = tid;
      s.kind = SampleKind::kWall;
      s.on_cpu = cpu_ms + wait_ms >= 9;
      s.time_ns = (t + 10) * kMs;
      s.wall_ns = 10 * kMs;
      s.cpu_ns = cpu_ms * kMs;
      s.wait_ns = wait_ms * kMs;
      p.samples.push_back(s);
    }
  };
  wall(0, 7, 2, 3);  // runnable 2.5 times its CPU time
  for (int k = 0; k < busy_workers; ++k) wall(1, static_cast<uint32_t>(20 + k), 5, 5);
  for (Process& proc : p.processes) {
    proc.fields["cpus"] = "2";
    proc.fields["run_delay"] = "schedstat";
  }
  return p;
}

// Other programs hold the cores: the loop's waits for a core while it
// receives count as receive work (3 of 8 ms on CPU, runnable 2.5 times that).
TEST(AnalysisVerdict, ReceiveWorkSlowedByOtherProgramsCountsItsWaitsForACore) {
  const Analysis a = Analyze(CrowdedReceiveProfile(3, 1, 0));
  EXPECT_FALSE(a.verdict.cpu_saturated);
  EXPECT_NEAR(a.verdict.loop_receive_fraction, 3.0 / 8 * 2.5, 1e-6);
  EXPECT_EQ(a.verdict.bottleneck_stage, "");
  EXPECT_EQ(a.verdict.bottleneck_role, "main");
}

// The program's own workers outnumber the cores: the core the loop waits for
// is theirs, so only its CPU counts, and the workers' stage is the bottleneck.
TEST(AnalysisVerdict, ReceiveWorkSlowedByTheProgramsOwnWorkersBlamesTheirStage) {
  const Analysis a = Analyze(CrowdedReceiveProfile(3, 8, 3));
  EXPECT_TRUE(a.verdict.cpu_saturated);
  EXPECT_NEAR(a.verdict.loop_receive_fraction, 3.0 / 8, 1e-6);
  EXPECT_EQ(a.verdict.bottleneck_stage, "parse");
  EXPECT_EQ(a.verdict.bottleneck_role, "worker");
}

TEST(AnalysisVerdict, DataStagesInsideTheWaitsAreNotReceiveWork) {
  // num_workers=0: the loop itself parses inside its waits, in a marked stage.
  Profile p = ReceiveProfile(0, 0);
  const uint32_t parse = p.InternStagePath({p.InternStage("parse")});
  for (int i = 0; i < 20; ++i) {
    for (int k = 0; k < 7; ++k) {
      Sample s;
      s.tid = 7;
      s.time_ns = (1000 + 10 * i + k) * kMs + kMs / 2;
      s.cpu_ns = kMs;
      s.stage_path = parse;
      p.samples.push_back(s);
    }
  }
  const Analysis a = Analyze(p);
  EXPECT_EQ(a.verdict.loop_receive_fraction, 0);
  EXPECT_EQ(a.verdict.bottleneck_stage, "parse");
  EXPECT_EQ(a.verdict.bottleneck_role, "main");
}

// A run's processes built by hand: who started whom, what each recorded.
// Times are ms from the profile's start; wall ticks are 10 ms each.
class RunBuilder {
 public:
  // A process as the runtime records it: `role` and `worker` are what the
  // file says (the first process "main", every later one "worker").
  uint32_t Add(int pid, int ppid, const std::string& role, int worker, const std::string& command,
               int64_t start_ms, int64_t end_ms, const std::string& end = "exit") {
    Process proc;
    proc.pid = pid;
    proc.ppid = ppid;
    proc.role = role;
    proc.worker = worker;
    proc.command = command;
    proc.hz = 100;
    proc.start_ns = start_ms * kMs;
    proc.end_ns = end_ms * kMs;
    proc.complete = true;
    proc.end_reason = end;
    proc.fields = {{"warmup_steps", "0"}, {"cpus", "8"}};
    p.processes.push_back(proc);
    return static_cast<uint32_t>(p.processes.size() - 1);
  }
  // `n` steps of `step_ms` from `from_ms` on thread `tid`, each beginning with
  // a wait for data of `wait_ms`.
  void Steps(uint32_t proc, uint32_t tid, int n, int64_t from_ms, int64_t step_ms, int64_t wait_ms) {
    for (int i = 0; i < n; ++i) {
      const int64_t t = (from_ms + i * step_ms) * kMs;
      p.intervals.push_back({proc, tid, IntervalKind::kStep, 0, t, t + step_ms * kMs});
      p.intervals.push_back({proc, tid, IntervalKind::kWait, 0, t, t + wait_ms * kMs});
    }
  }
  // Wall ticks of thread `tid` in `stage` ("" = none) over [from_ms, to_ms).
  void Wall(uint32_t proc, uint32_t tid, const std::string& stage, int64_t from_ms, int64_t to_ms,
            bool on_cpu = true) {
    const uint32_t path = stage.empty() ? 0 : p.InternStagePath({p.InternStage(stage)});
    for (int64_t t = from_ms; t + 10 <= to_ms; t += 10) {
      Sample s;
      s.process = proc;
      s.tid = tid;
      s.kind = SampleKind::kWall;
      s.stage_path = path;
      s.on_cpu = on_cpu;
      s.time_ns = (t + 5) * kMs;
      s.wall_ns = 10 * kMs;
      s.cpu_ns = on_cpu ? 10 * kMs : 0;
      p.samples.push_back(s);
    }
  }
  // Wall ticks of 10 ms in three states: `cpu_ms` running and `wait_ms`
  // waiting for a core in each, blocked the rest (in read() when blocked > 0).
  void WallStates(uint32_t proc, uint32_t tid, const std::string& stage, int64_t from_ms, int64_t to_ms,
                  int64_t cpu_ms, int64_t wait_ms) {
    const uint32_t path = stage.empty() ? 0 : p.InternStagePath({p.InternStage(stage)});
    for (int64_t t = from_ms; t + 10 <= to_ms; t += 10) {
      Sample s;
      s.process = proc;
      s.tid = tid;
      s.kind = SampleKind::kWall;
      s.stage_path = path;
      s.on_cpu = cpu_ms + wait_ms >= 9;
      s.time_ns = (t + 10) * kMs;
      s.wall_ns = 10 * kMs;
      s.cpu_ns = cpu_ms * kMs;
      s.wait_ns = wait_ms * kMs;
      p.samples.push_back(s);
    }
  }
  // The training loop of Steps() fetching in-process (num_workers=0): `data`
  // inside each wait, `model` in the rest of the step.
  void InProcess(uint32_t proc, uint32_t tid, int n, int64_t from_ms, int64_t step_ms, int64_t wait_ms,
                 const std::string& data, const std::string& model) {
    for (int i = 0; i < n; ++i) {
      const int64_t t = from_ms + i * step_ms;
      Wall(proc, tid, data, t, t + wait_ms);
      Wall(proc, tid, model, t + wait_ms, t + step_ms);
    }
  }
  Profile p;
};

const char kTracker[] = "/usr/bin/python3 -c from multiprocessing.resource_tracker import main;main(5)";
const char kForkserver[] =
    "/usr/bin/python3 -c from multiprocessing.forkserver import main; main(7, 8, ['__main__'], "
    "**{'sys_path': ['/work'], 'main_path': '/work/train.py'})";

int CountRole(const Analysis& a, const std::string& role) {
  int n = 0;
  for (const ProcessStats& ps : a.processes) n += ps.role == role;
  return n;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// torchrun (or a script that runs the trainer with subprocess): the run's
// first process is the launcher; its fork before the exec of the trainer is
// a file of its own (ended by the exec); the trainer runs the loop with
// num_workers=0, so decoding runs in it, inside its waits for data; Python
// starts a resource tracker beside it.
struct LauncherRun {
  RunBuilder run;
  uint32_t launcher, pre_exec, trainer, tracker;
};
LauncherRun MakeLauncherRun() {
  LauncherRun l;
  RunBuilder& run = l.run;
  const std::string torchrun = "/usr/bin/python3 /usr/bin/torchrun train.py";
  l.launcher = run.Add(100, 1, "main", -1, torchrun, 0, 2200);
  l.pre_exec = run.Add(101, 100, "worker", 0, torchrun, 5, 6, "exec");
  l.trainer = run.Add(101, 100, "worker", -1, "/usr/bin/python3 train.py", 6, 2150);
  l.tracker = run.Add(102, 101, "worker", -1, kTracker, 20, 2160);
  run.Wall(l.launcher, 100, "", 0, 2200, false);  // waits for its child
  run.Wall(l.tracker, 102, "", 20, 2160, false);
  run.Steps(l.trainer, 101, 20, 100, 100, 60);
  run.InProcess(l.trainer, 101, 20, 100, 100, 60, "decode", "forward");
  return l;
}

TEST(AnalysisRoles, UnderALauncherTheProcessThatRunsTheLoopIsTheTrainer) {
  const LauncherRun l = MakeLauncherRun();
  const uint32_t launcher = l.launcher, pre_exec = l.pre_exec, trainer = l.trainer, tracker = l.tracker;
  Analysis a = Analyze(l.run.p);

  EXPECT_EQ(a.steps.process, trainer);
  EXPECT_EQ(a.processes[trainer].role, "main");
  EXPECT_EQ(a.processes[launcher].role, "other");
  EXPECT_EQ(a.processes[pre_exec].role, "other");
  EXPECT_EQ(a.processes[tracker].role, "other");
  EXPECT_EQ(CountRole(a, "worker"), 0);
  EXPECT_EQ(a.workers.concurrent, 0);
  EXPECT_EQ(a.processes[launcher].role_basis, "started the training process (a launcher)");
  EXPECT_EQ(a.processes[trainer].recorded_role, "worker");
  const Verdict& v = a.verdict;
  EXPECT_EQ(v.severity, "high");
  EXPECT_EQ(v.bottleneck_stage, "decode");
  EXPECT_EQ(v.bottleneck_kind, "cpu");
  EXPECT_EQ(v.bottleneck_role, "main");
  const std::string advice = Joined(v.advice), evidence = Joined(v.evidence);
  EXPECT_NE(advice.find("'decode' runs in the training process"), std::string::npos) << advice;
  EXPECT_EQ(advice.find("workers deliver"), std::string::npos) << advice;
  EXPECT_NE(evidence.find("in the training process"), std::string::npos) << evidence;
  EXPECT_LT(v.slowest_worker, 0);
}

// A DataLoader without persistent_workers: 2 workers (ids 0 and 1) forked
// afresh for each of 3 epochs, the loop waiting 40% of each step. The
// pipeline has 2 workers: the advice's arithmetic is 2 x 1/(1 - 0.4) = 3.3,
// about 4 workers, not 6 x 1.67 = 10. `ids` are the workers' ids, epoch by
// epoch; `overlap_ms` how long each epoch's workers outlive the next ones'
// start.
void ExpectTwoWorkersReforkedEveryEpoch(const std::vector<int>& ids, int64_t overlap_ms) {
  SCOPED_TRACE(testing::Message() << "overlap " << overlap_ms << " ms");
  RunBuilder run;
  const uint32_t trainer = run.Add(100, 1, "main", -1, "/usr/bin/python3 train.py", 0, 3200);
  run.Steps(trainer, 100, 30, 100, 100, 40);
  run.InProcess(trainer, 100, 30, 100, 100, 40, "", "forward");
  for (int epoch = 0; epoch < 3; ++epoch) {
    const int64_t start = 100 + epoch * 1000, end = start + 1000 + (epoch < 2 ? overlap_ms : 0);
    for (int k = 0; k < 2; ++k) {
      const int pid = 200 + 2 * epoch + k;
      const uint32_t w = run.Add(pid, 100, "worker", ids[2 * epoch + k], "/usr/bin/python3 train.py",
                                 start, end, "_exit");
      run.Wall(w, static_cast<uint32_t>(pid), "decode", start, end);
    }
  }
  Analysis a = Analyze(run.p);
  EXPECT_EQ(CountRole(a, "worker"), 6);  // every process is still listed
  EXPECT_EQ(a.workers.processes, 6);
  EXPECT_EQ(a.workers.concurrent, 2);
  const Verdict& v = a.verdict;
  EXPECT_EQ(v.bottleneck_stage, "decode");
  EXPECT_EQ(v.bottleneck_role, "worker");
  EXPECT_EQ(v.bottleneck_kind, "cpu");
  EXPECT_NEAR(v.data_wait_fraction, 0.4, 1e-9);
  const std::string evidence = Joined(v.evidence);
  EXPECT_NE(evidence.find("in 2 worker processes at a time (6 over the run"), std::string::npos) << evidence;
  const std::string advice = Joined(v.advice);
  EXPECT_NE(advice.find("(2 workers on 8 cores on the profiled machine)"), std::string::npos) << advice;
  EXPECT_NE(advice.find("2 workers deliver 10.0 batches/s, the loop could take 16.7/s: about 4 workers,"),
            std::string::npos)
      << advice;
}

TEST(AnalysisWorkers, WorkersReforkedEveryEpochCountOnceEach) {
  ExpectTwoWorkersReforkedEveryEpoch({0, 1, 0, 1, 0, 1}, 0);
  // The next epoch's workers start before the last ones have exited.
  ExpectTwoWorkersReforkedEveryEpoch({0, 1, 0, 1, 0, 1}, 30);
}

TEST(AnalysisWorkers, WorkersWithoutIdsOfTheirOwnAreCountedByTheirLifetimes) {
  // No dlprof_set_worker: each fork's sequence number is its id.
  ExpectTwoWorkersReforkedEveryEpoch({0, 1, 2, 3, 4, 5}, 0);
}

// DDP: a launcher spawns 2 training processes (ranks), each with its own
// DataLoader of 2 workers numbered 0 and 1, all at once. There are 4 workers
// at a time, 2 per rank (worker ids were once counted per run: "2 workers at
// a time, 4 over the run: started anew every epoch"). The ranks step
// together; rank 1 waits longer for data (60% against 40%: rank 0 would wait
// for it in the all-reduce), so the verdict is about rank 1's loop, and its
// advice counts rank 1's own workers and its share of the free cores.
TEST(AnalysisWorkers, EachRankOfADdpRunHasItsOwnWorkers) {
  RunBuilder run;
  run.Add(100, 1, "main", -1, "/usr/bin/python3 launch.py", 0, 3300);
  const uint32_t ranks[2] = {run.Add(101, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 3200),
                             run.Add(102, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 3200)};
  for (int r = 0; r < 2; ++r) {
    const int pid = 101 + r;
    run.Steps(ranks[r], pid, 30, 100, 100, 40 + 20 * r);
    run.InProcess(ranks[r], pid, 30, 100, 100, 40 + 20 * r, "", "forward");
    for (int k = 0; k < 2; ++k) {
      const int wpid = 200 + 10 * r + k;
      const uint32_t w = run.Add(wpid, pid, "worker", k, "/usr/bin/python3 train.py", 50, 3150, "_exit");
      run.Wall(w, static_cast<uint32_t>(wpid), "decode", 100, 3100);
    }
  }
  Analysis a = Analyze(run.p);
  EXPECT_EQ(a.steps.process, ranks[1]);
  EXPECT_EQ(CountRole(a, "main"), 2);
  EXPECT_EQ(CountRole(a, "worker"), 4);
  EXPECT_EQ(a.workers.processes, 4);
  EXPECT_EQ(a.workers.concurrent, 4);
  EXPECT_EQ(a.workers.feeding_loop, 2);
  EXPECT_EQ(a.workers.training_processes, 2);
  const Verdict& v = a.verdict;
  EXPECT_NEAR(v.data_wait_fraction, 0.6, 1e-9);
  EXPECT_EQ(v.bottleneck_stage, "decode");
  EXPECT_EQ(v.bottleneck_role, "worker");
  const std::string evidence = Joined(v.evidence);
  EXPECT_NE(evidence.find("in 4 worker processes across 2 training processes (2 feeding the one "
                          "whose steps are analysed)"),
            std::string::npos)
      << evidence;
  EXPECT_EQ(evidence.find("started anew"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("The training loop of pid 102 (of 2 ranks stepping together, the one that "
                          "waited most for data), waited for data 60%"),
            std::string::npos)
      << evidence;
  // The ranks run all the time (they never block in this run): 2 cores, 5
  // once rank 1's waits are gone, leave 3 of the 8 cores, 1 for each rank's
  // workers. Rank 1's 2 workers deliver 10 batches/s against 25 wanted: 5
  // would do, which the ranks' 10 would not find cores for (the advice for
  // one training process was "about 5 workers would remove the wait").
  const std::string advice = Joined(v.advice);
  EXPECT_NE(advice.find("(2 workers per training process, 2 training processes, on 8 cores on the "
                        "profiled machine). 2 workers deliver 10.0 batches/s, the loop could take "
                        "25.0/s: more workers would only wait for the 3 free cores shared by the 2 "
                        "training processes' workers (the training processes need the rest): make "
                        "'decode' 2.5x faster"),
            std::string::npos)
      << advice;

  using nlohmann::json;
  const json summary = json::parse(MakeSummaryJsonWriter()->Render(run.p, a));
  EXPECT_EQ(summary["workers"], json({{"concurrent", 4},
                                      {"processes", 4},
                                      {"feeding_analysed_loop", 2},
                                      {"training_processes", 2}}));
  EXPECT_EQ(summary["steps"]["pid"], 102);
  const std::string text = MakeSummaryTextWriter()->Render(run.p, a);
  EXPECT_NE(text.find("of pid 102 (of 2 ranks stepping together, the one that waited most for data)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2 training processes, 4 workers at a time (2 feeding the analysed loop; 4 "
                      "worker processes over the run), 1 other"),
            std::string::npos)
      << text;
}

// Three ranks on 2 cores, each computing all its step: they leave their
// workers one core, less than one each, and the advice asks for no worker.
TEST(AnalysisWorkers, RanksOutnumberingTheFreeCoresAreAdvisedNoMoreWorkers) {
  RunBuilder run;
  run.Add(100, 1, "main", -1, "/usr/bin/python3 launch.py", 0, 3300);
  for (int r = 0; r < 3; ++r) {
    const int pid = 101 + r;
    const uint32_t rank = run.Add(pid, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 3200);
    run.Steps(rank, pid, 30, 100, 100, 40);
    run.InProcess(rank, pid, 30, 100, 100, 40, "", "forward");
    const uint32_t w = run.Add(200 + r, pid, "worker", 0, "/usr/bin/python3 train.py", 50, 3150, "_exit");
    run.Wall(w, static_cast<uint32_t>(200 + r), "decode", 100, 3100);
  }
  for (Process& p : run.p.processes) p.fields["cpus"] = "2";
  Analysis a = Analyze(run.p);
  EXPECT_EQ(a.steps.ranks, 3);
  EXPECT_EQ(a.workers.feeding_loop, 1);
  const std::string advice = Joined(a.verdict.advice);
  EXPECT_NE(advice.find("(1 worker per training process, 3 training processes, on 2 cores on the "
                        "profiled machine). The 3 training processes leave their workers 1 free "
                        "core, less than one each: more workers would only wait for it. Make "
                        "'decode' cheaper"),
            std::string::npos)
      << advice;
  EXPECT_EQ(advice.find("use at most"), std::string::npos) << advice;
}

// No stage marked, two ranks: the workers judged are the analysed rank's.
// Rank 1 waits for data (80%) while its workers compute; rank 0 hardly
// waits and its workers sit blocked. Merged by worker id, the four would be
// busy half of the time.
TEST(AnalysisWorkers, UnmarkedWorkersAreJudgedForTheAnalysedRankOnly) {
  RunBuilder run;
  run.Add(100, 1, "main", -1, "/usr/bin/python3 launch.py", 0, 3300);
  for (int r = 0; r < 2; ++r) {
    const int pid = 101 + r;
    const uint32_t rank = run.Add(pid, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 3200);
    run.Steps(rank, pid, 30, 100, 100, r == 1 ? 80 : 10);
    run.InProcess(rank, pid, 30, 100, 100, r == 1 ? 80 : 10, "", "");
    for (int k = 0; k < 2; ++k) {
      const int wpid = 200 + 10 * r + k;
      const uint32_t w = run.Add(wpid, pid, "worker", k, "/usr/bin/python3 train.py", 50, 3150, "_exit");
      run.Wall(w, static_cast<uint32_t>(wpid), "", 100, 3100, /*on_cpu=*/r == 1);
    }
  }
  Analysis a = Analyze(run.p);
  EXPECT_EQ(a.steps.pid, 102);
  const Verdict& v = a.verdict;
  EXPECT_EQ(v.bottleneck_role, "worker");
  EXPECT_EQ(v.bottleneck_kind, "cpu");
  const std::string evidence = Joined(v.evidence);
  EXPECT_NE(evidence.find("were busy (on a CPU or waiting for one) 100% of their time (worker 0 100%, "
                          "worker 1 100%): the loop waits for their work."),
            std::string::npos)
      << evidence;
}

// A worker blocked throughout (its busiest thread never busy) still counts
// in the workers' busy share: three workers, one computing, two idle, are
// busy a third of the time, and the loop's wait is not blamed on them.
TEST(AnalysisWorkers, AnIdleUnmarkedWorkerCountsInTheBusyShare) {
  RunBuilder run;
  const uint32_t trainer = run.Add(100, 1, "main", -1, "/usr/bin/python3 train.py", 0, 3300);
  run.Steps(trainer, 100, 30, 100, 100, 60);
  run.InProcess(trainer, 100, 30, 100, 100, 60, "", "");
  for (int k = 0; k < 3; ++k) {
    const uint32_t w = run.Add(200 + k, 100, "worker", k, "/usr/bin/python3 train.py", 50, 3150, "_exit");
    run.Wall(w, static_cast<uint32_t>(200 + k), "", 100, 3100, /*on_cpu=*/k == 0);
  }
  Analysis a = Analyze(run.p);
  const std::string evidence = Joined(a.verdict.evidence);
  EXPECT_NE(evidence.find("busy (on a CPU or waiting for one) 33% of their time (worker 0 100%, worker 1 "
                          "0%, worker 2 0%): most of it they were blocked or idle."),
            std::string::npos)
      << evidence;
}

// Which loop is analysed when several processes record steps.
// - An evaluation loop the trainer forks steps as often and waits longer:
//   it is the trainer's child, not a rank beside it, and is not chosen.
// - A sibling with far fewer steps is not a rank stepping with it.
// - Ranks are compared on their waits after the warm-up: a rank whose first
//   step waited seconds (a slow worker start) is not the one that waits.
TEST(AnalysisWorkers, TheAnalysedLoopIsTheRankThatWaitsNotAnEvaluationChild) {
  {
    RunBuilder run;
    const uint32_t trainer = run.Add(100, 1, "main", -1, "/usr/bin/python3 train.py", 0, 3300);
    const uint32_t eval = run.Add(101, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 3200);
    run.Steps(trainer, 100, 30, 100, 100, 20);
    run.Steps(eval, 101, 30, 100, 100, 90);
    Analysis a = Analyze(run.p);
    EXPECT_EQ(a.steps.pid, 100);
    EXPECT_EQ(a.steps.ranks, 1);
    EXPECT_NEAR(a.verdict.data_wait_fraction, 0.2, 1e-9);
    EXPECT_NE(Joined(a.verdict.evidence).find("The training loop of pid 100 (of 2 training processes, "
                                              "the one with the most steps), waited"),
              std::string::npos)
        << Joined(a.verdict.evidence);
  }
  {
    RunBuilder run;
    run.Add(100, 1, "main", -1, "/usr/bin/python3 launch.py", 0, 3300);
    const uint32_t r0 = run.Add(101, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 3200);
    const uint32_t r1 = run.Add(102, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 3200);
    run.Steps(r0, 101, 30, 100, 100, 20);
    run.Steps(r1, 102, 20, 100, 100, 90);
    Analysis a = Analyze(run.p);
    EXPECT_EQ(a.steps.pid, 101);
    EXPECT_EQ(a.steps.ranks, 1);
  }
  {
    RunBuilder run;
    run.Add(100, 1, "main", -1, "/usr/bin/python3 launch.py", 0, 6300);
    const uint32_t r0 = run.Add(101, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 6200);
    const uint32_t r1 = run.Add(102, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 6200);
    for (uint32_t r : {r0, r1}) run.p.processes[r].fields["warmup_steps"] = "2";
    // Rank 0: a first step of 3 s, all of it waiting, then 10% waits; rank 1
    // waits 50% of every step.
    run.Steps(r0, 101, 1, 100, 3000, 3000);
    run.Steps(r0, 101, 29, 3100, 100, 10);
    run.Steps(r1, 102, 30, 100, 100, 50);
    Analysis a = Analyze(run.p);
    EXPECT_EQ(a.steps.pid, 102);
    EXPECT_EQ(a.steps.ranks, 2);
    EXPECT_NEAR(a.verdict.data_wait_fraction, 0.5, 1e-9);
  }
}

// Worker imbalance is within the analysed rank's workers: rank 0 has two
// workers and rank 1 one, each busy in 'decode' all along. Pooled by worker
// id, "worker 0" (two processes) took twice the others' time.
TEST(AnalysisWorkers, ImbalanceIsAmongTheAnalysedRanksWorkers) {
  RunBuilder run;
  run.Add(100, 1, "main", -1, "/usr/bin/python3 launch.py", 0, 3300);
  for (int r = 0; r < 2; ++r) {
    const int pid = 101 + r;
    const uint32_t rank = run.Add(pid, 100, "worker", -1, "/usr/bin/python3 train.py", 10, 3200);
    run.Steps(rank, pid, 30, 100, 100, r == 0 ? 60 : 40);
    run.InProcess(rank, pid, 30, 100, 100, r == 0 ? 60 : 40, "", "forward");
    for (int k = 0; k < 2 - r; ++k) {
      const int wpid = 200 + 10 * r + k;
      const uint32_t w = run.Add(wpid, pid, "worker", k, "/usr/bin/python3 train.py", 50, 3150, "_exit");
      run.Wall(w, static_cast<uint32_t>(wpid), "decode", 100, 3100);
    }
  }
  Analysis a = Analyze(run.p);
  EXPECT_EQ(a.steps.pid, 101);
  EXPECT_EQ(a.verdict.bottleneck_stage, "decode");
  EXPECT_NEAR(a.verdict.worker_imbalance, 1.0, 1e-9);
  EXPECT_EQ(Joined(a.verdict.advice).find("imbalanced"), std::string::npos) << Joined(a.verdict.advice);
}

// The forkserver start method: the trainer spawns the resource tracker and
// the forkserver (exec'd Pythons, no worker id), and the forkserver forks the
// 2 workers, which inherit its command line. Neither helper is a worker.
TEST(AnalysisRoles, ForkserverAndResourceTrackerAreNotWorkers) {
  RunBuilder run;
  const uint32_t trainer = run.Add(100, 1, "main", -1, "/usr/bin/python3 train.py", 0, 2200);
  const uint32_t tracker = run.Add(101, 100, "worker", -1, kTracker, 10, 2190);
  // The trainer's fork of the forkserver before its exec (fork sequence 1).
  const uint32_t pre_exec = run.Add(102, 100, "worker", 1, "/usr/bin/python3 train.py", 19, 20, "exec");
  const uint32_t forkserver = run.Add(102, 100, "worker", -1, kForkserver, 20, 2180);
  const uint32_t w0 = run.Add(103, 102, "worker", 0, kForkserver, 60, 2150, "_exit");
  const uint32_t w1 = run.Add(104, 102, "worker", 1, kForkserver, 60, 2150, "_exit");
  run.Steps(trainer, 100, 20, 100, 100, 50);
  run.InProcess(trainer, 100, 20, 100, 100, 50, "", "forward");
  run.Wall(tracker, 101, "", 10, 2190, false);
  run.Wall(forkserver, 102, "", 20, 2180, false);  // in select(), between forks
  run.Wall(w0, 103, "decode", 100, 2100);
  run.Wall(w1, 104, "decode", 100, 2100);
  Analysis a = Analyze(run.p);

  EXPECT_EQ(a.processes[trainer].role, "main");
  EXPECT_EQ(a.processes[tracker].role, "other");
  EXPECT_EQ(a.processes[forkserver].role, "other");
  EXPECT_EQ(a.processes[pre_exec].role, "other");
  EXPECT_EQ(a.processes[w0].role, "worker");
  EXPECT_EQ(a.processes[w1].role, "worker");
  EXPECT_EQ(a.processes[tracker].role_basis, "multiprocessing's resource tracker");
  EXPECT_EQ(a.processes[forkserver].role_basis, "multiprocessing's forkserver");
  EXPECT_EQ(a.workers.processes, 2);
  EXPECT_EQ(a.workers.concurrent, 2);
  const Verdict& v = a.verdict;
  EXPECT_EQ(v.bottleneck_stage, "decode");
  EXPECT_EQ(v.bottleneck_role, "worker");
  EXPECT_NEAR(v.worker_imbalance, 1.0, 1e-9);
  const std::string advice = Joined(v.advice);
  // 2 x 1/(1 - 0.5) = 4 exactly, give or take a rounding: 4 or 5.
  EXPECT_NE(advice.find("(2 workers on 8 cores on the profiled machine). 2 workers deliver 10.0 "
                        "batches/s, the loop could take 20.0/s"),
            std::string::npos)
      << advice;
}

// A worker the training process forked counts even when no tick saw it in a
// stage (too fast, or idle); a child the launcher forked is not a worker,
// though it carries a fork sequence number as its id too.
TEST(AnalysisRoles, AForkedWorkerWithoutStagesCountsAndALaunchersChildDoesNot) {
  RunBuilder run;
  const uint32_t launcher = run.Add(100, 1, "main", -1, "/bin/launch ./train", 0, 2300);
  const uint32_t helper = run.Add(101, 100, "worker", 5, "/bin/launch ./train", 10, 2250);
  const uint32_t trainer = run.Add(102, 100, "worker", -1, "./train", 20, 2200);
  std::vector<uint32_t> w;
  for (int k = 0; k < 3; ++k) w.push_back(run.Add(110 + k, 102, "worker", k, "./train", 40, 2150));
  run.Wall(helper, 101, "", 10, 2250, false);
  run.Steps(trainer, 102, 20, 100, 100, 50);
  run.InProcess(trainer, 102, 20, 100, 100, 50, "", "forward");
  run.Wall(w[0], 110, "read", 100, 1100, false);
  run.Wall(w[1], 111, "read", 100, 1100, false);
  run.Wall(w[2], 112, "", 100, 1100, false);  // its reads fell between ticks
  Analysis a = Analyze(run.p);

  EXPECT_EQ(a.processes[launcher].role, "other");
  EXPECT_EQ(a.processes[helper].role, "other");
  EXPECT_EQ(a.processes[trainer].role, "main");
  for (uint32_t i : w) EXPECT_EQ(a.processes[i].role, "worker") << i;
  EXPECT_EQ(a.processes[w[2]].role_basis, "worker 2 of the training process");
  EXPECT_EQ(a.workers.concurrent, 3);
  const Verdict& v = a.verdict;
  EXPECT_EQ(v.bottleneck_stage, "read");
  EXPECT_EQ(v.bottleneck_kind, "io");
  EXPECT_EQ(v.bottleneck_role, "worker");
  // Workers 0 and 1 spent 1 s each in 'read', worker 2 none: 1 / 0.5. (With
  // the launcher's child as a fourth worker it would be 1 / 0.33.)
  EXPECT_NEAR(v.worker_imbalance, 2.0, 1e-9);
  EXPECT_EQ(v.slowest_worker, 1);
  const std::string evidence = Joined(v.evidence);
  EXPECT_NE(evidence.find("in 3 worker processes)"), std::string::npos) << evidence;
}

// What summary.json says about roles, every other output says too: pprof's
// `role` label, the trace's process labels, the page's processes. (They were
// each taken from the runtime's record, which calls a launcher "main".)
TEST(AnalysisRoles, EveryWriterLabelsProcessesWithTheDecidedRoles) {
  const LauncherRun l = MakeLauncherRun();
  const Profile& profile = l.run.p;
  const Analysis a = Analyze(profile);
  using nlohmann::json;

  const json summary = json::parse(MakeSummaryJsonWriter()->Render(profile, a));
  ASSERT_EQ(summary["processes"].size(), 4u);
  EXPECT_EQ(summary["processes"][l.launcher]["role"], "other");
  EXPECT_EQ(summary["processes"][l.launcher]["recorded_role"], "main");
  EXPECT_EQ(summary["processes"][l.trainer]["role"], "main");
  EXPECT_EQ(summary["processes"][l.trainer]["role_basis"], "records the training loop's steps");
  EXPECT_EQ(summary["workers"], json({{"concurrent", 0},
                                      {"processes", 0},
                                      {"feeding_analysed_loop", 0},
                                      {"training_processes", 1}}));
  EXPECT_EQ(summary["verdict"]["bottleneck_role"], "main");

  // The page's data: the JSON document in <script id="dlprof-data">.
  const std::string page = MakeHtmlWriter()->Render(profile, a);
  const size_t open = page.find('>', page.find("id=\"dlprof-data\"")) + 1;
  const json data = json::parse(page.substr(open, page.find("</script>", open) - open));
  for (size_t i = 0; i < profile.processes.size(); ++i) {
    EXPECT_EQ(data["processes"][i]["role"], a.processes[i].role) << i;
  }
  EXPECT_EQ(data["workers"]["concurrent"], 0);

  // Trace: each process's labels.
  const json trace = json::parse(MakeTraceWriter()->Render(profile, a));
  std::map<int, std::set<std::string>> labels;  // pid -> "role=..."
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      labels[e["args"]["pid"].get<int>()].insert("role=" + e["args"]["role"].get<std::string>());
    }
  }
  EXPECT_EQ(labels[100], std::set<std::string>{"role=other"});
  EXPECT_EQ(labels[101], (std::set<std::string>{"role=main", "role=other"}));  // trainer, its pre-exec image
  EXPECT_EQ(labels[102], std::set<std::string>{"role=other"});

  // pprof, read back: one process per (pid, role, worker) label set, from
  // the CPU samples and the wall ticks (the launchers have only ticks).
  Profile back;
  ReadPprofBuffer(MakePprofReportWriter()->Render(profile, a), "p.pb", &back);
  ReadPprofBuffer(MakePprofWallReportWriter()->Render(profile, a), "p.wall.pb", &back);
  std::set<std::pair<int, std::string>> roles;
  for (const Process& p : back.processes) roles.insert({p.pid, p.role});
  EXPECT_EQ(roles, (std::set<std::pair<int, std::string>>{{100, "other"}, {101, "main"}, {102, "other"}}));
}

// CPU contention on hand-built runs: a trainer whose steps of 100 ms begin
// with a wait for data of `wait_ms` (blocked) and then compute, and workers
// in 'decode' that never block, each running `cpu_ms` and waiting for a
// core `core_wait_ms` of every 10 ms; `cores` is what the processes record.
struct ContentionRun {
  RunBuilder run;
  uint32_t trainer = 0;
};

ContentionRun MakeContentionRun(int cores, int workers, int64_t wait_ms, int64_t cpu_ms,
                                int64_t core_wait_ms, int64_t loop_cpu_ms, int64_t loop_wait_ms) {
  ContentionRun c;
  RunBuilder& run = c.run;
  c.trainer = run.Add(100, 1, "main", -1, "./train", 0, 2200);
  run.Steps(c.trainer, 100, 20, 100, 100, wait_ms);
  for (int i = 0; i < 20; ++i) {
    const int64_t t = 100 + i * 100;
    run.WallStates(c.trainer, 100, "", t, t + wait_ms, 0, 0);  // blocked in the wait
    run.WallStates(c.trainer, 100, "forward", t + wait_ms, t + 100, loop_cpu_ms, loop_wait_ms);
  }
  for (int k = 0; k < workers; ++k) {
    const uint32_t w = run.Add(200 + k, 100, "worker", k, "./train", 50, 2150);
    run.WallStates(w, static_cast<uint32_t>(200 + k), "decode", 100, 2100, cpu_ms, core_wait_ms);
  }
  for (Process& proc : run.p.processes) {
    proc.fields["cpus"] = std::to_string(cores);
    proc.fields["run_delay"] = "schedstat";
  }
  return c;
}

// 4 workers on 2 cores, each running half of the time and waiting for a
// core the other half; the loop computes the second half of each step at
// half speed. Runnable: 4 + 0.5 threads for 2 cores.
TEST(AnalysisContention, WorkersOutnumberingTheCoresSaturateThem) {
  ContentionRun c = MakeContentionRun(2, 4, 50, 5, 5, 5, 5);
  const Analysis a = Analyze(c.run.p);
  const Verdict& v = a.verdict;
  EXPECT_TRUE(v.cpu_saturated);
  EXPECT_TRUE(a.contention.measured);
  EXPECT_EQ(a.contention.cores, 2);
  EXPECT_NEAR(a.contention.saturated_fraction, 1.0, 1e-9);
  EXPECT_NEAR(a.contention.runnable_threads, 4.5, 0.01);
  EXPECT_EQ(a.contention.busy_threads, 5);  // the workers, and the loop runnable half the time
  // The loop waits for a core 5 ms in each of 5 ticks per 100 ms step.
  EXPECT_NEAR(a.contention.step_cpu_wait_fraction, 0.25, 1e-6);
  // The loop runs on 0.5 cores now and would on 1 without its data wait:
  // it leaves 1 of the 2 cores to the workers.
  EXPECT_EQ(a.contention.free_cores, 1);
  ASSERT_FALSE(a.stages.empty());
  EXPECT_EQ(v.bottleneck_stage, "decode");
  EXPECT_EQ(v.bottleneck_kind, "cpu");
  for (const StageStats& st : a.stages) {
    if (st.name != "decode") continue;
    EXPECT_NEAR(st.cpu_wait_fraction, 0.5, 1e-9);
    EXPECT_NEAR(st.offcpu_fraction, 0, 1e-9);
  }
  const std::string evidence = Joined(v.evidence), advice = Joined(v.advice);
  EXPECT_NE(evidence.find("is on-CPU 50% of it, waiting for a core 50%."), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("The program's runnable threads exceeded its 2 cores 100% of the time: "
                          "4.5 threads wanted a core on average then (5 threads were busy"),
            std::string::npos)
      << evidence;
  EXPECT_NE(evidence.find("The training loop waited for a core 25% of its step time: its steps took "
                          "1.33x as long"),
            std::string::npos)
      << evidence;
  EXPECT_NE(advice.find("(4 workers on 2 cores on the profiled machine). The cores are saturated, so "
                        "more workers would make it worse: use at most 1 worker for the 1 free core"),
            std::string::npos)
      << advice;
  EXPECT_EQ(advice.find("workers deliver"), std::string::npos) << advice;
}

// The same run on 8 cores: nothing waits for a core, nothing is saturated,
// and the arithmetic may ask for more workers, as many as the free cores.
TEST(AnalysisContention, TheSameWorkersOnEnoughCoresDoNotSaturateThem) {
  ContentionRun c = MakeContentionRun(8, 4, 50, 10, 0, 10, 0);
  const Analysis a = Analyze(c.run.p);
  const Verdict& v = a.verdict;
  EXPECT_FALSE(v.cpu_saturated);
  EXPECT_NEAR(a.contention.saturated_fraction, 0, 1e-9);
  EXPECT_NEAR(a.contention.runnable_threads, 4.5, 0.01);
  EXPECT_EQ(a.contention.free_cores, 7);
  const std::string evidence = Joined(v.evidence), advice = Joined(v.advice);
  EXPECT_EQ(evidence.find("exceeded its"), std::string::npos) << evidence;
  EXPECT_EQ(evidence.find("waited for a core"), std::string::npos) << evidence;
  // 4 x 1/(1 - 0.5) = 8 workers wanted, 7 cores free: capped at 7.
  EXPECT_NE(advice.find("4 workers deliver 10.0 batches/s, the loop could take 20.0/s: about 8 workers "
                        "would remove the wait, more than the 7 free cores (the training process "
                        "needs the rest): use 7 workers and make 'decode' 1.1x faster, or run on more "
                        "cores."),
            std::string::npos)
      << advice;
}

// Saturated bins must be a significant share of the run: 4 busy workers for
// the first fifth of the steps only, then one.
TEST(AnalysisContention, ABriefSaturationDoesNotFlagTheRun) {
  ContentionRun c = MakeContentionRun(2, 1, 50, 10, 0, 10, 0);
  for (int k = 1; k < 4; ++k) {
    const uint32_t w = c.run.Add(300 + k, 100, "worker", k, "./train", 50, 2150);
    c.run.p.processes[w].fields = c.run.p.processes[0].fields;
    c.run.WallStates(w, static_cast<uint32_t>(300 + k), "decode", 100, 500, 5, 5);
  }
  const Analysis a = Analyze(c.run.p);
  EXPECT_NEAR(a.contention.saturated_fraction, 0.2, 0.011);
  EXPECT_FALSE(a.verdict.cpu_saturated);
  // Not saturated, the evidence says how long they outnumbered the cores
  // and the whole run's mean: it said "did not outnumber its 2 cores" with
  // the saturated fifth's mean, more than 2 runnable on average.
  const std::string evidence = Joined(a.verdict.evidence);
  const std::string said = "outnumbered its 2 cores only 20% of the time (";
  const size_t at = evidence.find(said);
  ASSERT_NE(at, std::string::npos) << evidence;
  const double mean = std::stod(evidence.substr(at + said.size()));
  EXPECT_NEAR(mean, a.contention.mean_runnable_threads, 0.05) << evidence;
  EXPECT_LT(mean, a.contention.runnable_threads) << evidence;
}

// Waits for a core while the program's own threads do not outnumber the
// cores: another program takes them. Said, but not saturation.
TEST(AnalysisContention, WaitsWithoutSaturationBlameOtherPrograms) {
  ContentionRun c = MakeContentionRun(4, 1, 50, 6, 4, 10, 0);
  const Analysis a = Analyze(c.run.p);
  EXPECT_FALSE(a.verdict.cpu_saturated);
  const std::string evidence = Joined(a.verdict.evidence);
  // 800 ms of the worker's 2 s waited; the loop's 1 s did not: 0.8 / 3.
  EXPECT_NE(evidence.find("waited for a core 27% of their runnable time, though they did not "
                          "outnumber its 4 cores"),
            std::string::npos)
      << evidence;
  EXPECT_NE(evidence.find("other programs on the machine take the cores"), std::string::npos) << evidence;
}

// The advice arithmetic never asks for more workers than the free cores.
// 2 workers on 4 cores, the loop waiting 80% of each step and computing the
// rest: it would take one core without the wait, leaving 3; 2 x 5 = 10
// workers would be wanted.
TEST(AnalysisContention, TheAdviceAsksForNoMoreWorkersThanTheFreeCores) {
  ContentionRun c = MakeContentionRun(4, 2, 80, 10, 0, 10, 0);
  const Analysis a = Analyze(c.run.p);
  EXPECT_FALSE(a.verdict.cpu_saturated);
  EXPECT_EQ(a.contention.free_cores, 3);
  const std::string advice = Joined(a.verdict.advice);
  EXPECT_NE(advice.find("about 10 workers would remove the wait, more than the 3 free cores"),
            std::string::npos)
      << advice;
  EXPECT_NE(advice.find("use 3 workers and make 'decode' 3.3x faster"), std::string::npos) << advice;
  // As many workers as free cores already: none more.
  ContentionRun full = MakeContentionRun(4, 3, 80, 10, 0, 10, 0);
  const std::string full_advice = Joined(Analyze(full.run.p).verdict.advice);
  EXPECT_NE(full_advice.find("more workers would only wait for the 3 free cores"), std::string::npos)
      << full_advice;
  EXPECT_EQ(full_advice.find("about "), std::string::npos) << full_advice;
}

// An I/O-bound stage on saturated cores: overlap reads without more workers.
TEST(AnalysisContention, SaturatedIoAdviceDoesNotAskForWorkers) {
  ContentionRun c = MakeContentionRun(2, 4, 50, 5, 5, 5, 5);
  const uint32_t reader = c.run.Add(400, 100, "worker", 9, "./train", 50, 2150);
  c.run.p.processes[reader].fields = c.run.p.processes[0].fields;
  for (int r = 0; r < 6; ++r) c.run.WallStates(reader, 400 + r, "read", 100, 2100, 0, 0);
  const Analysis a = Analyze(c.run.p);
  EXPECT_TRUE(a.verdict.cpu_saturated);
  EXPECT_EQ(a.verdict.bottleneck_stage, "read");
  EXPECT_EQ(a.verdict.bottleneck_kind, "io");
  const std::string advice = Joined(a.verdict.advice);
  EXPECT_NE(advice.find("the cores are saturated, more workers would wait for them"), std::string::npos)
      << advice;
  EXPECT_EQ(advice.find("more workers or threads"), std::string::npos) << advice;
}

// An I/O stage on a crowded machine: its readers, woken from their reads,
// wait for a core 60% of the time and are blocked 40% (less than half of
// it). The kind is judged on the time not spent waiting for a core: I/O.
TEST(AnalysisContention, AnIoStageWaitingForCoresIsStillIo) {
  ContentionRun c = MakeContentionRun(4, 2, 50, 0, 6, 10, 0);
  const Analysis a = Analyze(c.run.p);
  ASSERT_EQ(a.verdict.bottleneck_stage, "decode");
  for (const StageStats& st : a.stages) {
    if (st.name != "decode") continue;
    EXPECT_NEAR(st.offcpu_fraction, 0.4, 1e-9);
    EXPECT_NEAR(st.cpu_wait_fraction, 0.6, 1e-9);
  }
  EXPECT_EQ(a.verdict.bottleneck_kind, "io");
  // Waiting for a core all the time, never blocked: compute.
  ContentionRun busy = MakeContentionRun(4, 2, 50, 0, 10, 10, 0);
  EXPECT_EQ(Analyze(busy.run.p).verdict.bottleneck_kind, "cpu");
}

}  // namespace
// Only the loop is marked (steps and waits), and it waits 60% of each step.
// The two workers, unmarked, run `cpu_ms` of every 10 ms of the steps and
// are blocked the rest (issue 14, item 4: the verdict weighs their busy
// share).
Analysis UnmarkedWorkersRun(int64_t cpu_ms) {
  RunBuilder run;
  const uint32_t trainer = run.Add(100, 1, "main", -1, "./train", 0, 2200);
  run.Steps(trainer, 100, 20, 100, 100, 60);
  for (int k = 0; k < 2; ++k) {
    const uint32_t w = run.Add(200 + k, 100, "worker", k, "./train", 50, 2150);
    run.WallStates(w, static_cast<uint32_t>(200 + k), "", 100, 2100, cpu_ms, 0);
    // A second thread that sleeps throughout (a queue's feeder): a worker
    // is judged by its busiest thread.
    run.WallStates(w, static_cast<uint32_t>(300 + k), "", 100, 2100, 0, 0);
  }
  // Outside the steps (start-up, shutdown) the workers are idle.
  for (uint32_t w = 1; w <= 2; ++w) run.WallStates(w, 199 + w, "", 2100, 4100, 0, 0);
  return Analyze(run.p);
}

TEST(AnalysisVerdict, UnmarkedBusyWorkersAreTheBottleneck) {
  const Analysis a = UnmarkedWorkersRun(9);
  const Verdict& v = a.verdict;
  EXPECT_TRUE(v.input_bound);
  EXPECT_EQ(v.bottleneck_stage, "");
  EXPECT_EQ(v.bottleneck_role, "worker");
  EXPECT_EQ(v.bottleneck_kind, "cpu");
  const std::string evidence = Joined(v.evidence);
  EXPECT_NE(evidence.find("busy (on a CPU or waiting for one) 90% of their time (worker 0 90%, "
                          "worker 1 90%)"),
            std::string::npos)
      << evidence;
  EXPECT_EQ(Joined(v.advice).find("Mark the pipeline's stages"), std::string::npos);
}

TEST(AnalysisVerdict, UnmarkedIdleWorkersAreNotBlamed) {
  const Analysis a = UnmarkedWorkersRun(2);
  const Verdict& v = a.verdict;
  EXPECT_TRUE(v.input_bound);
  EXPECT_EQ(v.bottleneck_role, "");
  EXPECT_EQ(v.bottleneck_kind, "");
  const std::string evidence = Joined(v.evidence);
  EXPECT_NE(evidence.find("20% of their time"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("blocked or idle"), std::string::npos) << evidence;
  EXPECT_NE(Joined(v.advice).find("Mark the pipeline's stages"), std::string::npos);
}

}  // namespace dlprof
