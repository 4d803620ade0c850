// Ground truth for the analysis: each scenario of the example pipeline has a
// known bottleneck, and the verdict in summary.json must name it. Each run
// is real: worker processes, JPEG files on disk, a training loop. Two run
// under a launcher (tests/programs/launcher.cc), as a trainer under torchrun
// or a Python script's subprocess does: the verdict must be the same.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using nlohmann::json;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::RunProcess;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";
const std::string kExample =
    std::string(DLPROF_BUILD_DIR) + "/examples/pipeline/dlprof_example_pipeline";

struct Expected {
  const char* scenario;
  const char* steps;
  const char* severity;
  const char* stage;  // "" when not input-bound
  const char* kind;
  const char* role;
  bool under_launcher;  // run as a launcher's child, not as the run's first process
};

// Names the case in ctest's listing (instead of the struct's bytes).
void PrintTo(const Expected& e, std::ostream* os) {
  *os << e.scenario << (e.under_launcher ? " under a launcher" : "");
}

class VerdictTest : public ::testing::TestWithParam<Expected> {
 protected:
  static void SetUpTestSuite() {
    // One small data set for every scenario (each run would make its own).
    data_dir_ = new std::string(MakeTempDir("dlprof-verdict-data"));
    ProcessResult r = RunProcess({kExample, "--generate-only", "--images", "512", "--data-dir", *data_dir_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static std::string* data_dir_;
};
std::string* VerdictTest::data_dir_;

// The example's own measurement of its data wait after the same warm-up
// steps dlprof drops: "summary: ... steady_wait_fraction=X".
double SelfReportedWait(const std::string& out) {
  auto pos = out.find(" steady_wait_fraction=");
  return pos == std::string::npos ? -1 : std::stod(out.substr(pos + 22));
}

// The example's own CPU clocks of the stages that run in workers, summed
// over the processes: "stage: name=decode role=worker worker=0 ... cpu_s=0.1213".
std::map<std::string, double> SelfReportedWorkerStageCpu(const std::string& out) {
  std::map<std::string, double> cpu;
  std::set<std::string> in_workers;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("stage: name=", 0) != 0) continue;
    const std::string name = line.substr(12, line.find(' ', 12) - 12);
    if (line.find(" role=worker ") != std::string::npos) in_workers.insert(name);
    const size_t at = line.find(" cpu_s=");
    if (at != std::string::npos) cpu[name] += std::stod(line.substr(at + 7));
  }
  for (auto it = cpu.begin(); it != cpu.end();) it = in_workers.count(it->first) ? std::next(it) : cpu.erase(it);
  return cpu;
}

TEST_P(VerdictTest, NamesTheKnownBottleneck) {
  const Expected& e = GetParam();
  std::string dir = MakeTempDir("dlprof-verdict");
  std::vector<std::string> argv = {kDlprof, "run", "-o", dir + "/out", "-r", dir + "/report", "--"};
  if (e.under_launcher) argv.push_back(ProgramPath("launcher"));
  for (const std::string& arg : {kExample, std::string("--scenario"), std::string(e.scenario),
                                 std::string("--steps"), std::string(e.steps), std::string("--images"),
                                 std::string("512"), std::string("--warmup-steps"), std::string("2"),
                                 std::string("--data-dir"), *data_dir_}) {
    argv.push_back(arg);
  }
  ProcessResult r = RunProcess(argv, {{"DLPROF_WARMUP_STEPS", "2"}}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream in(dir + "/report/summary.json");
  ASSERT_TRUE(in) << r.out << r.err;
  json j = json::parse(in);
  const json& v = j["verdict"];
  SCOPED_TRACE(v.dump(2));
  // The profiler's wait share agrees with the program's own clock.
  double truth = SelfReportedWait(r.out);
  ASSERT_GE(truth, 0) << r.out;
  EXPECT_NEAR(v["data_wait_fraction"].get<double>(), truth, 0.05);
  if (std::string(e.severity) == "none" && truth >= 0.04 && truth < 0.15) {
    // The model-bound scenario on a crowded machine: its workers lose CPU to
    // other jobs and the loop really does wait a little. The verdict must
    // then follow what was measured (never "high"), not the scenario's name.
    EXPECT_NE(v["severity"], "high");
    EXPECT_EQ(v["severity"], v["data_wait_fraction"].get<double>() >= 0.05 ? "moderate" : "none");
    return;
  }
  // Each worker stage's CPU time agrees with the program's own clocks of
  // it. The stages between the readers' waits last a few ms, less than a
  // wall tick: their CPU once went to the read the ticks found the thread
  // in (io-bound: decode 0.008 s against 0.243 s, read 0.367 s against
  // 0.047 s). The margin is the sampler's: a stage's runs are mostly
  // shorter than a period, so each holds a sample or not, and its count
  // varies by about its square root: at 100 Hz, 0.235 s is 23 +- 5 samples
  // (0.139 s was measured once in CI, 1.9 deviations off). 3.5 deviations,
  // never less than 40% or 60 ms.
  int hz = 0;
  for (const auto& p : j["processes"]) hz = std::max(hz, p.value("hz", 0));
  ASSERT_GT(hz, 0) << j["processes"].dump();
  const double period_s = 1.0 / hz;
  const std::map<std::string, double> own = SelfReportedWorkerStageCpu(r.out);
  EXPECT_EQ(own.empty(), std::string(e.scenario) == "in-process") << r.out;
  for (const auto& [name, truth] : own) {
    double measured = 0;
    for (const auto& st : j["stages"]) {
      if (st["name"] == name) measured = st["self_cpu_s"].get<double>();
    }
    const double margin =
        std::max({0.4 * truth, 3.5 * std::sqrt(truth * period_s), 0.06});
    EXPECT_NEAR(measured, truth, margin) << "stage " << name << "'s CPU";
  }
  EXPECT_EQ(v["severity"], e.severity);
  EXPECT_EQ(v["input_bound"], std::string(e.severity) != "none");
  EXPECT_EQ(v["bottleneck_stage"], e.stage);
  EXPECT_EQ(v["bottleneck_kind"], e.kind);
  EXPECT_EQ(v["bottleneck_role"], e.role);
  // Every process of the run is in the report, the training process as
  // "main" (not the launcher that started it), each data worker once.
  const int expected_workers = std::string(e.scenario) == "in-process" ? 0
                               : std::string(e.scenario) == "imbalanced" ? 3 : 2;
  int workers = 0, mains = 0, others = 0;
  for (const auto& p : j["processes"]) {
    workers += p["role"] == "worker";
    others += p["role"] == "other";
    if (p["role"] == "main") {
      ++mains;
      EXPECT_NE(p["command"].get<std::string>().find("dlprof_example_pipeline"), std::string::npos)
          << p.dump();
    }
  }
  EXPECT_EQ(workers, expected_workers);
  EXPECT_EQ(j["workers"]["concurrent"], expected_workers);
  EXPECT_EQ(mains, 1);
  // The launcher and its monitor child, and the fork before the exec when
  // the runtime kept a file of that image.
  if (e.under_launcher) {
    EXPECT_GE(others, 2);
    EXPECT_LE(others, 3);
  } else {
    EXPECT_EQ(others, 0);
  }
  const std::string advice = v["advice"].dump();
  if (std::string(e.scenario) == "receive-bound") {
    // The loop runs through most of its waits: its own receive work, not the
    // workers, and no stage to blame.
    EXPECT_GE(v["loop_receive_fraction"].get<double>(), 0.5);
    EXPECT_NE(advice.find("receive work is the bottleneck"), std::string::npos) << advice;
  } else if (std::string(e.role) == "main") {
    EXPECT_NE(advice.find("runs in the training process"), std::string::npos) << advice;
  } else if (std::string(e.kind) == "cpu") {
    EXPECT_NE(advice.find("(" + std::to_string(expected_workers) + " workers on "), std::string::npos)
        << advice;
  }
  if (std::string(e.scenario) == "imbalanced") {
    EXPECT_EQ(v["slowest_worker"], 0);
    EXPECT_GT(v["worker_imbalance"].get<double>(), 1.5);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, VerdictTest,
    ::testing::Values(Expected{"io-bound", "30", "high", "read", "io", "worker", false},
                      Expected{"decode-bound", "60", "high", "decode", "cpu", "worker", false},
                      Expected{"model-bound", "16", "none", "", "", "", false},
                      Expected{"imbalanced", "30", "high", "read", "io", "worker", false},
                      Expected{"in-process", "30", "high", "decode", "cpu", "main", false},
                      Expected{"receive-bound", "120", "high", "", "cpu", "main", false},
                      Expected{"decode-bound", "60", "high", "decode", "cpu", "worker", true},
                      Expected{"in-process", "30", "high", "decode", "cpu", "main", true}),
    [](const ::testing::TestParamInfo<Expected>& info) {
      std::string name = info.param.scenario;
      for (char& c : name) if (c == '-') c = '_';
      return name + (info.param.under_launcher ? "_under_launcher" : "");
    });

}  // namespace
}  // namespace dlprof
