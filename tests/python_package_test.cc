// The Python package (python/dlprof) and the automatic annotations of
// torch.utils.data (issue 13), end to end with Debian's python3 and
// python3-torch: real scripts from tests/python/, unprofiled and profiled,
// their .dlprof files read back and compared with what the scripts measured
// with their own clocks.
//
// - package_api.py uses the whole API; unprofiled every call is a no-op,
//   profiled the stages' CPU shares, the steps and waits, the buffer's
//   statistics and the worker id come out as the script measured them.
// - bootstrap_env.py prints what a program sees of its environment: with
//   dlprof it must be the same as without (PYTHONPATH, os.environ, sys.path,
//   sitecustomize), also with -E, -I, -S and a sitecustomize of the user's.
// - torch_annotations.py never imports dlprof: its DataLoader's stages
//   (fetch, collate, datapipes), steps, waits and worker ids appear anyway,
//   with fork, spawn and forkserver workers and with num_workers=0.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "readers/dlprof_reader.h"
#include "tests/support/files.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using nlohmann::json;
using testing::kUnset;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::RunCommand;
using testing::RunProcess;

const std::string kPython = testing::kDebianPython;
const std::string kLib = DLPROF_LIB_PATH;
const std::string kPackageDir = std::string(DLPROF_BUILD_DIR) + "/python";
const std::string kBootstrap = kPackageDir + "/dlprof/_bootstrap";

std::string Script(const std::string& name) {
  return std::string(DLPROF_SOURCE_DIR) + "/tests/python/" + name;
}

std::string Show(const ProcessResult& r) {
  std::ostringstream s;
  s << "exit " << r.exit_code << " signal " << r.term_signal << "\n  stdout: <<" << r.out
    << ">>\n  stderr: <<" << r.err.substr(0, 4000) << ">>";
  return s.str();
}

struct PyRun {
  ProcessResult result;
  Profile profile;
  json out;  // the script's last stdout line, parsed
};

json LastJsonLine(const std::string& out) {
  std::string line;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l[0] == '{') line = l;
  }
  return line.empty() ? json() : json::parse(line, nullptr, false);
}

// Runs python3 ARGS; profiled: DLPROF_SAMPLE=1 LD_PRELOAD=libdlprof.so, the
// .dlprof files read back.
PyRun RunPython(const std::vector<std::string>& args, bool profiled,
              std::map<std::string, std::string> env = {}) {
  PyRun run;
  std::string dir;
  if (profiled) {
    dir = MakeTempDir("dlprof-pypkg");
    env.emplace("DLPROF_SAMPLE", "1");
    env.emplace("DLPROF_OUT", dir);
    env.emplace("LD_PRELOAD", testing::PreloadIntoUninstrumented(kLib));
  } else {
    env.emplace("DLPROF_SAMPLE", kUnset);
    env.emplace("LD_PRELOAD", kUnset);
  }
  std::vector<std::string> argv = {kPython};
  argv.insert(argv.end(), args.begin(), args.end());
  run.result = RunProcess(argv, env, 120);
  run.out = LastJsonLine(run.result.out);
  if (profiled) {
    std::string error;
    for (const std::string& f : ListRunFiles(dir, &error)) {
      EXPECT_TRUE(ReadDlprofFile(f, &run.profile, &error)) << f << ": " << error;
    }
  }
  return run;
}

std::string PathName(const Profile& p, uint32_t path) {
  std::string out;
  for (uint32_t id : p.stage_paths[path]) out += (out.empty() ? "" : "/") + p.stages[id];
  return out;
}

// CPU samples per stage path ("fetch/user_decode"), for processes matching `keep`.
template <typename Keep>
std::map<std::string, int64_t> CpuByPath(const Profile& p, Keep keep) {
  std::map<std::string, int64_t> out;
  for (const Sample& s : p.samples) {
    if (s.kind == SampleKind::kCpu && keep(p.processes[s.process])) {
      out[PathName(p, s.stage_path)] += s.count;
    }
  }
  return out;
}

int CountIntervals(const Profile& p, IntervalKind kind, int process) {
  int n = 0;
  for (const Interval& i : p.intervals) n += i.kind == kind && static_cast<int>(i.process) == process;
  return n;
}

int MainProcess(const Profile& p) {
  for (size_t i = 0; i < p.processes.size(); ++i) {
    if (p.processes[i].role == "main") return static_cast<int>(i);
  }
  return -1;
}

// --- The API -----------------------------------------------------------------

TEST(PythonPackage, EveryCallIsANoOpUnprofiled) {
  PyRun run = RunPython({Script("package_api.py"), "10"}, false, {{"PYTHONPATH", kPackageDir}});
  ASSERT_EQ(run.result.exit_code, 0) << Show(run.result);
  ASSERT_TRUE(run.out.is_object()) << Show(run.result);
  EXPECT_EQ(run.out["enabled"], false);
  EXPECT_TRUE(run.out["stats"].is_null());
  EXPECT_EQ(run.out["flushed"], false);
  EXPECT_EQ(run.out["steps"], 10);
  EXPECT_EQ(run.out["child_status"], 0);
  EXPECT_EQ(run.out["bad_name"], "stage name must be a str, not int");
  EXPECT_EQ(run.result.err, "");
}

TEST(PythonPackage, StagesStepsBuffersAndWorkerAreWhatTheProgramDid) {
  constexpr int kSteps = 60;
  // With the frame-pointer unwinder: with libunwind a sample in a Python
  // thread costs ~150 us (issue 12), and at 1000 Hz the stage shares then
  // drift by up to 10 points between adjacent stages (measured: decode 223
  // samples for 180 ms, augment 227 for 301 ms; probably ticks that fall while
  // the handler runs are lost, more where the stack is deeper): a defect of
  // the unwinder's cost, in issue 12's note, not of the API tested here.
  PyRun run = RunPython({Script("package_api.py"), std::to_string(kSteps)}, true,
                        {{"DLPROF_HZ", "1000"}, {"DLPROF_BACKEND", "fp"}, {"PYTHONPATH", kPackageDir}});
  ASSERT_EQ(run.result.exit_code, 0) << Show(run.result);
  ASSERT_TRUE(run.out.is_object()) << Show(run.result);
  EXPECT_EQ(run.out["enabled"], true);
  EXPECT_EQ(run.out["flushed"], true);
  const Profile& p = run.profile;
  const int main = MainProcess(p);
  ASSERT_GE(main, 0);
  // CPU shares of the main process by stage path against thread_time(),
  // among the three stages (the samples outside any stage also hold the
  // interpreter's start-up, which the script's clocks do not see).
  auto cpu = CpuByPath(p, [&](const Process& proc) { return &proc == &p.processes[main]; });
  const json& truth = run.out["cpu"];
  const double truth_total =
      truth["decode"].get<double>() + truth["augment"].get<double>() + truth["inner"].get<double>();
  const double samples = cpu["decode"] + cpu["augment"] + cpu["outer/inner"];
  ASSERT_GT(samples, 250) << "too few samples to compare";
  for (const auto& [path, key] : std::map<std::string, std::string>{
           {"decode", "decode"}, {"augment", "augment"}, {"outer/inner", "inner"}}) {
    // (Under ASan the handler takes a sample's time in uneven slices.)
    // 0.08: at a load of 3 on 2 cores one CI run had augment 6.7 points low
    // (the drift above, smaller with frame pointers but not gone).
    EXPECT_NEAR(cpu[path] / samples, truth[key].get<double>() / truth_total,
                testing::kUnderSanitizer ? 0.12 : 0.08)
        << path;
  }
  EXPECT_EQ(cpu["inner"], 0) << "inner is recorded inside outer";
  // One step and one wait per iteration, each as long as its burn at least.
  EXPECT_EQ(CountIntervals(p, IntervalKind::kStep, main), kSteps);
  EXPECT_EQ(CountIntervals(p, IntervalKind::kWait, main), kSteps);
  for (const Interval& i : p.intervals) {
    if (static_cast<int>(i.process) != main) continue;
    if (i.kind == IntervalKind::kWait) {
      EXPECT_GE(i.end_ns - i.begin_ns, 1900000);
    } else if (i.kind == IntervalKind::kStep) {
      EXPECT_GE(i.end_ns - i.begin_ns, 10500000);
    }
  }
  // The buffer: empty the first half of the run, full the second.
  const json& stats = run.out["stats"];
  ASSERT_TRUE(stats.is_object()) << Show(run.result);
  const double empty = run.out["empty_fraction"].get<double>();
  EXPECT_EQ(stats["capacity"], 8);
  EXPECT_NEAR(stats["empty_fraction"].get<double>(), empty, 0.1);
  EXPECT_NEAR(stats["full_fraction"].get<double>(), 1 - empty, 0.1);
  EXPECT_NEAR(stats["mean_occupancy"].get<double>(), 1 - empty, 0.1);
  bool buffer_in_profile = false;
  for (const BufferSeries& b : p.buffers) buffer_in_profile |= b.name == "prefetch" && b.capacity == 8;
  EXPECT_TRUE(buffer_in_profile);
  // The forked child declared itself worker 3 and burned 200 ms in "child".
  int child = -1;
  for (size_t i = 0; i < p.processes.size(); ++i) {
    if (p.processes[i].worker == 3) child = static_cast<int>(i);
  }
  ASSERT_GE(child, 0) << "no process with worker id 3";
  EXPECT_EQ(p.processes[child].role, "worker");
  auto child_cpu = CpuByPath(p, [&](const Process& proc) { return &proc == &p.processes[child]; });
  EXPECT_GT(child_cpu["child"], 120);
}

// --- The bootstrap leaves no trace ---------------------------------------------

TEST(PythonBootstrap, ProgramSeesTheEnvironmentItWouldSeeWithoutDlprof) {
  const std::string user_site = MakeTempDir("dlprof-usersite");
  {
    std::ofstream f(user_site + "/sitecustomize.py");
    f << "import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = os.environ.get('USER_SITECUSTOMIZE_RAN', '') + '1'\n";
  }
  struct Case {
    std::string pythonpath;  // kUnset: not set
    std::vector<std::string> flags;
    bool annotated;  // dlprof imported when profiled
  };
  const std::vector<Case> cases = {
      {kUnset, {}, true},         {"/x:/y", {}, true},      {"", {}, true},
      {user_site, {}, true},      {"/x", {"-E"}, false},    {"/x", {"-I"}, false},
      {user_site, {"-S"}, false}, {"/x", {"-X", "dev", "-SE"}, false},
      {"/x", {"--check-hash-based-pycs", "always", "-E"}, false},
      // The bootstrap's own folder, put there by the user: left as it is.
      {kBootstrap, {}, true},     {kBootstrap + ":/x", {}, true},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.flags;
    args.push_back(Script("bootstrap_env.py"));
    std::map<std::string, std::string> env = {{"PYTHONPATH", c.pythonpath}};
    PyRun plain = RunPython(args, false, env);
    PyRun profiled = RunPython(args, true, env);
    const std::string what = "PYTHONPATH='" + c.pythonpath + "' flags " + std::to_string(c.flags.size());
    ASSERT_EQ(plain.result.exit_code, 0) << what << Show(plain.result);
    ASSERT_EQ(profiled.result.exit_code, 0) << what << Show(profiled.result);
    ASSERT_TRUE(profiled.out.is_object()) << what << Show(profiled.result);
    for (const char* key :
         {"PYTHONPATH", "environ", "sys_path", "sitecustomize", "user_site_marker", "dlprof_module"}) {
      EXPECT_EQ(profiled.out[key], plain.out[key]) << what << ": " << key;
    }
    EXPECT_EQ(profiled.out["dlprof_imported"], c.annotated) << what;
    EXPECT_EQ(plain.out["dlprof_imported"], false) << what;
    EXPECT_EQ(profiled.result.err, plain.result.err) << what;
    const std::string state = profiled.profile.processes.empty()
                                  ? "no profile"
                                  : profiled.profile.processes[0].fields["python_annotations"];
    EXPECT_EQ(state.rfind(c.annotated ? "on" : "off: python runs without", 0), 0u) << what << ": " << state;
  }
}

// A module of the program's own called dlprof stays the program's: dlprof's
// bootstrap imports its package under a private name.
TEST(PythonBootstrap, AProgramsOwnDlprofModuleIsTheOneItImports) {
  const std::string dir = MakeTempDir("dlprof-owndl");
  {
    std::ofstream f(dir + "/dlprof.py");
    f << "MINE = True\n";
  }
  const std::vector<std::string> args = {"-c", "import dlprof; print(dlprof.__file__, dlprof.MINE)"};
  PyRun plain = RunPython(args, false, {{"PYTHONPATH", dir}});
  PyRun profiled = RunPython(args, true, {{"PYTHONPATH", dir}});
  EXPECT_EQ(plain.result.out, dir + "/dlprof.py True\n") << Show(plain.result);
  EXPECT_EQ(profiled.result.out, plain.result.out) << Show(profiled.result);
}

TEST(PythonBootstrap, AutoAnnotateCanBeTurnedOffAndABadValueWarnsOnce) {
  PyRun off = RunPython({Script("bootstrap_env.py")}, true, {{"DLPROF_AUTO_ANNOTATE", "0"}});
  ASSERT_EQ(off.result.exit_code, 0) << Show(off.result);
  EXPECT_EQ(off.out["dlprof_imported"], false);
  ASSERT_FALSE(off.profile.processes.empty());
  EXPECT_EQ(off.profile.processes[0].fields["python_annotations"], "off: DLPROF_AUTO_ANNOTATE=0");
  PyRun bad = RunPython({Script("bootstrap_env.py")}, true, {{"DLPROF_AUTO_ANNOTATE", "maybe"}});
  ASSERT_EQ(bad.result.exit_code, 0) << Show(bad.result);
  EXPECT_EQ(bad.out["dlprof_imported"], true);
  EXPECT_EQ(bad.result.err,
            "dlprof: DLPROF_AUTO_ANNOTATE='maybe' is invalid (expected 1 or 0); using 1\n");
}

TEST(PythonPackage, PipInstallsItIntoAVirtualenv) {
  const std::string tmp = MakeTempDir("dlprof-pip");
  int status = 0;
  // A copy: pip builds in the source folder and leaves build/ and egg-info there.
  std::string log = RunCommand("cp -r '" + std::string(DLPROF_SOURCE_DIR) + "/python' '" + tmp +
                                   "/src' && " + kPython + " -m venv --system-site-packages '" + tmp +
                                   "/venv' && '" + tmp +
                                   "/venv/bin/pip' install -q --no-build-isolation --no-deps --no-index '" +
                                   tmp + "/src' 2>&1",
                               &status);
  ASSERT_EQ(status, 0) << log;
  const std::string venv_python = tmp + "/venv/bin/python";
  const std::string probe =
      "import dlprof, dlprof._native as n; print(dlprof.enabled(), n.__file__.startswith('" + tmp +
      "/venv/'))";
  ProcessResult plain = RunProcess({venv_python, "-c", probe}, {{"DLPROF_SAMPLE", kUnset}});
  EXPECT_EQ(plain.out, "False True\n") << Show(plain);
  ProcessResult profiled = RunProcess(
      {venv_python, "-c", "import dlprof; print(dlprof.enabled())"},
      {{"DLPROF_SAMPLE", "1"}, {"DLPROF_OUT", tmp + "/out"},
       {"LD_PRELOAD", testing::PreloadIntoUninstrumented(kLib)}});
  EXPECT_EQ(profiled.out, "True\n") << Show(profiled);
}

// --- torch.utils.data, unannotated -------------------------------------------------

struct TorchRun {
  PyRun run;
  std::vector<int> workers;  // process indexes of the data workers
  int main = -1;
};

// Profiled; with `compare`, also unprofiled, and the two outputs must agree
// (spawned workers import torch again: each such run costs seconds).
TorchRun RunTorch(const std::vector<std::string>& args, bool compare = true,
                  std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {Script("torch_annotations.py")};
  argv.insert(argv.end(), args.begin(), args.end());
  TorchRun t;
  env.emplace("DLPROF_HZ", "1000");
  t.run = RunPython(argv, true, env);
  EXPECT_EQ(t.run.result.exit_code, 0) << Show(t.run.result);
  if (compare) {
    PyRun unprofiled = RunPython(argv, false);
    EXPECT_EQ(unprofiled.result.exit_code, 0) << Show(unprofiled.result);
    EXPECT_EQ(t.run.result.out, unprofiled.result.out) << "the program's output changed";
  }
  EXPECT_EQ(t.run.out["batches_per_epoch"], json::parse("[8, 8]"));
  const Profile& p = t.run.profile;
  t.main = MainProcess(p);
  for (size_t i = 0; i < p.processes.size(); ++i) {
    if (p.processes[i].worker >= 0) t.workers.push_back(static_cast<int>(i));
  }
  return t;
}

std::set<int> WorkerIds(const TorchRun& t) {
  std::set<int> ids;
  for (int i : t.workers) ids.insert(t.run.profile.processes[i].worker);
  return ids;
}

void ExpectLoopSteps(const TorchRun& t) {
  // 8 batches an epoch, 2 epochs: a step from each __next__ to the next, and
  // none for the __next__ that ends an epoch.
  ASSERT_GE(t.main, 0);
  EXPECT_EQ(CountIntervals(t.run.profile, IntervalKind::kStep, t.main), 16);
  EXPECT_EQ(CountIntervals(t.run.profile, IntervalKind::kWait, t.main), 16);
}

// Tracebacks, exception texts, warnings' file:line, datapipe iterators and
// introspection of the patched functions: the same text with and without
// dlprof (its wrappers are C calls, which make no Python frame).
TEST(TorchAnnotations, TheProgramSeesNoDifference) {
  PyRun plain = RunPython({Script("torch_fidelity.py")}, false);
  PyRun profiled = RunPython({Script("torch_fidelity.py")}, true);
  ASSERT_EQ(plain.result.exit_code, 0) << Show(plain.result);
  EXPECT_EQ(profiled.result.exit_code, 0) << Show(profiled.result);
  EXPECT_NE(plain.result.out.find("worker exception Caught ValueError"), std::string::npos)
      << plain.result.out;
  EXPECT_EQ(profiled.result.out, plain.result.out);
  EXPECT_EQ(profiled.result.err, plain.result.err);
  ASSERT_FALSE(profiled.profile.processes.empty());
  EXPECT_EQ(profiled.profile.processes[0].fields["python_annotations"], "on");
}

TEST(TorchAnnotations, MapDatasetWithForkedWorkers) {
  TorchRun t = RunTorch({"map", "2", "fork"});
  const Profile& p = t.run.profile;
  ExpectLoopSteps(t);
  EXPECT_EQ(WorkerIds(t), (std::set<int>{0, 1}));
  EXPECT_EQ(t.workers.size(), 4u) << "2 workers forked in each of 2 epochs";
  auto cpu = CpuByPath(p, [](const Process& proc) { return proc.worker >= 0; });
  // The user's own stage nests inside fetch; collate is fetch's sibling.
  const double decode = cpu["fetch/user_decode"], collate = cpu["collate"];
  ASSERT_GT(decode + collate, 150) << "too few worker samples";
  EXPECT_EQ(cpu["fetch/collate"], 0);
  // 8 items x 2 ms in user_decode against 3 ms of collate per batch. 0.12:
  // a fresh-clone suite had 0.745 (the drift of adjacent stages' shares in
  // Python threads, open in issue 12's note).
  EXPECT_NEAR(decode / (decode + collate), 16.0 / 19.0, 0.12);
  // The batches-ready buffer of the loop, capacity prefetch_factor x workers.
  bool buffer = false;
  for (const BufferSeries& b : p.buffers) buffer |= b.name == "DataLoader" && b.capacity == 4;
  EXPECT_TRUE(buffer);
}

// A script that imports the dlprof package and marks stages of its own, as
// the README shows (a context manager, a decorator): they nest inside the
// automatic stages, in the workers too. (The preloaded library imports the
// package as the private _dlprof; the script's own `import dlprof` is a
// second copy of the module, on the same C API.)
TEST(TorchAnnotations, StagesOfTheUsersOwnPackageNestInsideTheAutomaticOnes) {
  TorchRun t = RunTorch({"package", "2", "fork"}, /*compare=*/false, {{"PYTHONPATH", kPackageDir}});
  PyRun unprofiled = RunPython({Script("torch_annotations.py"), "package", "2", "fork"}, false,
                               {{"PYTHONPATH", kPackageDir}});
  EXPECT_EQ(unprofiled.result.exit_code, 0) << Show(unprofiled.result);
  EXPECT_EQ(t.run.result.out, unprofiled.result.out) << "the program's output changed";
  ExpectLoopSteps(t);
  EXPECT_EQ(WorkerIds(t), (std::set<int>{0, 1}));
  auto cpu = CpuByPath(t.run.profile, [](const Process& proc) { return proc.worker >= 0; });
  const double decode = cpu["fetch/user_decode"], collate = cpu["collate/user_collate"];
  ASSERT_GT(decode + collate, 150) << "too few worker samples in the user's stages";
  EXPECT_EQ(cpu["user_decode"], 0) << "the user's stage outside fetch";
  EXPECT_EQ(cpu["user_collate"], 0) << "the user's stage outside collate";
  EXPECT_NEAR(decode / (decode + collate), 16.0 / 19.0, 0.12);
}

TEST(TorchAnnotations, InProcessLoaderFetchesInTheTrainingProcess) {
  TorchRun t = RunTorch({"map", "0"});
  ExpectLoopSteps(t);
  EXPECT_TRUE(t.workers.empty());
  auto cpu = CpuByPath(t.run.profile, [](const Process& proc) { return proc.role == "main"; });
  EXPECT_GT(cpu["fetch/user_decode"], 100);
  EXPECT_GT(cpu["collate"], 20);
}

TEST(TorchAnnotations, SpawnAndForkserverWorkersAreAnnotatedToo) {
  for (const char* start : {"spawn", "forkserver"}) {
    TorchRun t = RunTorch({"map", "2", start}, /*compare=*/false);
    ExpectLoopSteps(t);
    EXPECT_EQ(WorkerIds(t), (std::set<int>{0, 1})) << start;
    auto cpu = CpuByPath(t.run.profile, [](const Process& proc) { return proc.worker >= 0; });
    EXPECT_GT(cpu["fetch/user_decode"], 100) << start;
  }
}

TEST(TorchAnnotations, DatapipeChainIsOneNestedStagePerDatapipe) {
  // Frame pointers, as in the API test above: with libunwind the shares of
  // adjacent stages drift (decode/(decode+augment) came out 0.54 at a load
  // of 3, issue 12's note).
  TorchRun t = RunTorch({"datapipe", "2"}, true, {{"DLPROF_BACKEND", "fp"}});
  ExpectLoopSteps(t);
  EXPECT_EQ(WorkerIds(t), (std::set<int>{0, 1}));
  auto cpu = CpuByPath(t.run.profile, [](const Process& proc) { return proc.worker >= 0; });
  const std::string chain = "fetch/ShardingFilter/Mapper(augment)";
  const double augment = cpu[chain], decode = cpu[chain + "/Mapper(decode)"];
  ASSERT_GT(augment + decode, 100) << "paths seen: " << [&] {
    std::string all;
    for (const auto& [path, n] : cpu) all += path + "=" + std::to_string(n) + " ";
    return all;
  }();
  // 0.15: with the workers, the loop and two more busy processes on 2 cores
  // this came out 0.56 with frame pointers too. The shares of nested stages
  // drift under contention; issue 12's note has the measurements.
  EXPECT_NEAR(decode / (decode + augment), 2.0 / 3.0, 0.15);
}

TEST(TorchAnnotations, PinMemoryIsAStage) {
  PyRun run = RunPython({Script("torch_annotations.py"), "pin"}, true, {{"DLPROF_HZ", "1000"}});
  ASSERT_EQ(run.result.exit_code, 0) << Show(run.result);
  auto cpu = CpuByPath(run.profile, [](const Process&) { return true; });
  // 40 x 5 ms of CPU inside torch's pin_memory(), at 1000 Hz.
  EXPECT_NEAR(cpu["pin_memory"], 200, 60);
}

// multiprocessing's resource tracker and forkserver outlive the program by a
// moment: `dlprof run` waits for them, so that their profiles are complete
// when the report is written (before, they were reported "died").
TEST(TorchAnnotations, DlprofRunWaitsForTheHelpersTheProgramLeaves) {
  const std::string dir = MakeTempDir("dlprof-pyrun");
  ProcessResult r = RunProcess({std::string(DLPROF_BUILD_DIR) + "/tools/dlprof", "run", "-o",
                                dir + "/out", "-r", dir + "/report", "--", kPython,
                                Script("torch_annotations.py"), "map", "2", "forkserver"},
                               // (dlprof run puts libdlprof before what is there)
                               {{"LD_PRELOAD", testing::SanitizerRuntime()}}, 120);
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  std::ifstream in(dir + "/report/summary.json");
  ASSERT_TRUE(in) << Show(r);
  const json j = json::parse(in);
  int helpers = 0;
  for (const json& p : j["processes"]) {
    EXPECT_EQ(p["complete"], true) << p.dump();
    helpers += p["role"] == "other";  // the tracker and the forkserver (not its workers)
  }
  EXPECT_EQ(helpers, 2) << j["processes"].dump();
}

}  // namespace
}  // namespace dlprof
