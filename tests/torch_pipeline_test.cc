// End-to-end tests of a PyTorch training script that knows nothing of dlprof
// (issue 13): examples/torch/train.py, run with Debian's python3 (3.11),
// python3-torch, python3-pil and python3-numpy, which scripts/setup.sh
// installs. A missing interpreter or package fails these tests; nothing here
// skips.
//
// Each scenario puts the bottleneck in one known place and the script
// measures its own ground truth with its own clocks, in the training process:
// the time inside next() on the DataLoader's iterator against the time from
// one next() to the following one, after the same warm-up steps dlprof drops
// ("summary: ... steady_wait_fraction=X ... pid=P"). The run goes through
//   dlprof run -o OUT -r REPORT -- /usr/bin/python3 examples/torch/train.py --scenario S
// (or LD_PRELOAD and `dlprof report`, the README's other way), and the test
// reads REPORT/summary.json as a user would:
// - verdict.data_wait_fraction within 0.05 of the script's own;
// - severity and input_bound; bottleneck_stage ('fetch' for the dataset's
//   item access, 'Mapper(augment)' in the datapipe chain), bottleneck_kind
//   and bottleneck_role;
// - the processes: as many with role worker as the DataLoader has workers,
//   with worker ids 0..n-1 (multiprocessing's resource tracker and the
//   forkserver are not workers), one with role main, and it is the training
//   process (under --launcher, the child, not the launcher);
// - the steps are the training loop's: as many as it ran, less the warm-up;
// - the stages the automatic annotation promises are in the report.
// The script prints the same results (losses, a checksum of every batch)
// with and without profiling.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/analysis.h"
#include "tests/support/files.h"
#include "tests/support/report_agreement.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using nlohmann::json;
using testing::KeepOnFailure;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::RunCommand;
using testing::RunProcess;

const std::string kPython = testing::kDebianPython;
const std::string kLib = DLPROF_LIB_PATH;
const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";
const std::string kTrain = std::string(DLPROF_SOURCE_DIR) + "/examples/torch/train.py";
// dlprof's default, and the script's: both leave out the same first steps.
const int kWarmupSteps = 2;
// The wait fraction from which the verdict says "high".
const double kHighLine = kHighWaitFraction;

std::string Show(const ProcessResult& r) {
  std::ostringstream s;
  s << "exit " << r.exit_code;
  if (r.term_signal != 0) s << ", killed by signal " << r.term_signal;
  s << "\n  stdout: <<" << r.out << ">>\n  stderr: <<" << r.err.substr(0, 6000) << ">>";
  return s.str();
}

// The environment of every Python run: the interpreter's own packages only,
// no .pyc written into the source tree.
std::map<std::string, std::string> PythonEnv() {
  return {{"PYTHONPATH", testing::kUnset},    {"PYTHONHOME", testing::kUnset},
          {"PYTHONSTARTUP", testing::kUnset}, {"PYTHONNOUSERSITE", "1"},
          {"PYTHONDONTWRITEBYTECODE", "1"},   {"DLPROF_WARMUP_STEPS", std::to_string(kWarmupSteps)}};
}

// The script's "summary: k=v k=v ..." line, as a map ({} if none).
std::map<std::string, std::string> SelfSummary(const std::string& out) {
  std::map<std::string, std::string> kv;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("summary: ", 0) != 0) continue;
    kv.clear();
    std::istringstream words(line.substr(9));
    for (std::string w; words >> w;) {
      const size_t eq = w.find('=');
      if (eq != std::string::npos) kv[w.substr(0, eq)] = w.substr(eq + 1);
    }
  }
  return kv;
}

double Num(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  return it == kv.end() ? -1 : std::stod(it->second);
}

std::string Str(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  return it == kv.end() ? "" : it->second;
}

// A JSON value as text: a string's own text, anything else (null, a
// number) as JSON, so that a comparison's failure shows what was there.
std::string Text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// One data set for the tests of this process, made once (each run would
// otherwise make its own). Making it imports torch, PIL and numpy: it is
// also the check that they are installed.
// The folder goes at exit.
const std::string& DataDir() {
  static testing::TempDir tmp;
  static const std::string dir = tmp.File("images");
  static const std::string error = [] {
    ProcessResult r = RunProcess({kPython, kTrain, "--generate-only", "--data-dir", dir}, PythonEnv(), 180);
    if (r.exit_code == 0) return std::string();
    return kPython + " cannot run examples/torch/train.py (it needs python3-torch, python3-pil, "
           "python3-numpy: run scripts/setup.sh)\n" + Show(r);
  }();
  EXPECT_TRUE(error.empty()) << error;
  return dir;
}

struct TrainRun {
  std::string dir;
  ProcessResult proc;                          // the profiled program (through dlprof run, or not)
  ProcessResult report;                        // `dlprof report`, when run separately
  std::map<std::string, std::string> self;     // the script's summary line
  json summary;                                // REPORT/summary.json, null if unreadable
  std::string Where() const { return "(run folder " + dir + ", kept for inspection)"; }
};


void ReadSummary(TrainRun* run) {
  std::ifstream in(run->dir + "/report/summary.json");
  if (in) run->summary = json::parse(in, nullptr, false);
  if (run->summary.is_discarded()) run->summary = json();
  testing::WriteFile(run->dir + "/stdout", run->proc.out);
  testing::WriteFile(run->dir + "/stderr", run->proc.err);
}

std::vector<std::string> TrainArgs(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kPython, kTrain, "--data-dir", DataDir(), "--warmup-steps",
                                   std::to_string(kWarmupSteps)};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// dlprof run -o OUT -r REPORT -- python3 train.py ARGS
TrainRun RunUnderDlprof(const std::vector<std::string>& args) {
  TrainRun run;
  run.dir = MakeTempDir("dlprof-torch");
  std::vector<std::string> argv = {kDlprof, "run", "-o", run.dir + "/out", "-r", run.dir + "/report", "--"};
  for (const std::string& a : TrainArgs(args)) argv.push_back(a);
  run.proc = RunProcess(argv, PythonEnv(), 180);
  ReadSummary(&run);
  run.self = SelfSummary(run.proc.out);
  return run;
}

// DLPROF_SAMPLE=1 LD_PRELOAD=libdlprof.so DLPROF_OUT=OUT python3 train.py ARGS,
// then dlprof report OUT -o REPORT.
TrainRun RunPreloaded(const std::vector<std::string>& args) {
  TrainRun run;
  run.dir = MakeTempDir("dlprof-torch");
  std::map<std::string, std::string> env = PythonEnv();
  env["DLPROF_SAMPLE"] = "1";
  env["LD_PRELOAD"] = testing::PreloadIntoUninstrumented(kLib);
  env["DLPROF_OUT"] = run.dir + "/out";
  run.proc = RunProcess(TrainArgs(args), env, 180);
  run.report = RunProcess({kDlprof, "report", run.dir + "/out", "-o", run.dir + "/report"}, {}, 120);
  ReadSummary(&run);
  run.self = SelfSummary(run.proc.out);
  return run;
}

struct Expected {
  const char* name;
  std::vector<std::string> args;
  int steps;             // the script's steps in all
  const char* severity;  // "high", or "none" (not input-bound)
  const char* stage;     // "" when not input-bound
  const char* kind;
  const char* role;
  int workers;        // the DataLoader's num_workers
  int epochs = 1;     // workers re-forked this many times (not persistent)
  bool launcher = false;
};

void PrintTo(const Expected& e, std::ostream* os) { *os << e.name; }

// The stages of the run's report, by name.
std::set<std::string> StageNames(const json& summary) {
  std::set<std::string> names;
  for (const json& s : summary["stages"]) names.insert(s["name"].get<std::string>());
  return names;
}

// Every check of the verdict and the processes against the script's own
// measurement and what the scenario is known to be.
void CheckRun(const TrainRun& run, const Expected& e) {
  ASSERT_EQ(run.proc.exit_code, 0) << Show(run.proc) << " " << run.Where();
  ASSERT_EQ(Str(run.self, "status"), "ok") << run.proc.out;
  EXPECT_EQ(Num(run.self, "steps"), e.steps) << run.proc.out;
  ASSERT_TRUE(run.summary.is_object())
      << "no readable summary.json " << run.Where() << "\n" << Show(run.proc) << Show(run.report);
  const json& j = run.summary;
  const json& v = j["verdict"];
  SCOPED_TRACE(v.dump(2) + "\n" + run.Where());

  // The training loop's steps, less the warm-up, are the ones the verdict
  // stands on.
  EXPECT_EQ(Text(v["basis"]), "steps");
  EXPECT_EQ(j["steps"]["count"], e.steps - kWarmupSteps);

  // The wait agrees with the script's own clock.
  const double truth = Num(run.self, "steady_wait_fraction");
  ASSERT_GE(truth, 0) << run.proc.out;
  ASSERT_TRUE(v["data_wait_fraction"].is_number()) << j.dump(2);
  const double measured = v["data_wait_fraction"].get<double>();
  EXPECT_NEAR(measured, truth, 0.05) << "the script measured " << truth;

  if (std::string(e.severity) == "none" && truth >= 0.03 && truth < 0.15) {
    // model-bound on a crowded machine: its workers lose CPU to other jobs
    // and the loop really does wait a little. The verdict must then follow
    // what was measured (never "high"), not the scenario's name.
    EXPECT_NE(Text(v["severity"]), "high");
    EXPECT_EQ(Text(v["severity"]), measured >= 0.05 ? "moderate" : "none");
  } else if (std::string(e.severity) == "high" && truth < kHighLine + 0.05) {
    // An input-bound scenario whose own clock put the wait near the 20% line
    // that makes it "high": on a CI machine whose cores run the model slower
    // (its main thread took 0.86 of a core, against 0.5 here) the script
    // measured 0.17-0.20 where this machine measures 0.5-0.6. Within 0.05 of
    // the line the severity follows what dlprof measured (itself within 0.05
    // of the script's, above); the bottleneck must still be the known one.
    // On 2 cores the two workers and the loop contend for the cores, and the
    // model step's wall time varies with it: 20 augment passes measured a
    // wait of 0.25 and 0.83 in two runs of the same mean step, and the
    // launcher variant 0.11 in one suite run. Down to 0.05 above the
    // "moderate" line the scenario still holds (input-bound, the known
    // stage); below that it did not happen, and that fails.
    ASSERT_GE(truth, kModerateWaitFraction + 0.05)
        << "the scenario's own clock says the loop hardly waited:\n" << run.proc.out;
    EXPECT_EQ(Text(v["severity"]), measured >= kHighLine ? "high" : "moderate")
        << "the script measured " << truth;
    EXPECT_EQ(v["input_bound"], true);
    EXPECT_EQ(Text(v["bottleneck_stage"]), e.stage);
    EXPECT_EQ(Text(v["bottleneck_kind"]), e.kind);
    EXPECT_EQ(Text(v["bottleneck_role"]), e.role);
  } else {
    EXPECT_EQ(Text(v["severity"]), e.severity) << "the script measured " << truth;
    EXPECT_EQ(v["input_bound"], std::string(e.severity) != "none");
    EXPECT_EQ(Text(v["bottleneck_stage"]), e.stage);
    EXPECT_EQ(Text(v["bottleneck_kind"]), e.kind);
    EXPECT_EQ(Text(v["bottleneck_role"]), e.role);
  }

  // The function to blame inside the bottleneck: every cpu-bound scenario's
  // known cost is augment_image's rotations and blurs (examples/torch/
  // dataset.py), with __getitem__ around it when the stage holds more than
  // the augmentation (the in-process loader's). An io-bound stage's blocked
  // time has no stack yet (issue 14, item 3): whatever is listed is a
  // function, never a frame dlprof made up.
  if (std::string(e.kind) == "cpu" && Text(v["bottleneck_kind"]) == "cpu") {
    const json& fs = v["bottleneck_functions"];
    ASSERT_TRUE(fs.is_array() && !fs.empty()) << "no bottleneck_functions";
    const std::string first_file = Text(fs[0]["file"]);
    EXPECT_NE(first_file.find("examples/torch/dataset.py"), std::string::npos)
        << "the first function is not the dataset's own: " << fs.dump();
    double augment = 0;
    for (const json& f : fs) {
      if (Text(f["name"]) == "augment_image") augment = f["share"].get<double>();
    }
    EXPECT_GE(augment, 0.5) << fs.dump();
  }
  for (const json& f : v["bottleneck_functions"]) {
    EXPECT_NE(Text(f["name"]).rfind('[', 0), 0u) << "a made-up frame: " << f.dump();
  }

  // The processes: the training process is the one main; the DataLoader's
  // workers, and only they, are workers.
  const int trainer = static_cast<int>(Num(run.self, "pid"));
  std::map<int, int> per_worker_id;  // worker id -> processes with it
  int workers = 0, mains = 0;
  bool found_trainer = false;
  std::ostringstream procs;
  for (const json& p : j["processes"]) {
    procs << "  pid " << p["pid"] << " role " << p["role"] << " worker " << p["worker"] << ": "
          << p["command"].get<std::string>().substr(0, 100) << "\n";
    if (p["role"] == "worker") {
      ++workers;
      ++per_worker_id[p["worker"].get<int>()];
    }
    if (p["role"] == "main") ++mains;
    if (p["pid"] == trainer) {
      found_trainer = true;
      EXPECT_EQ(Text(p["role"]), "main") << "the training process (pid " << trainer << ") is not main";
    }
  }
  SCOPED_TRACE("processes:\n" + procs.str());
  EXPECT_EQ(workers, e.workers * e.epochs);
  for (int id = 0; id < e.workers; ++id) {
    EXPECT_EQ(per_worker_id[id], e.epochs) << "worker id " << id;
  }
  EXPECT_EQ(per_worker_id.size(), static_cast<size_t>(e.workers)) << "worker ids other than 0..n-1";
  EXPECT_EQ(mains, 1);
  EXPECT_TRUE(found_trainer) << "the training process (pid " << trainer << ") is not in the report";

  // Advice that counts workers counts the DataLoader's concurrent ones, not
  // the processes of every epoch ("2 workers deliver ...").
  if (e.workers > 0) {
    const std::regex counted(R"((\d+) workers (on|deliver))");
    for (const json& a : v["advice"]) {
      const std::string text = a.get<std::string>();
      for (std::sregex_iterator m(text.begin(), text.end(), counted), end; m != end; ++m) {
        EXPECT_EQ(std::stoi((*m)[1]), e.workers) << "advice: " << text;
      }
    }
  }

  // The stages the automatic annotation promises, those with time enough to
  // be sampled for sure (collate and the datapipe's read take under 1 ms a
  // batch here: a wall tick may never land in them).
  const std::set<std::string> stages = StageNames(j);
  std::vector<std::string> wanted = {"fetch"};
  if (std::string(e.stage).rfind("Mapper(", 0) == 0) wanted = {"Mapper(decode_jpeg)", "Mapper(augment)"};
  for (const std::string& name : wanted) {
    EXPECT_TRUE(stages.count(name)) << "no stage '" << name << "' in the report";
  }

  // Every figure the report gives twice is the same (summary.json, .txt,
  // report.html, stacks.folded, profile.pb.gz, trace.json).
  testing::ExpectReportAgrees(testing::ReadReportFolder(run.dir + "/report"), std::string(e.stage) != "");
}

class TorchPipeline : public ::testing::TestWithParam<Expected> {};

TEST_P(TorchPipeline, NamesTheKnownBottleneckUnderDlprofRun) {
  const Expected& e = GetParam();
  TrainRun run = RunUnderDlprof(e.args);
  KeepOnFailure keep(run.dir);
  CheckRun(run, e);
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, TorchPipeline,
    ::testing::Values(
        Expected{"augment_bound", {"--scenario", "augment-bound"}, 30, "high", "fetch", "cpu", "worker", 2},
        Expected{"io_bound", {"--scenario", "io-bound"}, 30, "high", "fetch", "io", "worker", 2},
        Expected{"model_bound", {"--scenario", "model-bound"}, 16, "none", "", "", "", 2},
        Expected{"datapipe", {"--scenario", "datapipe"}, 30, "high", "Mapper(augment)", "cpu", "worker", 2},
        Expected{"spawn", {"--scenario", "spawn"}, 30, "high", "fetch", "cpu", "worker", 2},
        Expected{"forkserver", {"--scenario", "forkserver"}, 30, "high", "fetch", "cpu", "worker", 2},
        Expected{"persistent", {"--scenario", "persistent"}, 36, "high", "fetch", "cpu", "worker", 2},
        // The same three epochs with workers forked anew for each.
        Expected{"reforked_each_epoch",
                 {"--scenario", "augment-bound", "--epochs", "3", "--steps", "36"},
                 36, "high", "fetch", "cpu", "worker", 2, 3},
        Expected{"in_process", {"--scenario", "in-process"}, 30, "high", "fetch", "cpu", "main", 0},
        // train.py runs the training in a child and waits for it, as torchrun
        // does: the child is the training process.
        Expected{"launcher_in_process", {"--launcher", "--scenario", "in-process"},
                 30, "high", "fetch", "cpu", "main", 0, 1, true},
        // More augmentation than augment-bound's 14 passes: with the launcher
        // between, the loop's own wait came out at 0.11 and 0.08 in two
        // suite runs, at the edge of what the scenario must show (0.10).
        Expected{"launcher_workers",
                 {"--launcher", "--scenario", "augment-bound", "--augment-passes", "20"},
                 30, "high", "fetch", "cpu", "worker", 2, 1, true}),
    [](const ::testing::TestParamInfo<Expected>& info) { return std::string(info.param.name); });

// Issue 14, item 4: a pipeline whose loop alone is marked (steps and waits
// by hand with `import dlprof`, the automatic annotations off): no stage
// to blame, yet the verdict names the function the workers spend their CPU
// in, the scenario's known cost (augment_image's rotations and blurs).
TEST(TorchPipelineUnmarked, OnlyTheLoopMarkedStillNamesTheWorkersCulprit) {
  TrainRun run;
  run.dir = MakeTempDir("dlprof-torch");
  KeepOnFailure keep(run.dir);
  std::map<std::string, std::string> env = PythonEnv();
  env["DLPROF_AUTO_ANNOTATE"] = "0";
  env["PYTHONPATH"] = std::string(DLPROF_BUILD_DIR) + "/python";  // `import dlprof`
  std::vector<std::string> argv = {kDlprof, "run", "-o", run.dir + "/out", "-r", run.dir + "/report", "--"};
  for (const std::string& a : TrainArgs({"--scenario", "augment-bound", "--mark-loop"})) argv.push_back(a);
  run.proc = RunProcess(argv, env, 180);
  ReadSummary(&run);
  run.self = SelfSummary(run.proc.out);
  ASSERT_EQ(run.proc.exit_code, 0) << Show(run.proc) << " " << run.Where();
  ASSERT_TRUE(run.summary.is_object()) << "no readable summary.json " << run.Where();
  const json& v = run.summary["verdict"];
  SCOPED_TRACE(v.dump(2) + "\n" + run.Where());
  EXPECT_TRUE(StageNames(run.summary).empty()) << "a stage was marked after all";
  EXPECT_EQ(v["input_bound"], true);
  EXPECT_EQ(Text(v["bottleneck_stage"]), "");
  // The workers, busy augmenting, are what the loop waits for (issue 14,
  // item 4): their busy share is weighed, not only their functions named.
  EXPECT_EQ(Text(v["bottleneck_role"]), "worker");
  EXPECT_EQ(Text(v["bottleneck_kind"]), "cpu");
  EXPECT_NE(v["evidence"].dump().find("the worker processes were busy"), std::string::npos);
  EXPECT_NEAR(v["data_wait_fraction"].get<double>(), Num(run.self, "steady_wait_fraction"), 0.05);
  const json& fs = v["bottleneck_functions"];
  ASSERT_TRUE(fs.is_array() && !fs.empty());
  EXPECT_EQ(Text(fs[0]["name"]), "augment_image") << fs.dump();
  EXPECT_NE(Text(fs[0]["file"]).find("examples/torch/dataset.py"), std::string::npos);
  EXPECT_GE(fs[0]["share"].get<double>(), 0.5);
}

// Every "summary:" line of the output (one per DDP rank), by its pid.
std::map<int, std::map<std::string, std::string>> SelfSummaries(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> by_pid;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("summary: ", 0) != 0) continue;
    std::map<std::string, std::string> kv = SelfSummary(line);
    by_pid[static_cast<int>(Num(kv, "pid"))] = kv;
  }
  return by_pid;
}

// Data-parallel training, as users run it under a launcher: train.py
// --ranks 2 starts two DistributedDataParallel ranks over gloo with
// torch.multiprocessing.spawn, each with its own DataLoader of one worker
// (worker id 0 in both). Each rank is a training process with its own
// worker; the ranks step together, and the verdict is about the rank that
// waited most for data (the other waits for it in its all-reduce), whose own
// clock it must agree with; the function to blame is still augment_image.
TEST(TorchPipelineDdp, EachRankIsATrainingProcessWithItsOwnWorkers) {
  const int steps = 14;
  TrainRun run = RunUnderDlprof({"--scenario", "augment-bound", "--ranks", "2", "--workers", "1",
                                 "--steps", std::to_string(steps)});
  KeepOnFailure keep(run.dir);
  ASSERT_EQ(run.proc.exit_code, 0) << Show(run.proc) << " " << run.Where();
  const auto ranks = SelfSummaries(run.proc.out);
  ASSERT_EQ(ranks.size(), 2u) << run.proc.out;
  int waits_most = 0;
  for (const auto& [pid, self] : ranks) {
    EXPECT_EQ(Str(self, "status"), "ok") << run.proc.out;
    EXPECT_EQ(Num(self, "steps"), steps) << run.proc.out;
    if (waits_most == 0 ||
        Num(self, "steady_wait_fraction") > Num(ranks.at(waits_most), "steady_wait_fraction")) {
      waits_most = pid;
    }
  }
  ASSERT_TRUE(run.summary.is_object()) << "no readable summary.json " << run.Where() << "\n" << Show(run.proc);
  const json& j = run.summary;
  const json& v = j["verdict"];
  SCOPED_TRACE(v.dump(2) + "\n" + run.Where() + "\n" + run.proc.out);

  // Both ranks, and only they, are training processes; each has worker 0.
  std::set<int> mains;
  std::map<int, int> worker_parents;  // worker's parent pid -> workers under it
  for (const json& p : j["processes"]) {
    if (p["role"] == "main") mains.insert(p["pid"].get<int>());
    if (p["role"] == "worker") {
      EXPECT_EQ(p["worker"], 0) << p.dump();
      ++worker_parents[p["ppid"].get<int>()];
    }
  }
  EXPECT_EQ(mains, (std::set<int>{ranks.begin()->first, ranks.rbegin()->first}));
  EXPECT_EQ(worker_parents, (std::map<int, int>{{ranks.begin()->first, 1}, {ranks.rbegin()->first, 1}}));
  EXPECT_EQ(j["workers"], json({{"concurrent", 2},
                                {"processes", 2},
                                {"feeding_analysed_loop", 1},
                                {"training_processes", 2}}));

  // The analysed loop is a rank's, its wait that rank's own. Which rank
  // waited most is the script's word when the two differ clearly (on 2
  // cores they have differed by 0.1 to 0.7).
  const int analysed = j["steps"]["pid"].get<int>();
  ASSERT_TRUE(ranks.count(analysed)) << "steps.pid " << analysed << " is no rank";
  EXPECT_EQ(j["steps"]["count"], steps - kWarmupSteps);
  const double truth = Num(ranks.at(analysed), "steady_wait_fraction");
  EXPECT_NEAR(v["data_wait_fraction"].get<double>(), truth, 0.05) << "rank pid " << analysed;
  const double other = Num(ranks.at(analysed == ranks.begin()->first ? ranks.rbegin()->first
                                                                     : ranks.begin()->first),
                           "steady_wait_fraction");
  if (std::abs(truth - other) > 0.1) {
    EXPECT_EQ(analysed, waits_most);
  }

  // The workers' cost is named with the dataset's own function.
  EXPECT_EQ(Text(v["bottleneck_stage"]), "fetch");
  EXPECT_EQ(Text(v["bottleneck_role"]), "worker");
  const json& fs = v["bottleneck_functions"];
  ASSERT_TRUE(fs.is_array() && !fs.empty()) << "no bottleneck_functions";
  EXPECT_EQ(Text(fs[0]["name"]), "augment_image") << fs.dump();
  EXPECT_NE(Text(fs[0]["file"]).find("examples/torch/dataset.py"), std::string::npos) << fs.dump();
  // Advice counts the analysed rank's one worker.
  const std::regex counted(R"((\d+) workers? (per|on|deliver))");
  for (const json& a : v["advice"]) {
    const std::string text = a.get<std::string>();
    for (std::sregex_iterator m(text.begin(), text.end(), counted), end; m != end; ++m) {
      EXPECT_EQ(std::stoi((*m)[1]), 1) << "advice: " << text;
    }
  }
  testing::ExpectReportAgrees(testing::ReadReportFolder(run.dir + "/report"), true);
}

// The README's other way: DLPROF_SAMPLE=1 LD_PRELOAD=libdlprof.so, then
// `dlprof report`. The script prints the same results as without profiling:
// the same steps, losses and checksum of every batch it trained on.
TEST(TorchPipelinePreload, SameResultsAsUnprofiledAndTheKnownBottleneck) {
  // 20 augment passes, as for the launcher run: with the scenario's 14 the
  // script's own clock measured a wait of 0.094 in one CI run, under the
  // 0.10 this test needs to be about an input-bound loop at all.
  const std::vector<std::string> args = {"--scenario", "augment-bound", "--augment-passes", "20"};
  ProcessResult plain = RunProcess(TrainArgs(args), PythonEnv(), 180);
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  const auto plain_self = SelfSummary(plain.out);
  ASSERT_EQ(Str(plain_self, "status"), "ok") << plain.out;

  TrainRun run = RunPreloaded(args);
  KeepOnFailure keep(run.dir);
  ASSERT_EQ(run.report.exit_code, 0) << Show(run.report) << " " << run.Where();
  for (const char* key : {"steps", "first_loss", "last_loss", "data_checksum", "status"}) {
    EXPECT_EQ(Str(run.self, key), Str(plain_self, key)) << key << "\n" << plain.out << "\n" << run.proc.out;
  }
  EXPECT_FALSE(Str(plain_self, "data_checksum").empty());
  CheckRun(run, Expected{"preload", args, 30, "high", "fetch", "cpu", "worker", 2});
}

}  // namespace
}  // namespace dlprof
