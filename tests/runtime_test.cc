// End-to-end tests of the in-process runtime: real processes run with
// DLPROF_SAMPLE=1, their .dlprof files read back and compared with what the
// program is known to have done.
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "dlprof/format.h"
#include "readers/dlprof_reader.h"
#include "readers/symbolizer.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::RunProcess;

struct ProfiledRun {
  ProcessResult result;
  std::string out_dir;
  std::vector<std::string> files;
  Profile profile;
};

ProfiledRun Profiled(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
  ProfiledRun run;
  run.out_dir = MakeTempDir("dlprof-rt");
  env.emplace("DLPROF_SAMPLE", "1");
  env.emplace("DLPROF_OUT", run.out_dir);
  std::vector<std::string> argv = {ProgramPath("rt_workload")};
  argv.insert(argv.end(), args.begin(), args.end());
  run.result = RunProcess(argv, env);
  std::string error;
  run.files = ListRunFiles(run.out_dir, &error);
  for (const auto& f : run.files) {
    EXPECT_TRUE(ReadDlprofFile(f, &run.profile, &error)) << error;
  }
  return run;
}

// CPU samples per innermost stage name, optionally for one process.
std::map<std::string, int64_t> CpuSamplesByStage(const Profile& p, int process = -1) {
  std::map<std::string, int64_t> out;
  for (const Sample& s : p.samples) {
    if (s.kind != SampleKind::kCpu) continue;
    if (process >= 0 && s.process != static_cast<uint32_t>(process)) continue;
    const auto& path = p.stage_paths[s.stage_path];
    out[path.empty() ? "" : p.stages[path.back()]] += s.count;
  }
  return out;
}

// The collector each process of `run` said it had ("process", or "thread"
// with why not).
std::string CollectorOf(const ProfiledRun& run) {
  std::string out;
  for (const Process& p : run.profile.processes) {
    auto it = p.fields.find("collector");
    out += (out.empty() ? "" : ", ") + (it == p.fields.end() ? std::string("thread") : it->second);
  }
  return out;
}

// Under DLPROF_COLLECTOR=process (`process`) too: the collector process
// drains what the thread would have, and must find the same shares.
void ExpectStageSharesOfCpu(bool process) {
  std::map<std::string, std::string> env = {{"DLPROF_HZ", "1000"}};
  env["DLPROF_COLLECTOR"] = process ? "process" : "thread";
  ProfiledRun run = Profiled({"mix", "2000"}, env);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.files.size(), 1u);
  EXPECT_EQ(CollectorOf(run), process ? "process" : "thread");
  auto by_stage = CpuSamplesByStage(run.profile);
  double abc = by_stage["a"] + by_stage["b"] + by_stage["c"];
  ASSERT_GT(abc, 1000) << "too few samples to judge";
  EXPECT_NEAR(100.0 * by_stage["a"] / abc, 10.0, 3.0);
  EXPECT_NEAR(100.0 * by_stage["b"] / abc, 30.0, 3.0);
  EXPECT_NEAR(100.0 * by_stage["c"] / abc, 60.0, 3.0);
}

TEST(Runtime, StageSharesOfCpuMatchWhatTheProgramDid) { ExpectStageSharesOfCpu(false); }

TEST(Runtime, CollectorProcessFindsTheSameStageSharesOfCpu) { ExpectStageSharesOfCpu(true); }

// A stage that spends its CPU time in system calls raises few signals (the
// timer counts user mode only); the periods it loses come with the next
// sample, in the next stage. They must be given back to it: the stage-share
// answer is the product's, whatever the thread does with its CPU.
TEST(Runtime, StageThatLivesInSystemCallsKeepsItsShareOfCpu) {
  ProfiledRun run = Profiled({"syscalls", "150"}, {{"DLPROF_HZ", "1000"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  const char* out = run.result.out.c_str();
  long long syscalls_ns = 0, user_ns = 0;
  ASSERT_EQ(sscanf(strstr(out, "syscalls_ns="), "syscalls_ns=%lld user_ns=%lld", &syscalls_ns, &user_ns), 2)
      << out;
  auto by_stage = CpuSamplesByStage(run.profile);
  const double both = by_stage["syscalls"] + by_stage["user"];
  ASSERT_GT(both, 600) << "too few samples to judge";
  const double truth = static_cast<double>(syscalls_ns) / static_cast<double>(syscalls_ns + user_ns);
  const double measured = by_stage["syscalls"] / both;
  std::printf("[ runtime ] syscalls stage: %.3f of CPU by its own clock, %.3f by samples\n", truth,
              measured);
  DLPROF_SKIP_TIMING_UNDER_SANITIZER();
  // Before the periods were shared out by stage, it came out at 0.23-0.29
  // against 0.50.
  EXPECT_NEAR(measured, truth, 0.08);
}

// The runtime gives each executable mapping the build-id of the object
// loaded there (matched by address, core/proc_maps.cc); every one must be
// the build-id of the file the mapping names, the program's own included.
TEST(Runtime, EveryMappingCarriesItsFilesBuildId) {
  ProfiledRun run = Profiled({"mix", "200"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  const std::vector<Mapping>& mappings = run.profile.processes[0].mappings;
  ASSERT_FALSE(mappings.empty());
  int checked = 0;
  bool exe_checked = false;
  const std::string exe = ProgramPath("rt_workload");
  for (const Mapping& m : mappings) {
    if (m.path.empty() || m.path[0] != '/') continue;
    const std::string expected = ReadElfBuildId(m.path);
    if (expected.empty()) continue;  // no note, or not readable
    EXPECT_EQ(m.build_id, expected) << m.path;
    ++checked;
    char real_exe[PATH_MAX];
    if (realpath(exe.c_str(), real_exe) != nullptr && m.path == real_exe) exe_checked = true;
  }
  // The program, libdlprof, libc and libstdc++ at least.
  EXPECT_GE(checked, 4);
  EXPECT_TRUE(exe_checked) << "no mapping of " << exe;
}

// A fork child writes its parent's last maps when it loaded nothing since
// (it does not read them again), and its own when it did.
// What a fork child's walks ask of the unwind tables, its parent decodes
// too: the second of two children that burn CPU in libbz2 (loaded by the
// parent, never run there) inherits its rows and walks no frame in it
// without them, where the first had to ask. Each child's unwinder_state
// counts its own work only, by object ("M frames before their object's rows
// (libbz2.so.1.0 2, ...)"). Frames in other objects may miss in either
// child: a part of libc the first child was never sampled in, for one.
TEST(Runtime, ForkChildrenInheritTheRowsAnEarlierChildAskedFor) {
  // (The thread's SharedWants: a collector process's children decode on
  // their own, in the arena form there is not yet.)
  ProfiledRun run = Profiled({"forkwants"}, {{"DLPROF_COLLECTOR", "thread"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.profile.processes.size(), 3u);
  struct Child {
    int pid;
    uint64_t bz2_misses;
    std::string state;
  };
  std::vector<Child> children;
  const std::regex misses("; ([0-9]+) frames before their object's rows( \\(([^)]*)\\))?;");
  const std::regex bz2("(^|, )libbz2[^ ]* ([0-9]+)");
  for (const Process& p : run.profile.processes) {
    if (p.role == "main") continue;
    auto it = p.fields.find("unwinder_state");
    ASSERT_NE(it, p.fields.end()) << p.file;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(it->second, m, misses)) << it->second;
    const std::string by_object = m[3];
    std::smatch b;
    const uint64_t n = std::regex_search(by_object, b, bz2) ? std::stoull(b[2]) : 0;
    children.push_back({p.pid, n, it->second});
  }
  ASSERT_EQ(children.size(), 2u);
  std::sort(children.begin(), children.end(),
            [](const Child& a, const Child& b) { return a.pid < b.pid; });  // fork order
  EXPECT_GT(children[0].bz2_misses, 0u)
      << "the first child found libbz2's rows already: " << children[0].state;
  EXPECT_EQ(children[1].bz2_misses, 0u)
      << "the second child walked libbz2 frames its sibling had asked for: " << children[1].state;
}

TEST(Runtime, ForkChildrenWriteTheMapsOfTheirOwnAddressSpace) {
  ProfiledRun run = Profiled({"forkmaps"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.profile.processes.size(), 3u);
  using Key = std::tuple<uint64_t, uint64_t, uint64_t, std::string, std::string>;
  auto keys = [](const Process& p) {
    std::set<Key> out;
    for (const Mapping& m : p.mappings) out.insert({m.start, m.limit, m.offset, m.path, m.build_id});
    return out;
  };
  auto has_bz2 = [](const Process& p) {
    for (const Mapping& m : p.mappings) {
      if (m.path.find("libbz2") != std::string::npos) return true;
    }
    return false;
  };
  const Process* parent = nullptr;
  std::vector<const Process*> children;
  for (const Process& p : run.profile.processes) {
    (p.role == "main" ? parent : children.emplace_back()) = &p;
  }
  ASSERT_NE(parent, nullptr);
  ASSERT_EQ(children.size(), 2u);
  ASSERT_FALSE(parent->mappings.empty());
  int with_bz2 = 0;
  for (const Process* c : children) {
    if (has_bz2(*c)) {
      ++with_bz2;
      EXPECT_GT(c->mappings.size(), parent->mappings.size()) << c->file;
    } else {
      EXPECT_EQ(keys(*c), keys(*parent)) << c->file;
    }
  }
  EXPECT_EQ(with_bz2, 1);
  EXPECT_FALSE(has_bz2(*parent));
}

// Its samples in a library it loaded name that library, though the child
// ended by _exit before the helper's next flush (a second): the helper read
// the maps again when the cfi tables found a new object (so: the cfi
// unwinder, whose tables the helper builds).
TEST(Runtime, AForkChildThatQuickExitsKeepsTheLibraryItLoadedAndRanIn) {
  ProfiledRun run = Profiled({"forkmaps_quick_exit"}, {{"DLPROF_HZ", "1000"}, {"DLPROF_BACKEND", "cfi"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.profile.processes.size(), 2u);
  int64_t in_stage = 0, in_bz2 = 0;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kCpu || run.profile.processes[s.process].role == "main") continue;
    const auto& path = run.profile.stage_paths[s.stage_path];
    if (path.empty() || run.profile.stages[path.back()] != "compress") continue;
    in_stage += s.count;
    const auto& stack = run.profile.stacks[s.stack];
    if (!stack.empty() && run.profile.locations[stack[0]].module.find("libbz2") != std::string::npos) {
      in_bz2 += s.count;
    }
  }
  ASSERT_GT(in_stage, 100) << "too few samples to judge";
  EXPECT_GT(in_bz2, in_stage * 8 / 10) << in_bz2 << " of " << in_stage << " in libbz2";
}

TEST(Runtime, ThreadCreatedAfterStartIsSampled) {
  ProfiledRun run = Profiled({"mix", "1000"}, {{"DLPROF_HZ", "1000"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  auto by_stage = CpuSamplesByStage(run.profile);
  // The late thread burns 250 ms of CPU: about 250 samples at 1000 Hz.
  EXPECT_GT(by_stage["late"], 150);
  std::set<uint32_t> tids;
  for (const Sample& s : run.profile.samples) {
    if (s.kind == SampleKind::kCpu) tids.insert(s.tid);
  }
  EXPECT_GE(tids.size(), 2u);
}

void ExpectSleepingStageOffCpu(bool process) {
  std::map<std::string, std::string> env;
  env["DLPROF_COLLECTOR"] = process ? "process" : "thread";
  ProfiledRun run = Profiled({"mix", "500"}, env);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  EXPECT_EQ(CollectorOf(run), process ? "process" : "thread");
  // Wall ticks split each stage's time into running and blocked (and in what).
  std::map<std::string, int64_t> wall, blocked, records;
  std::string nap_state;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kWall) continue;
    std::string stage = StagePathName(run.profile, s.stage_path);
    wall[stage] += s.wall_ns;
    ++records[stage];
    if (!s.on_cpu) blocked[stage] += s.wall_ns - s.cpu_ns;
    if (stage == "nap" && !s.on_cpu) {
      nap_state = run.profile.locations[run.profile.stacks[s.stack][0]].frames[0].function;
    }
  }
  ASSERT_GT(wall["nap"], 200000000);  // slept 300 ms
  EXPECT_GT(static_cast<double>(blocked["nap"]) / wall["nap"], 0.9);
  EXPECT_EQ(nap_state, "[off-cpu: clock_nanosleep]");
  // The ~30 wall ticks of the one sleep are run-length encoded: a record per
  // change of state (the tick that saw the stage begin may say "running")
  // and per flush (one a second), not one per 10 ms tick.
  EXPECT_LE(records["nap"], 4) << "wall ticks are not run-length encoded";
  // Stage c never blocks. (Its CPU share of wall time depends on what else
  // runs on this machine; being runnable but not running is not off-CPU.)
  ASSERT_GT(wall["c"], 100000000);
  EXPECT_LT(static_cast<double>(blocked["c"]) / wall["c"], 0.05);
}

TEST(Runtime, SleepingStageComesOutOffCpu) { ExpectSleepingStageOffCpu(false); }

// From outside: the thread's CPU time from schedstat, its state from
// /proc/<pid>/task/<tid>/syscall.
TEST(Runtime, CollectorProcessFindsTheSleepingStageOffCpu) { ExpectSleepingStageOffCpu(true); }

// A process whose threads are steady (running a whole tick, or blocked all
// of it, in the same stage) is ticked less often: each wake-up of the
// collector costs CPU (BENCHMARKS.md). Its wall time is still all there, and
// a change of stage or state is still seen.
TEST(Runtime, SteadyThreadsAreTickedLessOften) {
  ProfiledRun run = Profiled({"steady", "1500"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  double spin_ms = 0, nap_ms = 0;
  ASSERT_EQ(sscanf(run.result.out.c_str(), "spin_ms=%lf nap_ms=%lf", &spin_ms, &nap_ms), 2)
      << run.result.out;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  const Process& proc = run.profile.processes[0];
  const double lifetime_ms = (proc.end_ns - proc.start_ns) / 1e6;
  const double ticks = static_cast<double>(proc.counters.at("wall_ticks"));
  // 10 ms ticks would be lifetime / 10; steady, one in five of them.
  EXPECT_LT(ticks, 0.5 * lifetime_ms / 10) << "lifetime " << lifetime_ms << " ms";
  EXPECT_GT(ticks, 0.5 * lifetime_ms / 50) << "lifetime " << lifetime_ms << " ms";
  std::map<std::string, double> wall_ms, blocked_ms;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kWall) continue;
    const std::string stage = StagePathName(run.profile, s.stage_path);
    wall_ms[stage] += s.wall_ns / 1e6;
    if (!s.on_cpu) blocked_ms[stage] += (s.wall_ns - s.cpu_ns) / 1e6;
  }
  // A slow tick is 25 to 75 ms (50 ms, drawn from 0.5 to 1.5 periods). The
  // change from spin to nap falls in one, and is split by the CPU the thread
  // used in it; what is left is the time spin was runnable but not running
  // in that tick, and the lateness of the ticks on a loaded machine.
  EXPECT_NEAR(wall_ms["spin"], spin_ms, 80);
  EXPECT_NEAR(wall_ms["nap"], nap_ms, 80);
  EXPECT_GT(blocked_ms["nap"], nap_ms - 80);
  // The last tick is at the exit: the thread's wall time runs to the end.
  double total_ms = 0;
  for (const auto& [stage, ms] : wall_ms) total_ms += ms;
  EXPECT_NEAR(total_ms, lifetime_ms, 80);
}

// The profile's own-cost counter for the collector thread against the
// kernel's count of it, read by the program itself just before it exits (so
// the counter, written at the exit, may only add the last flush's work). A
// fork child counts its own collector only: its parent's had used more than
// the slack by the fork.
TEST(Runtime, CollectorCpuCounterMatchesTheKernelsCountOfItsThread) {
  ProfiledRun run = Profiled({"collectorcpu", "600"},
                             {{"DLPROF_SNAPSHOT_MS", "1"}, {"DLPROF_COLLECTOR", "thread"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  long long child_ns = -1, at_fork_ns = -1, parent_ns = -1;
  const char* out = run.result.out.c_str();
  const char* child_line = strstr(out, "child_collector_ns=");
  const char* parent_line = strstr(out, "parent_at_fork_ns=");
  ASSERT_TRUE(child_line != nullptr && parent_line != nullptr) << out;
  ASSERT_EQ(sscanf(child_line, "child_collector_ns=%lld", &child_ns), 1) << out;
  ASSERT_EQ(sscanf(parent_line, "parent_at_fork_ns=%lld parent_collector_ns=%lld", &at_fork_ns,
                   &parent_ns),
            2)
      << out;
  ASSERT_EQ(run.profile.processes.size(), 2u);
  constexpr long long kSlackNs = 30000000;  // the exit's last drain and write
  EXPECT_GT(at_fork_ns, kSlackNs) << "the parent's collector did too little to tell them apart";
  for (const Process& p : run.profile.processes) {
    ASSERT_TRUE(p.counters.count("collector_cpu_ns")) << p.file;
    const long long counted = static_cast<long long>(p.counters.at("collector_cpu_ns"));
    const long long measured = p.role == "main" ? parent_ns : child_ns;
    EXPECT_GE(counted, measured) << p.file;
    EXPECT_LE(counted, measured + kSlackNs) << p.file;
  }
}

// The first intern of a stage runs on the program's own thread: allocating
// there moved the thread's later allocations and made the example's JPEG
// decoding 20-30% slower with sampling never armed (BENCHMARKS.md).
TEST(Runtime, AnnotationsDoNotAllocateFromTheProgramsHeap) {
  ProfiledRun run = Profiled({"nomalloc"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  EXPECT_NE(run.result.out.find("enabled=1"), std::string::npos) << run.result.out;
  EXPECT_NE(run.result.out.find("heap_growth=0 "), std::string::npos) << run.result.out;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  EXPECT_GE(run.profile.stages.size(), 101u);  // the 100 names were kept
  EXPECT_EQ(run.profile.processes[0].worker, 7);  // dlprof_set_worker, written by the collector
}

TEST(Runtime, ForkedWorkersEachWriteTheirOwnProfile) {
  ProfiledRun run = Profiled({"fork", "3"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.files.size(), 4u);
  std::map<std::string, int> roles;
  std::set<int> workers;
  for (size_t i = 0; i < run.profile.processes.size(); ++i) {
    const Process& p = run.profile.processes[i];
    roles[p.role]++;
    EXPECT_TRUE(p.complete) << p.file;
    // The cores the report's advice counts are the profiled machine's.
    cpu_set_t cpus;
    ASSERT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
    EXPECT_EQ(p.fields.count("cpus") ? p.fields.at("cpus") : "", std::to_string(CPU_COUNT(&cpus)));
    auto by_stage = CpuSamplesByStage(run.profile, static_cast<int>(i));
    if (p.role == "worker") {
      workers.insert(p.worker);
      // 300 ms of CPU in "work" at 100 Hz; none of the parent's samples.
      EXPECT_GT(by_stage["work"], 24) << p.file;
      EXPECT_EQ(by_stage["main_work"], 0) << p.file;
      EXPECT_EQ(p.ppid, run.profile.processes[0].role == "main" ? run.profile.processes[0].pid
                                                                 : p.ppid);
    } else {
      EXPECT_GT(by_stage["main_work"], 15);  // 200 ms of CPU at 100 Hz
      EXPECT_EQ(by_stage["work"], 0);
    }
  }
  EXPECT_EQ(roles["main"], 1);
  EXPECT_EQ(roles["worker"], 3);
  // Workers 0 and 2 named themselves 100 and 102; worker 1 got its fork order.
  EXPECT_EQ(workers, (std::set<int>{100, 1, 102}));
}

TEST(Runtime, WorkersLeavingByUnderscoreExitOrExecEndTheirProfile) {
  ProfiledRun run = Profiled({"leave"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  std::map<std::string, int> ends;
  for (size_t i = 0; i < run.profile.processes.size(); ++i) {
    const Process& p = run.profile.processes[i];
    if (p.role != "worker") continue;
    // Each ended its file: not reported as died.
    EXPECT_TRUE(p.complete) << p.file << " (end: " << p.end_reason << ")";
    ends[p.end_reason]++;
    auto by_stage = CpuSamplesByStage(run.profile, static_cast<int>(i));
    EXPECT_GT(by_stage["work"], 10) << p.file;  // 150 ms at 100 Hz
    if (p.end_reason == "exit") {
      // Sampling went on after the exec that failed.
      EXPECT_GT(by_stage["after_failed_exec"], 10) << p.file;
    }
  }
  EXPECT_EQ(ends["_exit 7"], 1);
  EXPECT_EQ(ends["exec"], 1);
  EXPECT_EQ(ends["exit"], 1);
}

// A fork child's file waits for its collector's first tick: one that execs
// at once (a shell's fork and exec) leaves no file, only its image's; one
// whose exec fails, or that leaves by _exit at once, still has its own.
TEST(Runtime, ForkChildThatExecsAtOnceLeavesOnlyItsImagesFile) {
  ProfiledRun run = Profiled({"forkexec"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  std::map<std::string, int> ends;
  std::map<std::string, int64_t> samples;
  for (size_t i = 0; i < run.profile.processes.size(); ++i) {
    const Process& p = run.profile.processes[i];
    EXPECT_TRUE(p.complete) << p.file << " (end: " << p.end_reason << ")";
    ends[p.end_reason]++;
    for (const auto& [stage, n] : CpuSamplesByStage(run.profile, static_cast<int>(i))) {
      samples[stage] += n;
    }
  }
  EXPECT_EQ(run.profile.processes.size(), 4u) << "main, the image, the failed exec, the _exit";
  EXPECT_EQ(ends["exec"], 0) << "the child that exec'd at once left a file of its own";
  EXPECT_EQ(ends["exit"], 3);  // main, the image, the child whose exec failed
  EXPECT_EQ(ends["_exit 3"], 1);
  EXPECT_GT(samples["image"], 5);              // 100 ms at 100 Hz
  EXPECT_GT(samples["after_failed_exec"], 5);  // sampled on after the failed exec
}

TEST(Runtime, SetitimerDoesNotOutliveExec) {
  ProfiledRun run = Profiled({"execbusy"}, {{"DLPROF_TIMER", "itimer"}, {"DLPROF_HZ", "250"}});
  // The shell loop runs ~0.3 s of CPU: a SIGPROF left armed would kill it.
  EXPECT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  EXPECT_TRUE(run.profile.processes[0].complete);
  EXPECT_EQ(run.profile.processes[0].end_reason, "exec");
  EXPECT_GT(CpuSamplesByStage(run.profile)["before_exec"], 5);
}

TEST(Runtime, SpawnedChildrenAndTheirWorkersJoinTheRun) {
  ProfiledRun run = Profiled({"spawn"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.files.size(), 3u);  // all in one run folder
  std::map<std::string, const Process*> by_stage;
  for (size_t i = 0; i < run.profile.processes.size(); ++i) {
    for (const auto& [stage, n] : CpuSamplesByStage(run.profile, static_cast<int>(i))) {
      if (n > 3) by_stage[stage] = &run.profile.processes[i];
    }
  }
  ASSERT_TRUE(by_stage.count("parent") && by_stage.count("spawned") && by_stage.count("grandchild"));
  const Process* parent = by_stage["parent"];
  const Process* spawned = by_stage["spawned"];
  const Process* grandchild = by_stage["grandchild"];
  EXPECT_EQ(parent->role, "main");
  EXPECT_EQ(spawned->role, "worker");
  EXPECT_EQ(spawned->ppid, parent->pid);
  EXPECT_EQ(grandchild->role, "worker");
  EXPECT_EQ(grandchild->ppid, spawned->pid);
  EXPECT_EQ(parent->fields.at("run_id"), grandchild->fields.at("run_id"));
}

TEST(Runtime, BaselineStepsRunUnsampled) {
  ProfiledRun run = Profiled({"steps", "12"}, {{"DLPROF_BASELINE_STEPS", "5"}, {"DLPROF_HZ", "1000"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  const Process& p = run.profile.processes[0];
  std::vector<const Interval*> steps;
  for (const Interval& iv : run.profile.intervals) {
    if (iv.kind == IntervalKind::kStep) steps.push_back(&iv);
  }
  ASSERT_EQ(steps.size(), 12u);
  // Sampling began when the fifth step ended (within a collector tick).
  EXPECT_GE(p.sampling_start_ns, steps[4]->end_ns);
  EXPECT_LT(p.sampling_start_ns, steps[5]->end_ns);
  int64_t in_baseline = 0, after = 0;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kCpu) continue;
    if (s.time_ns < steps[4]->end_ns) in_baseline += s.count;
    else after += s.count;
  }
  EXPECT_EQ(in_baseline, 0);
  EXPECT_GT(after, 100);  // 7 steps x 30 ms of CPU at 1000 Hz
}

// A forked worker ends no step of its own: it learns the baseline's end from
// the count the main process keeps in a shared page.
TEST(Runtime, BaselineEndsForForkedWorkersToo) {
  ProfiledRun run =
      Profiled({"stepsfork", "10"}, {{"DLPROF_BASELINE_STEPS", "4"}, {"DLPROF_HZ", "1000"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.profile.processes.size(), 2u);
  uint32_t main_index = run.profile.processes[0].role == "main" ? 0 : 1;
  const Process& worker = run.profile.processes[1 - main_index];
  ASSERT_EQ(worker.role, "worker");
  std::vector<const Interval*> steps;
  for (const Interval& iv : run.profile.intervals) {
    if (iv.kind == IntervalKind::kStep && iv.process == main_index) steps.push_back(&iv);
  }
  ASSERT_EQ(steps.size(), 10u);
  EXPECT_GE(worker.sampling_start_ns, steps[3]->end_ns);
  int64_t before = 0, after = 0;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kCpu || s.process == main_index) continue;
    (s.time_ns < steps[3]->end_ns ? before : after) += s.count;
  }
  EXPECT_EQ(before, 0);
  EXPECT_GT(after, 50);  // it burns ~500 ms of CPU after the baseline, at 1000 Hz
}

TEST(Runtime, NoEintrLeaksIntoBlockedThreadsAt1000Hz) {
  ProfiledRun run = Profiled({"eintr", "1500"}, {{"DLPROF_HZ", "1000"}});
  EXPECT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  EXPECT_NE(run.result.out.find("eintr=0"), std::string::npos);
  EXPECT_GT(CpuSamplesByStage(run.profile)["busy"], 500);
}

TEST(Runtime, WorkerKilledBySigkillLeavesAReadableProfile) {
  ProfiledRun run = Profiled({"kill", "2500"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  ASSERT_EQ(run.files.size(), 2u);
  double cpu_s = 0;
  auto pos = run.result.out.find("worker_cpu_s=");
  ASSERT_NE(pos, std::string::npos) << run.result.out;
  cpu_s = atof(run.result.out.c_str() + pos + 13);
  ASSERT_GT(cpu_s, 1.2) << "the worker got too little CPU to judge";
  const Process* worker = nullptr;
  for (size_t i = 0; i < run.profile.processes.size(); ++i) {
    if (run.profile.processes[i].role == "worker") {
      worker = &run.profile.processes[i];
      // Flushed at least once a second: all but the last second of its CPU
      // time is in the file (100 Hz; 0.2 s of slack for the kill's latency).
      EXPECT_GE(CpuSamplesByStage(run.profile, static_cast<int>(i))["doomed"],
                static_cast<int64_t>((cpu_s - 1.2) * 100 * 0.9));
    }
  }
  ASSERT_NE(worker, nullptr);
  auto collector = worker->fields.find("collector");
  if (collector != worker->fields.end() && collector->second == "process" && worker->complete) {
    // A collector process that read the zombie's status before the parent
    // reaped it ends the file with the cause.
    EXPECT_EQ(worker->end_reason, "signal 9");
    return;
  }
  EXPECT_FALSE(worker->complete);
  ASSERT_FALSE(worker->warnings.empty());
  EXPECT_NE(worker->warnings.back().find("no end record"), std::string::npos);
}

// Starts rt_workload MODE profiled, sends it `signo` after ~1 s, and reads
// the profile it leaves.
ProfiledRun SignalledRun(const std::string& mode, int signo, std::string* out) {
  ProfiledRun run;
  run.out_dir = MakeTempDir("dlprof-sig");
  std::string cmd = "DLPROF_SAMPLE=1 DLPROF_OUT=" + run.out_dir + " " + ProgramPath("rt_workload") +
                    " " + mode + " & pid=$!; sleep 1; kill -" + std::to_string(signo) +
                    " $pid; wait $pid; echo status=$?";
  run.result = RunProcess({"/bin/sh", "-c", cmd});
  *out = run.result.out;
  std::string error;
  run.files = ListRunFiles(run.out_dir, &error);
  for (const auto& f : run.files) EXPECT_TRUE(ReadDlprofFile(f, &run.profile, &error)) << error;
  return run;
}

TEST(Runtime, SigtermWithoutAHandlerStillEndsTheProfileCleanly) {
  std::string out;
  ProfiledRun run = SignalledRun("term", SIGTERM, &out);
  // The program still dies of SIGTERM, as it would without dlprof.
  EXPECT_NE(out.find("status=143"), std::string::npos) << out << run.result.err;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  const Process& p = run.profile.processes[0];
  auto collector = p.fields.find("collector");
  if (collector != p.fields.end() && collector->second == "process" && !p.complete) {
    // No handler is installed there: the cause is the zombie's status, and
    // the shell's wait reaped it before the collector process read it.
    ASSERT_FALSE(p.warnings.empty());
    EXPECT_NE(p.warnings.back().find("no end record"), std::string::npos);
  } else {
    EXPECT_TRUE(p.complete);
    EXPECT_EQ(p.end_reason, "signal 15");
  }
  EXPECT_GT(CpuSamplesByStage(run.profile)["spin"], 5);  // ~1 s of wall time, CPU as it gets
}

TEST(Runtime, ProgramsOwnSigtermHandlerIsHonoured) {
  std::string out;
  ProfiledRun run = SignalledRun("ownterm", SIGTERM, &out);
  EXPECT_NE(out.find("handled"), std::string::npos) << out;
  EXPECT_NE(out.find("status=0"), std::string::npos) << out;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  EXPECT_TRUE(run.profile.processes[0].complete);
  EXPECT_EQ(run.profile.processes[0].end_reason, "exit");
}

TEST(Runtime, TruncatedFileYieldsItsCompleteChunks) {
  ProfiledRun run = Profiled({"mix", "1500"});
  ASSERT_EQ(run.files.size(), 1u);
  std::ifstream in(run.files[0], std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t full_samples = run.profile.processes[0].samples;
  ASSERT_GT(full_samples, 100u);
  ASSERT_GE(full_samples, run.profile.processes[0].records);  // a record stands for 1+ periods
  std::string dir = MakeTempDir("dlprof-trunc");
  size_t previous = 0;
  for (double cut : {0.3, 0.6, 0.95}) {
    std::string path = dir + "/cut.dlprof";
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(data.data(),
                                                                   static_cast<std::streamsize>(data.size() * cut));
    Profile p;
    std::string error;
    ASSERT_TRUE(ReadDlprofFile(path, &p, &error)) << error;
    const Process& proc = p.processes[0];
    EXPECT_LE(proc.samples, full_samples);
    EXPECT_GE(proc.samples, previous);  // more file, never fewer samples
    previous = proc.samples;
    ASSERT_FALSE(proc.warnings.empty());
    EXPECT_NE(proc.warnings[0].find(path + ": offset "), std::string::npos) << proc.warnings[0];
  }
  EXPECT_GT(previous, 0u);
  // Damage in the middle: a flipped byte in one SAMPLES chunk loses exactly
  // that chunk's samples, and every chunk after it is still read. (A 1.5 s run
  // has only two or three sample chunks, so "more than half survive" is not a
  // property of the reader; the exact count is.)
  const uint64_t full_records = run.profile.processes[0].records;
  struct Chunk {
    size_t offset;
    uint32_t type, length;
  };
  std::vector<Chunk> chunks;
  for (size_t off = DLPROF_FILE_HEADER_SIZE; off + DLPROF_CHUNK_HEADER_SIZE <= data.size();) {
    uint32_t header[4];
    std::memcpy(header, data.data() + off, sizeof header);
    ASSERT_EQ(header[0], DLPROF_CHUNK_MAGIC) << "offset " << off;
    chunks.push_back({off, header[1], header[2]});
    off += DLPROF_CHUNK_HEADER_SIZE + header[2];
  }
  const Chunk* victim = nullptr;
  for (const Chunk& c : chunks) {
    if (c.type != DLPROF_CHUNK_SAMPLES) continue;
    if (!victim || std::llabs(static_cast<long long>(c.offset) - static_cast<long long>(data.size() / 2)) <
                       std::llabs(static_cast<long long>(victim->offset) - static_cast<long long>(data.size() / 2)))
      victim = &c;
  }
  ASSERT_NE(victim, nullptr);
  // The chunk's own sample count: payload = v base_time, v count, ...
  uint64_t values[2] = {0, 0};
  size_t at = victim->offset + DLPROF_CHUNK_HEADER_SIZE;
  for (uint64_t& v : values) {
    for (int shift = 0;; shift += 7) {
      const uint8_t byte = static_cast<uint8_t>(data[at++]);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) break;
    }
  }
  const uint64_t lost = values[1];
  ASSERT_GT(lost, 0u);
  std::string damaged = data;
  damaged[victim->offset + DLPROF_CHUNK_HEADER_SIZE + victim->length / 2] ^= 0x5a;
  std::string path = dir + "/damaged.dlprof";
  std::ofstream(path, std::ios::binary).write(damaged.data(), static_cast<std::streamsize>(damaged.size()));
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofFile(path, &p, &error)) << error;
  EXPECT_EQ(p.processes[0].records, full_records - lost);  // the chunk's count is of records
  EXPECT_TRUE(p.processes[0].complete);  // the END chunk after the damage is still read
  ASSERT_FALSE(p.processes[0].warnings.empty());
  EXPECT_NE(p.processes[0].warnings[0].find(path + ": offset " + std::to_string(victim->offset)), std::string::npos)
      << p.processes[0].warnings[0];
}

TEST(Runtime, BadEnvironmentValuesWarnOnceAndFallBack) {
  ProfiledRun run = Profiled({"mix", "300"}, {{"DLPROF_HZ", "fast"}, {"DLPROF_MODE", "verbose"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  EXPECT_NE(run.result.err.find("DLPROF_HZ='fast' is invalid"), std::string::npos) << run.result.err;
  EXPECT_NE(run.result.err.find("DLPROF_MODE='verbose' is invalid"), std::string::npos);
  ASSERT_EQ(run.profile.processes.size(), 1u);
  EXPECT_EQ(run.profile.processes[0].hz, 100);
  EXPECT_EQ(run.profile.processes[0].mode, "light");

  ProcessResult off = RunProcess({ProgramPath("rt_workload"), "enabled"},
                                 {{"DLPROF_SAMPLE", "maybe"}});
  EXPECT_EQ(off.exit_code, 0);
  EXPECT_NE(off.out.find("enabled=0"), std::string::npos);
  EXPECT_NE(off.err.find("DLPROF_SAMPLE='maybe'"), std::string::npos);
}

TEST(Runtime, InertWithoutDlprofSample) {
  std::string dir = MakeTempDir("dlprof-off");
  ProcessResult r = RunProcess({ProgramPath("rt_workload"), "enabled"},
                               {{"DLPROF_SAMPLE", testing::kUnset}, {"DLPROF_OUT", dir}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("enabled=0"), std::string::npos);
  EXPECT_EQ(r.err, "");
  std::string error;
  EXPECT_TRUE(ListRunFiles(dir, &error).empty());
}

TEST(Runtime, BufferOccupancyIsSnapshottedAndReportedLive) {
  ProfiledRun run = Profiled({"buffers"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  double mean = -1, empty = -1, full = -1;
  unsigned long long snaps = 0;
  ASSERT_EQ(sscanf(run.result.out.c_str(), "snapshots=%llu mean=%lf empty=%lf full=%lf", &snaps,
                   &mean, &empty, &full), 4) << run.result.out;
  EXPECT_GT(snaps, 40u);  // 800 ms at one per 10 ms
  EXPECT_NEAR(empty, 0.5, 0.1);
  EXPECT_NEAR(full, 0.5, 0.1);
  EXPECT_NEAR(mean, 0.5, 0.1);
  ASSERT_EQ(run.profile.buffers.size(), 1u);
  const BufferSeries& q = run.profile.buffers[0];
  EXPECT_EQ(q.name, "queue");
  EXPECT_EQ(q.capacity, 10u);
  EXPECT_GE(q.snapshots.size(), snaps);
}

// A fork child reports only the buffers it uses: its parent's, untouched,
// were 100%-empty phantoms in every DataLoader worker (issue 14).
TEST(Runtime, ForkChildReportsOnlyTheBuffersItUses) {
  ProfiledRun run = Profiled({"forkbuffers"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  int user = 0, idle = 0;
  ASSERT_EQ(sscanf(run.result.out.c_str(), "user=%d idle=%d", &user, &idle), 2) << run.result.out;
  ASSERT_EQ(run.profile.processes.size(), 3u);
  std::map<int, std::set<std::string>> names;  // pid -> buffers with snapshots
  for (const BufferSeries& b : run.profile.buffers) {
    const int pid = static_cast<int>(run.profile.processes[b.process].pid);
    EXPECT_FALSE(b.snapshots.empty()) << "buffer '" << b.name << "' of pid " << pid << " has no snapshot";
    names[pid].insert(b.name);
  }
  int parent = 0;
  for (const auto& proc : run.profile.processes) {
    if (proc.pid != user && proc.pid != idle) parent = static_cast<int>(proc.pid);
  }
  EXPECT_EQ(names[parent], (std::set<std::string>{"prefetch", "shared"}));
  EXPECT_EQ(names[user], (std::set<std::string>{"shared"}));
  EXPECT_TRUE(names[idle].empty()) << "the idle child reports its parent's buffers";
}

// What rt_workload's steps mode measured itself.
struct StepTruth {
  double wait_fraction = -1;
  double compute_ms = -1;
};
StepTruth ParseStepTruth(const std::string& out) {
  StepTruth t;
  sscanf(out.c_str(), "wait_fraction=%lf compute_ms=%lf", &t.wait_fraction, &t.compute_ms);
  return t;
}

TEST(Runtime, StepAndWaitIntervalsAreRecorded) {
  ProfiledRun run = Profiled({"steps", "10"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  StepTruth truth = ParseStepTruth(run.result.out);
  ASSERT_GT(truth.wait_fraction, 0) << run.result.out;
  int steps = 0, waits = 0;
  int64_t step_ns = 0, wait_ns = 0;
  for (const Interval& iv : run.profile.intervals) {
    if (iv.kind == IntervalKind::kStep) ++steps, step_ns += iv.end_ns - iv.begin_ns;
    if (iv.kind == IntervalKind::kWait) ++waits, wait_ns += iv.end_ns - iv.begin_ns;
  }
  EXPECT_EQ(steps, 10);
  EXPECT_EQ(waits, 10);
  EXPECT_NEAR(static_cast<double>(wait_ns) / step_ns, truth.wait_fraction, 0.02);
}

TEST(Runtime, DetailedModeRecordsStageSpans) {
  ProfiledRun run = Profiled({"steps", "5"}, {{"DLPROF_MODE", "detailed"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  StepTruth truth = ParseStepTruth(run.result.out);
  EXPECT_EQ(run.profile.processes[0].hz, 1000);
  int compute_spans = 0;
  double compute_ms = 0;
  for (const Interval& iv : run.profile.intervals) {
    if (iv.kind == IntervalKind::kStage && run.profile.stages[iv.stage] == "compute") {
      ++compute_spans;
      compute_ms += (iv.end_ns - iv.begin_ns) / 1e6;
    }
  }
  EXPECT_EQ(compute_spans, 5);
  EXPECT_NEAR(compute_ms, truth.compute_ms, 0.05 * truth.compute_ms);
}

TEST(Runtime, LibraryHasNoDynamicInitializers) {
  // The library constructor starts profiling; a global that needs a dynamic
  // initializer could be re-initialized after that start and lose its state.
  if (testing::kUnderSanitizer) {
    GTEST_SKIP() << "sanitizer build: ASan's init-order hooks and UBSan's checks add "
                    "_GLOBAL__sub_I_ functions of their own; the normal build checks this";
  }
  testing::ProcessResult nm = RunProcess({"/usr/bin/nm", DLPROF_LIB_PATH});
  ASSERT_EQ(nm.exit_code, 0) << nm.err;
  // One is allowed, from the libstdc++ linked in: system_error.cc's only
  // registers the destructors of its two constant-initialized categories
  // (so nothing there can be initialized again). Any other, libstdc++'s
  // locales and iostreams for one (std::filesystem brings them), fails.
  std::istringstream lines(nm.out);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("_GLOBAL__sub_I");
    if (at == std::string::npos) continue;
    EXPECT_EQ(line.substr(at), "_GLOBAL__sub_I_system_error.cc") << "dynamic initializer: " << line;
  }
}

// What libdlprof.so brings into every process: C names only (the API and
// the libc interposers; core/libdlprof.map keeps the C++ template instances
// local, which would otherwise bind a C++ program's own), and no library for
// a backend that is not the one in use (libunwind is dlopen'ed when chosen;
// zlib is linked in outside the sanitizer builds).
TEST(Runtime, LibraryExportsOnlyCNamesAndNeedsNoUnwinderLibrary) {
  testing::ProcessResult nm =
      RunProcess({"/usr/bin/nm", "-D", "--defined-only", DLPROF_LIB_PATH});
  ASSERT_EQ(nm.exit_code, 0) << nm.err;
  int api = 0;
  std::istringstream lines(nm.out);
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(line.rfind(' ') + 1);
    EXPECT_NE(name.rfind("_Z", 0), 0u) << "exported C++ symbol: " << name;
    if (name.rfind("dlprof_", 0) == 0) ++api;
  }
  EXPECT_GE(api, 10) << nm.out;
  testing::ProcessResult dynamic = RunProcess({"/usr/bin/readelf", "-d", DLPROF_LIB_PATH});
  ASSERT_EQ(dynamic.exit_code, 0) << dynamic.err;
  EXPECT_EQ(dynamic.out.find("[libunwind"), std::string::npos) << dynamic.out;
  EXPECT_EQ(dynamic.out.find("[liblzma"), std::string::npos) << dynamic.out;
  if (!testing::kUnderSanitizer) {
    EXPECT_EQ(dynamic.out.find("[libz."), std::string::npos) << dynamic.out;
    // libstdc++ is linked in: a C program or a shell loads neither it nor
    // libm for dlprof (libgcc_s stays: core/CMakeLists.txt).
    EXPECT_EQ(dynamic.out.find("[libstdc++"), std::string::npos) << dynamic.out;
    EXPECT_EQ(dynamic.out.find("[libm."), std::string::npos) << dynamic.out;
  }
}

// libdlprof's exception memory (core/exception_memory.cc), in a program
// linked as the library is: the exceptions its code can raise, dependent
// exceptions, and bad_alloc thrown, nested, while malloc fails.
TEST(Runtime, ExceptionMemoryOfOurOwnThrowsAndCatchesLikeLibstdcxx) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "sanitizer builds keep libstdc++ shared";
  const std::string check = std::string(DLPROF_BUILD_DIR) + "/tests/exception_memory_check";
  ASSERT_EQ(access(check.c_str(), X_OK), 0) << check << " not built: libstdc++ is not linked in";
  testing::ProcessResult r = RunProcess({check});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("nested throws with malloc exhausted: 103 caught\nok\n"), std::string::npos)
      << r.out << r.err;
}

TEST(Runtime, OutputFolderIsPrivateAndSymlinksAreRefused) {
  ProfiledRun run = Profiled({"mix", "100"});
  ASSERT_EQ(run.files.size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(run.files[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string run_dir = run.files[0].substr(0, run.files[0].rfind('/'));
  ASSERT_EQ(stat(run_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  std::string dir = MakeTempDir("dlprof-link");
  std::string link = dir + "/out";
  ASSERT_EQ(symlink(run_dir.c_str(), link.c_str()), 0);
  ProcessResult r = RunProcess({ProgramPath("rt_workload"), "mix", "100"},
                               {{"DLPROF_SAMPLE", "1"}, {"DLPROF_OUT", link}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("is a symlink: refused"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dlprof
