// Faults: what dlprof does when the world misbehaves around the profiled
// program. A worker killed by SIGKILL, an output disk that fills up or a file
// size limit, an output folder that is not safe, a program that wants SIGPROF
// for itself, and sixteen threads doing malloc/free, dlopen/dlclose, fork and
// exec under 1000 Hz sampling. Real processes each time; the program must run
// on as it would without dlprof (same output, same exit status), and dlprof
// says what happened in one line and in the report.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "readers/dlprof_reader.h"
#include "tests/support/files.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::ReadFile;

using nlohmann::json;
using testing::kUnset;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::RunProcess;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";

// Under ASan/TSan (scripts/test.sh) the programs run several times slower:
// what they do is checked all the same, how many samples they got is not.
#ifdef DLPROF_UNDER_SANITIZER
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#define SKIP_COUNTS_UNDER_SANITIZER() \
  if (kSanitized) GTEST_SKIP() << "sample counts are not checked under sanitizers"

// Lines of `text` that contain `needle`.
std::vector<std::string> LinesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

// stdout without its last "diag: ..." line (dlprof's footprint, which differs).
std::string WithoutDiag(const std::string& out) {
  size_t at = out.find("diag: ");
  return at == std::string::npos ? out : out.substr(0, at);
}

// Parses "key=value" from the program's stdout (-1 when absent).
long Value(const std::string& out, const std::string& key) {
  size_t at = out.find(key + "=");
  return at == std::string::npos ? -1 : atol(out.c_str() + at + key.size() + 1);
}

struct ProfiledRun {
  ProcessResult result;
  std::string out_dir;
  std::vector<std::string> files;
  Profile profile;
};

void ReadRun(ProfiledRun* run) {
  std::string error;
  run->files = ListRunFiles(run->out_dir, &error);
  for (const auto& f : run->files) {
    EXPECT_TRUE(ReadDlprofFile(f, &run->profile, &error)) << error;
  }
}

ProfiledRun Profiled(const std::string& program, const std::vector<std::string>& args,
             std::map<std::string, std::string> env = {}, int timeout_s = 60) {
  ProfiledRun run;
  run.out_dir = MakeTempDir("dlprof-fault");
  env.emplace("DLPROF_SAMPLE", "1");
  env.emplace("DLPROF_OUT", run.out_dir);
  std::vector<std::string> argv = {ProgramPath(program)};
  argv.insert(argv.end(), args.begin(), args.end());
  run.result = RunProcess(argv, env, timeout_s);
  ReadRun(&run);
  return run;
}

// CPU sample weight and wall-tick time per innermost stage, for one process
// or (-1) all.
struct StageTime {
  int64_t cpu_samples = 0;
  int64_t wall_ns = 0;
};
std::map<std::string, StageTime> ByStage(const Profile& p, int process = -1) {
  std::map<std::string, StageTime> out;
  for (const Sample& s : p.samples) {
    if (process >= 0 && s.process != static_cast<uint32_t>(process)) continue;
    const auto& path = p.stage_paths[s.stage_path];
    StageTime& t = out[path.empty() ? "" : p.stages[path.back()]];
    if (s.kind == SampleKind::kCpu) t.cpu_samples += s.count;
    else t.wall_ns += s.wall_ns;
  }
  return out;
}

int64_t CpuSamples(const Profile& p) {
  int64_t n = 0;
  for (const Sample& s : p.samples) n += s.kind == SampleKind::kCpu ? s.count : 0;
  return n;
}

// `dlprof report RUN_DIR -o OUT` and its summary.json.
json Report(const std::string& run_dir, std::string* out_dir, ProcessResult* result = nullptr) {
  *out_dir = MakeTempDir("dlprof-fault-report");
  ProcessResult r = RunProcess({kDlprof, "report", run_dir, "-o", *out_dir}, {}, 120);
  if (result != nullptr) *result = r;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string text = ReadFile(*out_dir + "/summary.json");
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// ---------------------------------------------------------------------------
// A worker killed by SIGKILL.

TEST(Faults, KilledWorkerIsReportedAsDiedWithItsSamples) {
  // rt_workload forks a worker that burns CPU in stage "doomed" until it has
  // used 1.5 s, then kills it with SIGKILL.
  ProfiledRun run;
  run.out_dir = MakeTempDir("dlprof-fault-kill");
  run.result = RunProcess({ProgramPath("rt_workload"), "kill", "1500"},
                          {{"DLPROF_SAMPLE", "1"}, {"DLPROF_OUT", run.out_dir}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  const long worker_pid = Value(run.result.out, "worker");
  const double cpu_s = atof(run.result.out.c_str() + run.result.out.find("worker_cpu_s=") + 13);
  ASSERT_GT(worker_pid, 0) << run.result.out;
  ASSERT_GT(cpu_s, 1.2) << "the worker got too little CPU to judge";

  std::string report_dir;
  json summary = Report(run.out_dir, &report_dir);
  ASSERT_TRUE(summary.is_object()) << ReadFile(report_dir + "/summary.json");
  const json* worker = nullptr;
  for (const json& p : summary["processes"]) {
    if (p["pid"] == worker_pid) worker = &p;
    else EXPECT_TRUE(p["complete"].get<bool>()) << p.dump();  // the parent ended cleanly
  }
  ASSERT_NE(worker, nullptr) << summary["processes"].dump();
  // A collector process that read the zombie's status before the parent
  // reaped it ends the file with the cause; the thread never can.
  const bool cause_read = (*worker)["collector"] == "process" && (*worker)["complete"].get<bool>();
  EXPECT_EQ((*worker)["complete"].get<bool>(), cause_read);
  EXPECT_EQ((*worker)["end"], cause_read ? "signal 9" : "died (no end record)");
  // Flushed at least once a second: all but the last second of its CPU time
  // is in the report (100 Hz; 0.2 s of slack for the kill's latency).
  const int64_t floor = kSanitized ? 1 : static_cast<int64_t>((cpu_s - 1.2) * 100 * 0.9);
  EXPECT_GE((*worker)["samples"].get<int64_t>(), floor);
  bool doomed = false;
  for (const json& s : summary["stages"]) {
    if (s["name"] == "doomed") {
      doomed = true;
      EXPECT_GE(s["self_samples"].get<int64_t>(), floor);
    }
  }
  EXPECT_TRUE(doomed) << summary["stages"].dump();
  bool warned = false;
  for (const json& w : summary["warnings"]) {
    warned |= w.get<std::string>().find("no end record") != std::string::npos;
  }
  EXPECT_EQ(warned, !cause_read) << summary["warnings"].dump();

  // summary.txt says it too, on the worker's line.
  std::string text = ReadFile(report_dir + "/summary.txt");
  auto lines = LinesWith(text, "pid " + std::to_string(worker_pid));
  ASSERT_FALSE(lines.empty()) << text;
  EXPECT_NE(lines[0].find(cause_read ? "signal 9" : "died (no end record)"), std::string::npos)
      << lines[0];
  // And the folded stacks hold its samples.
  EXPECT_NE(ReadFile(report_dir + "/stacks.folded").find("[stage doomed]"), std::string::npos);
}

// ---------------------------------------------------------------------------
// The output disk full or unwritable.

// What fault_workload prints and returns without dlprof: the reference.
// The program's threads once dlprof's collector has come and gone: the main
// thread; under TSan also TSan's background thread, which TSan starts at the
// process's first pthread_create (here the collector's) and keeps.
#ifdef DLPROF_UNDER_TSAN
constexpr int kThreadsAfterCollector = 2;
#else
constexpr int kThreadsAfterCollector = 1;
#endif

const ProcessResult& Unprofiled(const std::string& rounds, const std::string& ms) {
  static std::map<std::string, ProcessResult>* cache = new std::map<std::string, ProcessResult>();
  auto it = cache->find(rounds + "/" + ms);
  if (it == cache->end()) {
    ProcessResult r = RunProcess({ProgramPath("fault_workload"), "steady", rounds, ms},
                                 {{"DLPROF_SAMPLE", kUnset}});
    it = cache->emplace(rounds + "/" + ms, r).first;
  }
  return it->second;
}

std::string Sh(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct LimitCase {
  const char* name;
  bool ignore_sigxfsz;
};

class FileSizeLimit : public ::testing::TestWithParam<LimitCase> {};

// RLIMIT_FSIZE set before exec (as `ulimit -f` does): a write past it fails
// with EFBIG when SIGXFSZ is ignored, and raises SIGXFSZ (which kills) when
// not. dlprof stops writing before the limit either way; the program runs on
// with the same output and exit status, and what was written stays readable.
TEST_P(FileSizeLimit, ProfilingStopsOnceProgramRunsOn) {
  const std::string rounds = "60", ms = "20";
  const ProcessResult& plain = Unprofiled(rounds, ms);
  ASSERT_EQ(plain.exit_code, 7) << plain.err;

  // A healthy profiled run: how big its file gets, and what dlprof's
  // footprint looks like while it samples (the control for the diag line).
  ProfiledRun healthy = Profiled("fault_workload", {"steady", rounds, ms},
                                 {{"DLPROF_HZ", "1000"}, {"DLPROF_COLLECTOR", "thread"}});
  ASSERT_EQ(healthy.result.exit_code, 7) << healthy.result.err;
  ASSERT_EQ(healthy.files.size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(healthy.files[0].c_str(), &st), 0);
  EXPECT_GE(Value(healthy.result.out, "timers"), 1) << healthy.result.out;
  EXPECT_GE(Value(healthy.result.out, "threads"), 2) << healthy.result.out;

  // Half of that, in 512-byte blocks (dash's ulimit -f unit).
  const long blocks = st.st_size / 2 / 512;
  ASSERT_GT(blocks, 4) << st.st_size;
  ProfiledRun run;
  run.out_dir = MakeTempDir("dlprof-fault-fsize");
  std::string cmd = std::string(GetParam().ignore_sigxfsz ? "trap '' XFSZ; " : "") + "ulimit -f " +
                    std::to_string(blocks) + "; exec " + Sh(ProgramPath("fault_workload")) +
                    " steady " + rounds + " " + ms;
  run.result = RunProcess({"/bin/sh", "-c", cmd}, {{"DLPROF_SAMPLE", "1"},
                                                   {"DLPROF_OUT", run.out_dir},
                                                   {"DLPROF_HZ", "1000"},
                                                   {"DLPROF_COLLECTOR", "thread"}});
  EXPECT_EQ(run.result.term_signal, 0) << "killed by signal " << run.result.term_signal;
  EXPECT_EQ(run.result.exit_code, 7) << run.result.err;
  EXPECT_EQ(WithoutDiag(run.result.out), WithoutDiag(plain.out));
  auto warnings = LinesWith(run.result.err, "dlprof:");
  ASSERT_EQ(warnings.size(), 1u) << run.result.err;
  EXPECT_NE(warnings[0].find("cannot write"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("stays readable"), std::string::npos) << warnings[0];
  // The sampler really stopped: no timer left armed, no collector thread.
  EXPECT_EQ(Value(run.result.out, "timers"), 0) << run.result.out;
  EXPECT_EQ(Value(run.result.out, "threads"), kThreadsAfterCollector) << run.result.out;

  ReadRun(&run);
  ASSERT_EQ(run.files.size(), 1u);
  ASSERT_EQ(stat(run.files[0].c_str(), &st), 0);
  EXPECT_LE(st.st_size, blocks * 512);
  ASSERT_EQ(run.profile.processes.size(), 1u);
  std::string report_dir;
  json summary = Report(run.out_dir, &report_dir);
  ASSERT_TRUE(summary.is_object());
  EXPECT_GT(summary["processes"][0]["samples"].get<int64_t>(), 0);
  SKIP_COUNTS_UNDER_SANITIZER();
  EXPECT_GT(CpuSamples(run.profile), 50);  // the first part of the run is there
  EXPECT_GT(ByStage(run.profile)["compute"].cpu_samples, 20);
}

INSTANTIATE_TEST_SUITE_P(Faults, FileSizeLimit,
                         ::testing::Values(LimitCase{"SigxfszIgnored", true},
                                           LimitCase{"SigxfszDefault", false}),
                         [](const auto& info) { return std::string(info.param.name); });

// True when this machine lets us mount a tmpfs in a private mount namespace
// (root, or a user namespace that allows it); else false and why.
bool CanMountTmpfs(std::string* why) {
  std::string dir = MakeTempDir("dlprof-mnt-probe");
  ProcessResult r = RunProcess({"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh",
                                "-c", "mount -t tmpfs -o size=64k tmpfs " + Sh(dir)});
  *why = r.err;
  return r.exit_code == 0;
}

// fault_workload profiled onto a real full disk: DLPROF_OUT a 96 KiB tmpfs,
// 88 KiB of it taken by ballast, two pages left for the profile, which
// needs more (writes fail with ENOSPC). Its content is copied to `copy`
// before the mount namespace goes away; the shell waits a moment after the
// program for a collector process's last write. Exit status 99: no tmpfs.
ProcessResult RunOnAFullDisk(const std::string& rounds, const std::string& ms,
                             const std::string& copy,
                             const std::map<std::string, std::string>& more_env) {
  const std::string mnt = MakeTempDir("dlprof-fault-tmpfs");
  const std::string filled = "mount -t tmpfs -o size=96k,mode=0700 tmpfs " + Sh(mnt) +
                             " || exit 99; head -c 90112 /dev/zero > " + Sh(mnt) + "/ballast; " +
                             Sh(ProgramPath("fault_workload")) + " steady " + rounds + " " + ms +
                             "; rc=$?; sleep 0.5; rm " + Sh(mnt) +
                             "/ballast; cp -a " + Sh(mnt) + "/. " + Sh(copy) + "; exit $rc";
  std::map<std::string, std::string> env = {
      {"DLPROF_SAMPLE", "1"}, {"DLPROF_OUT", mnt}, {"DLPROF_HZ", "1000"}};
  env.insert(more_env.begin(), more_env.end());
  return RunProcess({"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", filled},
                    env);
}

TEST(Faults, FullDiskStopsProfilingOnceProgramRunsOn) {
  std::string why;
  if (!CanMountTmpfs(&why)) GTEST_SKIP() << "cannot mount a tmpfs here: " << why;
  const std::string rounds = "60", ms = "20";
  const ProcessResult& plain = Unprofiled(rounds, ms);
  ASSERT_EQ(plain.exit_code, 7) << plain.err;
  const std::string copy = MakeTempDir("dlprof-fault-tmpfs-copy");
  ProcessResult r = RunOnAFullDisk(rounds, ms, copy, {{"DLPROF_COLLECTOR", "thread"}});
  ASSERT_NE(r.exit_code, 99) << r.err;
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(WithoutDiag(r.out), WithoutDiag(plain.out));
  auto warnings = LinesWith(r.err, "dlprof:");
  ASSERT_EQ(warnings.size(), 1u) << r.err;
  EXPECT_NE(warnings[0].find("No space left on device"), std::string::npos) << warnings[0];
  EXPECT_EQ(Value(r.out, "timers"), 0) << r.out;
  EXPECT_EQ(Value(r.out, "threads"), kThreadsAfterCollector) << r.out;

  ProfiledRun run;
  run.out_dir = copy;
  ReadRun(&run);
  ASSERT_EQ(run.files.size(), 1u) << r.err;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  std::string report_dir;
  json summary = Report(copy, &report_dir);
  ASSERT_TRUE(summary.is_object());
  EXPECT_GT(summary["processes"][0]["samples"].get<int64_t>(), 0);
  SKIP_COUNTS_UNDER_SANITIZER();
  EXPECT_GT(CpuSamples(run.profile), 20);
}

// The same full disk under the collector process. The helper's write
// fails, and it says so in the same one line, on the program's stderr,
// which it opens through /proc for that line (it holds none of the
// program's descriptors; before, it stopped in silence). (A file size
// limit cannot show it: the shared arena is a file too, and under a small
// limit the process keeps the thread.)
TEST(Faults, CollectorProcessSaysOnTheProgramsStderrThatTheDiskIsFull) {
  std::string why;
  if (!CanMountTmpfs(&why)) GTEST_SKIP() << "cannot mount a tmpfs here: " << why;
  const std::string rounds = "60", ms = "20";
  const ProcessResult& plain = Unprofiled(rounds, ms);
  ASSERT_EQ(plain.exit_code, 7) << plain.err;
  const std::string copy = MakeTempDir("dlprof-fault-tmpfs-copy");
  // (The program's stderr is a pipe, the test's.)
  ProcessResult r = RunOnAFullDisk(rounds, ms, copy, {{"DLPROF_COLLECTOR", "process"}});
  ASSERT_NE(r.exit_code, 99) << r.err;
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(WithoutDiag(r.out), WithoutDiag(plain.out));
  auto warnings = LinesWith(r.err, "dlprof:");
  ASSERT_EQ(warnings.size(), 1u) << r.err;
  EXPECT_NE(warnings[0].find("No space left on device"), std::string::npos) << warnings[0];

  ProfiledRun run;
  run.out_dir = copy;
  ReadRun(&run);
  ASSERT_EQ(run.files.size(), 1u) << r.err;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  EXPECT_EQ(run.profile.processes[0].fields["collector"], "process");
  std::string report_dir;
  json summary = Report(copy, &report_dir);
  ASSERT_TRUE(summary.is_object());
  EXPECT_GT(summary["processes"][0]["samples"].get<int64_t>(), 0);
}

// DLPROF_OUT that is not a safe folder: one line, no profile, the program
// runs as without dlprof. A world-writable folder with the sticky bit (like
// /tmp) is fine.
TEST(Faults, UnsafeOrUnusableOutputFolderIsOneLineAndProgramUnaffected) {
  const ProcessResult& plain = Unprofiled("5", "5");
  ASSERT_EQ(plain.exit_code, 7);
  const std::string base = MakeTempDir("dlprof-fault-out");
  const std::string world = base + "/world";
  ASSERT_EQ(mkdir(world.c_str(), 0700), 0);
  ASSERT_EQ(chmod(world.c_str(), 0777), 0);
  const std::string file = base + "/file";
  std::ofstream(file) << "x";
  const std::string run_owner = base + "/owned";  // its run folder belongs to someone else
  ASSERT_EQ(mkdir(run_owner.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((run_owner + "/the-run").c_str(), 0777), 0);
  const bool can_chown = chown((run_owner + "/the-run").c_str(), 4242, 4242) == 0;

  struct Case {
    std::string out, expect;
    std::map<std::string, std::string> env;
  };
  std::vector<Case> cases = {
      {world, "writable by every user: refused", {}},
      {file, "cannot", {}},
      {file + "/sub", "cannot", {}},
  };
  if (can_chown) {
    cases.push_back({run_owner, "owned by another user: refused", {{"DLPROF_RUN_ID", "the-run"}}});
  }
  for (const Case& c : cases) {
    std::map<std::string, std::string> env = c.env;
    env["DLPROF_SAMPLE"] = "1";
    env["DLPROF_OUT"] = c.out;
    ProcessResult r = RunProcess({ProgramPath("fault_workload"), "steady", "5", "5"}, env);
    EXPECT_EQ(r.exit_code, 7) << c.out << ": " << r.err;
    EXPECT_EQ(WithoutDiag(r.out), WithoutDiag(plain.out)) << c.out;
    auto lines = LinesWith(r.err, "dlprof:");
    ASSERT_EQ(lines.size(), 1u) << c.out << ": " << r.err;
    EXPECT_NE(lines[0].find(c.expect), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("profiling off"), std::string::npos) << lines[0];
    EXPECT_EQ(Value(r.out, "timers"), 0) << r.out;
    EXPECT_EQ(Value(r.out, "threads"), 1) << r.out;
  }
  std::string error;
  EXPECT_TRUE(ListRunFiles(world, &error).empty());
  EXPECT_TRUE(ListRunFiles(run_owner + "/the-run", &error).empty());

  // World-writable with the sticky bit: accepted, silently.
  const std::string sticky = base + "/sticky";
  ASSERT_EQ(mkdir(sticky.c_str(), 0700), 0);
  ASSERT_EQ(chmod(sticky.c_str(), 01777), 0);
  ProcessResult r = RunProcess({ProgramPath("fault_workload"), "steady", "5", "5"},
                               {{"DLPROF_SAMPLE", "1"}, {"DLPROF_OUT", sticky}});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(ListRunFiles(sticky, &error).size(), 1u) << error;
}

// ---------------------------------------------------------------------------
// The program wants SIGPROF for itself.

struct SigprofRun {
  ProfiledRun run;
  std::map<std::string, StageTime> stages;
  std::vector<std::string> dlprof_lines;
};

SigprofRun RunSigprof(const std::string& mode, std::map<std::string, std::string> env = {}) {
  SigprofRun s;
  env.emplace("DLPROF_HZ", "1000");
  s.run = Profiled("fault_sigprof", {mode}, env);
  s.stages = ByStage(s.run.profile);
  s.dlprof_lines = LinesWith(s.run.result.err, "dlprof:");
  return s;
}

int CountSteps(const Profile& p) {
  int n = 0;
  for (const Interval& iv : p.intervals) n += iv.kind == IntervalKind::kStep;
  return n;
}

// The program installs a SIGPROF handler after dlprof started: dlprof stops
// sampling (no timer left), hands the signal over, says so once, and keeps
// recording stages, steps and wall time. Every signal the program sends
// reaches its handler, and none of dlprof's does.
void ExpectSteppedAside(const SigprofRun& s, bool exact) {
  const std::string& out = s.run.result.out;
  EXPECT_EQ(s.run.result.exit_code, 0) << out << s.run.result.err;
  ASSERT_EQ(s.dlprof_lines.size(), 1u) << s.run.result.err;
  EXPECT_NE(s.dlprof_lines[0].find("SIGPROF"), std::string::npos) << s.dlprof_lines[0];
  EXPECT_NE(s.dlprof_lines[0].find("sampling off"), std::string::npos) << s.dlprof_lines[0];
  const long raised = Value(out, "raised");
  ASSERT_EQ(raised, 250) << out;
  if (exact) {
    EXPECT_EQ(Value(out, "got_raise"), raised) << out;
    EXPECT_EQ(Value(out, "foreign"), 0) << out;
  } else {
    EXPECT_GE(Value(out, "got_raise"), raised) << out;
  }
  EXPECT_EQ(Value(out, "timers"), 0) << out;
  EXPECT_EQ(Value(out, "enabled"), 1) << out;
  ASSERT_EQ(s.run.profile.processes.size(), 1u);
  EXPECT_TRUE(s.run.profile.processes[0].complete);
  // After the hand-over: no CPU samples, but wall ticks, stages and steps.
  auto at = [&](const char* stage) {
    auto it = s.stages.find(stage);
    return it == s.stages.end() ? StageTime{} : it->second;
  };
  EXPECT_LE(at("after").cpu_samples, exact ? 0 : 5);
  EXPECT_LE(at("other").cpu_samples, exact ? 0 : 5);
  EXPECT_GT(at("after").wall_ns, 100000000);
  EXPECT_GT(at("after_sleep").wall_ns, 100000000);
  EXPECT_EQ(CountSteps(s.run.profile), 10);
}

TEST(Faults, ProgramsSigprofHandlerMakesDlprofStepAside) {
  SigprofRun s = RunSigprof("late");
  // Queries show the program its own view: SIG_DFL before, its handler after.
  EXPECT_NE(s.run.result.out.find("view_start=dfl"), std::string::npos) << s.run.result.out;
  EXPECT_NE(s.run.result.out.find("old=dfl view_after=mine"), std::string::npos)
      << s.run.result.out;
  EXPECT_GT(Value(s.run.result.out, "timer_signals"), 10) << s.run.result.out;
  ExpectSteppedAside(s, true);

  // The report says so.
  std::string report_dir;
  json summary = Report(s.run.out_dir, &report_dir);
  ASSERT_TRUE(summary.is_object());
  bool said = false;
  for (const json& w : summary["warnings"]) {
    said |= w.get<std::string>().find("SIGPROF") != std::string::npos;
  }
  EXPECT_TRUE(said) << summary["warnings"].dump();
  SKIP_COUNTS_UNDER_SANITIZER();
  EXPECT_GT(s.stages["before"].cpu_samples, 100);  // sampled until the hand-over
}

TEST(Faults, ProgramsSigprofHandlerViaSignalMakesDlprofStepAside) {
  SigprofRun s = RunSigprof("signal");
  EXPECT_NE(s.run.result.out.find("old=dfl view_after=mine"), std::string::npos)
      << s.run.result.out;
  ExpectSteppedAside(s, true);
  SKIP_COUNTS_UNDER_SANITIZER();
  EXPECT_GT(s.stages["before"].cpu_samples, 100);
}

// sigset() installs through glibc's internal sigaction, which no interposer
// sees: the collector notices the handler changed (within a tick) and steps
// aside then.
TEST(Faults, HandlerInstalledBehindDlprofsBackIsNoticed) {
  SigprofRun s = RunSigprof("sigset");
  EXPECT_NE(s.run.result.out.find("view_after=mine"), std::string::npos) << s.run.result.out;
  ExpectSteppedAside(s, false);
  SKIP_COUNTS_UNDER_SANITIZER();
  EXPECT_GT(s.stages["before"].cpu_samples, 100);
}

// A SIGPROF handler that predates dlprof (installed from .preinit_array,
// before any library constructor): dlprof never samples, says so once, and
// records the rest.
TEST(Faults, SigprofHandlerFromBeforeStartMeansNoSampling) {
  SigprofRun s = RunSigprof("early", {{"FAULT_EARLY_SIGPROF", "1"}});
  EXPECT_NE(s.run.result.out.find("view_start=mine"), std::string::npos) << s.run.result.out;
  ExpectSteppedAside(s, true);
  EXPECT_EQ(CpuSamples(s.run.profile), 0);
  EXPECT_GT(s.stages["before"].wall_ns, 100000000);
}

// No handler: SIGPROF's default action ends the program, as it would
// without dlprof; the profile still ends properly.
TEST(Faults, UnhandledSigprofStillEndsTheProgram) {
  SigprofRun s = RunSigprof("default");
  EXPECT_EQ(s.run.result.term_signal, SIGPROF) << s.run.result.out << s.run.result.err;
  EXPECT_NE(s.run.result.out.find("raising"), std::string::npos);
  EXPECT_EQ(s.run.result.out.find("survived"), std::string::npos);
  EXPECT_TRUE(s.dlprof_lines.empty()) << s.run.result.err;
  ASSERT_EQ(s.run.profile.processes.size(), 1u);
  EXPECT_TRUE(s.run.profile.processes[0].complete);
  EXPECT_EQ(s.run.profile.processes[0].end_reason, "signal " + std::to_string(SIGPROF));
  SKIP_COUNTS_UNDER_SANITIZER();
  EXPECT_GT(s.stages["spin"].cpu_samples, 100);
}

// SIGPROF ignored, then back to the default: the program's view follows what
// it set, its own raises vanish, and dlprof samples on.
TEST(Faults, IgnoredSigprofStaysIgnoredAndSamplingGoesOn) {
  SigprofRun s = RunSigprof("ignore");
  const std::string& out = s.run.result.out;
  EXPECT_EQ(s.run.result.exit_code, 0) << out << s.run.result.err;
  EXPECT_NE(out.find("old=dfl view=ign"), std::string::npos) << out;
  EXPECT_NE(out.find("old=ign view=dfl survived"), std::string::npos) << out;
  EXPECT_GE(Value(out, "timers"), 1) << out;
  EXPECT_TRUE(s.dlprof_lines.empty()) << s.run.result.err;
  EXPECT_GT(s.stages["after_ignore"].cpu_samples, 0);
  SKIP_COUNTS_UNDER_SANITIZER();
  EXPECT_GT(s.stages["after_ignore"].cpu_samples, 100);
}

// ---------------------------------------------------------------------------
// fork() while another thread holds glibc's loader lock (in dlopen, dlclose,
// dl_iterate_phdr): the child inherits the lock held for good. dlprof in that
// child must not wait for it (libunwind's lookups, the maps): it samples with
// frame pointers, and the program finishes as it would without dlprof.

TEST(Faults, ForkWhileAnotherThreadHoldsTheLoaderLock) {
  ProfiledRun run = Profiled("fault_stress", {"fork-in-loader"}, {{"DLPROF_HZ", "1000"}});
  const std::string& out = run.result.out;
  EXPECT_EQ(run.result.exit_code, 0) << out << run.result.err;
  ASSERT_NE(out.find("child=exited0"), std::string::npos) << out << run.result.err;
  const long child = Value(out, "child_pid");
  const Process* p = nullptr;
  int index = -1;
  for (size_t i = 0; i < run.profile.processes.size(); ++i) {
    if (run.profile.processes[i].pid == child) p = &run.profile.processes[i], index = static_cast<int>(i);
  }
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->complete);
  EXPECT_GT(ByStage(run.profile, index)["loader_child"].cpu_samples, 0);
  ASSERT_TRUE(p->fields.count("loader_lock"));
  EXPECT_EQ(p->unwinder, "fp");
  std::string report_dir;
  json summary = Report(run.out_dir, &report_dir);
  ASSERT_TRUE(summary.is_object());
  EXPECT_NE(summary["warnings"].dump().find("loader's lock"), std::string::npos)
      << summary["warnings"].dump();
  SKIP_COUNTS_UNDER_SANITIZER();
  EXPECT_GT(ByStage(run.profile, index)["loader_child"].cpu_samples, 50);  // 300 ms at 1000 Hz
}

// The signal handler never waits for the loader lock: the thread holding it
// may be in dlopen, waiting for a malloc lock that the interrupted thread
// holds (the stress test below deadlocked that way). A lookup that would wait
// is given up, the stack cut there, and counted.
// libunwind looks new pcs up through dl_iterate_phdr from the handler.
TEST(Faults, SamplingNeverWaitsForTheLoaderLock) {
  ProfiledRun run = Profiled("fault_stress", {"sample-in-loader"},
                             {{"DLPROF_HZ", "1000"}, {"DLPROF_BACKEND", "libunwind"}});
  const std::string& out = run.result.out;
  EXPECT_EQ(run.result.exit_code, 0) << out << run.result.err;
  EXPECT_NE(out.find("loader_wait=ok"), std::string::npos) << out;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  const auto& counters = run.profile.processes[0].counters;
  ASSERT_TRUE(counters.count("unwind_loader_busy"));
  EXPECT_GT(counters.at("unwind_loader_busy"), 0u);
  EXPECT_GT(ByStage(run.profile)["beside_loader"].cpu_samples, 0);
}

// The cfi tables are the collector's: the handler never asks the loader, so
// it neither waits for its lock nor gives a lookup up, and the new code is
// sampled all the same.
TEST(Faults, CfiSamplingNeverAsksTheLoader) {
  ProfiledRun run = Profiled("fault_stress", {"sample-in-loader"},
                             {{"DLPROF_HZ", "1000"}, {"DLPROF_BACKEND", "cfi"}});
  const std::string& out = run.result.out;
  EXPECT_EQ(run.result.exit_code, 0) << out << run.result.err;
  EXPECT_NE(out.find("loader_wait=ok"), std::string::npos) << out;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  EXPECT_EQ(run.profile.processes[0].unwinder, "cfi");
  const auto& counters = run.profile.processes[0].counters;
  ASSERT_TRUE(counters.count("unwind_loader_busy"));
  EXPECT_EQ(counters.at("unwind_loader_busy"), 0u);
  EXPECT_GT(ByStage(run.profile)["beside_loader"].cpu_samples, 0);
}

// ---------------------------------------------------------------------------
// Sixteen threads: malloc/free, dlopen/dlclose, fork, exec, at 1000 Hz.

TEST(Faults, StressForkExecDlopenMallocAt1000HzNeitherHangsNorCrashes) {
  // 5 s in CI; DLPROF_STRESS_SECONDS=30 for the long run.
  const char* env_seconds = getenv("DLPROF_STRESS_SECONDS");
  const int seconds = env_seconds != nullptr && atoi(env_seconds) > 0 ? atoi(env_seconds) : 5;
  ProfiledRun run = Profiled("fault_stress", {std::to_string(seconds)}, {{"DLPROF_HZ", "1000"}},
                     seconds + 60);
  const std::string& out = run.result.out;
  ASSERT_EQ(run.result.term_signal, 0)
      << "killed after " << seconds + 60 << " s (hung?) or crashed: " << run.result.err;
  EXPECT_EQ(run.result.exit_code, 0) << out << run.result.err;
  EXPECT_NE(out.find("hung=0 crashed=0 failed=0"), std::string::npos) << out << run.result.err;
  EXPECT_EQ(Value(out, "dlopen_failures"), 0) << out;
  int mains = 0;
  for (const Process& proc : run.profile.processes) {
    // Every file says whose it is, even a child that exec'd or died at once.
    EXPECT_GT(proc.pid, 0) << proc.file;
    mains += proc.role == "main";
  }
  EXPECT_EQ(mains, 1);
  SKIP_COUNTS_UNDER_SANITIZER();
  // How much got done depends on the machine's load; that each kind of
  // operation happened, alongside the others, is what matters.
  EXPECT_GE(Value(out, "forks"), seconds) << out;
  EXPECT_GT(Value(out, "execs"), 0) << out;
  EXPECT_GE(Value(out, "dlopens"), seconds * 2) << out;
  EXPECT_GT(Value(out, "threads"), 0) << out;

  // Every child that ran long enough has CPU samples: at least a fifth of
  // what its CPU time (measured by the collector's wall ticks, not by
  // signals) should have given at 1000 Hz. (The children burn CPU in user
  // mode; the main process's malloc and dlopen storms spend theirs mostly in
  // the kernel, where perf signals are not raised on purpose: its kernel
  // time only reaches the samples through the next user-mode sample's weight.)
  const Profile& p = run.profile;
  int judged = 0;
  for (size_t i = 0; i < p.processes.size(); ++i) {
    int64_t cpu_ns = 0, samples = 0;
    for (const Sample& s : p.samples) {
      if (s.process != i) continue;
      if (s.kind == SampleKind::kWall) cpu_ns += s.cpu_ns;
      else samples += s.count;
    }
    if (p.processes[i].role == "main") {
      EXPECT_GT(samples, 0) << p.processes[i].file;
      continue;
    }
    if (cpu_ns < 40000000) continue;
    ++judged;
    EXPECT_GE(samples, cpu_ns / 1000000 / 5)
        << p.processes[i].file << " " << p.processes[i].role << " cpu_ms=" << cpu_ns / 1000000;
  }
  EXPECT_GT(judged, 0);
  auto stages = ByStage(p);
  for (const char* stage : {"malloc", "dl", "train", "exec_child"}) {
    EXPECT_GT(stages[stage].cpu_samples, 0) << stage;
  }
  bool child_stage = false;
  for (const auto& [name, t] : stages) child_stage |= name.rfind("child", 0) == 0 && t.cpu_samples > 0;
  EXPECT_TRUE(child_stage);
}

}  // namespace
}  // namespace dlprof
