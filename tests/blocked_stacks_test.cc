// Off-CPU time with the stack the thread blocked in, end to end: the
// collector walks a blocked thread's native stack from the sp and pc of
// /proc/<tid>/syscall, and its Python frames, without signalling it
// (core/collector.cc, WalkBlocked). Real processes, profiled with
// `dlprof run`, read back through the reader and symbolizer the reports use.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "readers/dlprof_reader.h"
#include "readers/profile.h"
#include "readers/symbolizer.h"
#include "tests/support/files.h"
#include "tests/support/pprof_wire.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::ReadFile;
using testing::RunProcess;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";

struct ProfiledRun {
  std::string dir;
  ProcessResult result, report;
  Profile profile;
  std::vector<std::string> errors;
  std::string Where() const { return "(run folder " + dir + ")"; }
};

// Profiles `command`: a program linked with libdlprof through `dlprof run`;
// Debian's python3 (not instrumented) with libdlprof preloaded as
// python_frames_test does (with the sanitizer's runtime before it in an
// ASan build), then `dlprof report`.
// `wrapper`, if any, runs `dlprof run` itself (a seccomp profile both inherit).
// `env`: more variables for the run.
ProfiledRun ProfileCommand(const std::vector<std::string>& command, int timeout_s = 120,
                           const std::string& wrapper = "",
                           const std::map<std::string, std::string>& env = {}) {
  ProfiledRun run;
  run.dir = MakeTempDir("dlprof-blocked");
  if (command[0] == testing::kDebianPython) {
    std::map<std::string, std::string> all = {
        {"PYTHONPATH", testing::kUnset},
        {"DLPROF_SAMPLE", "1"},
        {"DLPROF_OUT", run.dir + "/out"},
        {"LD_PRELOAD", testing::PreloadIntoUninstrumented(DLPROF_LIB_PATH)}};
    all.insert(env.begin(), env.end());
    run.result = RunProcess(command, all, timeout_s);
    run.report = RunProcess({kDlprof, "report", run.dir + "/out", "-o", run.dir + "/report"}, {},
                            timeout_s);
  } else {
    std::vector<std::string> argv = {kDlprof, "run", "-o", run.dir + "/out", "-r",
                                     run.dir + "/report", "--"};
    if (!wrapper.empty()) argv.insert(argv.begin(), wrapper);
    argv.insert(argv.end(), command.begin(), command.end());
    run.result = RunProcess(argv, env, timeout_s);
  }
  std::string error;
  const std::vector<std::string> files = ListRunFiles(run.dir + "/out", &error);
  if (!error.empty()) run.errors.push_back(error);
  ReadDlprofFiles(files, &run.profile, &run.errors);
  Symbolizer().SymbolizeProfile(&run.profile);
  return run;
}

// A stack's frame names, leaf first (inlined frames each).
std::vector<const Frame*> Frames(const Profile& p, uint32_t stack) {
  std::vector<const Frame*> out;
  for (uint32_t id : p.stacks[stack]) {
    for (const Frame& f : p.locations[id].frames) out.push_back(&f);
  }
  return out;
}

bool Named(const Frame* f, const std::string& name) {
  return f->function.find(name) != std::string::npos;
}

std::string Show(const Profile& p, uint32_t stack) {
  std::string out;
  for (const Frame* f : Frames(p, stack)) out += "  " + f->function + " " + f->file + "\n";
  return out;
}

const std::string& StageOf(const Profile& p, const Sample& s) {
  static const std::string none;
  const auto& path = p.stage_paths[s.stage_path];
  return path.empty() ? none : p.stages[path.back()];
}

int64_t BlockedNs(const Sample& s) {
  return std::max<int64_t>(0, s.wall_ns - s.cpu_ns - s.wait_ns);
}

// A thread blocked in read() inside BlockedReadOuter -> Middle -> Inner:
// its off-CPU time carries that chain under "[off-cpu: read]", for nearly
// all of the stage's blocked time, and every report shows it.
void ExpectTheChainInEveryReport(const ProfiledRun& run) {
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_TRUE(run.errors.empty()) << run.errors[0];
  int64_t stage_blocked = 0, chain_blocked = 0;
  std::string some;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kWall || s.on_cpu || StageOf(run.profile, s) != "blocked_read")
      continue;
    stage_blocked += BlockedNs(s);
    const std::vector<const Frame*> f = Frames(run.profile, s.stack);
    ASSERT_FALSE(f.empty());
    // The pseudo frame stays the leaf, whatever the stack under it.
    EXPECT_EQ(f[0]->function, "[off-cpu: read]") << Show(run.profile, s.stack);
    size_t inner = 0;
    while (inner < f.size() && !Named(f[inner], "BlockedReadInner")) ++inner;
    if (inner + 2 < f.size() && Named(f[inner + 1], "BlockedReadMiddle") &&
        Named(f[inner + 2], "BlockedReadOuter")) {
      chain_blocked += BlockedNs(s);
    } else if (some.empty()) {
      some = Show(run.profile, s.stack);
    }
  }
  // 30 reads 50 ms apart: about 1.5 s blocked in the stage.
  ASSERT_GT(stage_blocked, 1000000000) << run.Where();
  std::printf("blocked %.3f s in the stage, %.1f%% of it in the chain\n", stage_blocked / 1e9,
              100.0 * static_cast<double>(chain_blocked) / static_cast<double>(stage_blocked));
  EXPECT_GE(static_cast<double>(chain_blocked) / static_cast<double>(stage_blocked), 0.8)
      << "blocked " << stage_blocked << " ns, in the chain " << chain_blocked
      << " ns; a stack without it:\n"
      << some << run.Where();

  // The reports: the off-CPU folded stacks, the pprof profile, the page's data.
  ASSERT_EQ(run.result.exit_code, 0);
  const std::string folded = ReadFile(run.dir + "/report/stacks.offcpu.folded");
  bool line = false;
  for (size_t at = 0; at < folded.size();) {
    const size_t end = folded.find('\n', at);
    const std::string l = folded.substr(at, end - at);
    const size_t outer = l.find("BlockedReadOuter"), middle = l.find("BlockedReadMiddle"),
                 inner = l.find("BlockedReadInner"), leaf = l.find(";[off-cpu: read] ");
    if (l.rfind("[stage blocked_read];", 0) == 0 && outer != std::string::npos &&
        middle != std::string::npos && inner != std::string::npos && leaf != std::string::npos &&
        outer < middle && middle < inner && inner < leaf) {
      line = true;
    }
    if (end == std::string::npos) break;
    at = end + 1;
  }
  EXPECT_TRUE(line) << "stacks.offcpu.folded:\n" << folded.substr(0, 3000) << run.Where();
  // Blocked stacks are wall ticks: they are in the wall profile.
  const std::string wall = testing::Gunzip(ReadFile(run.dir + "/report/profile.wall.pb.gz"));
  EXPECT_NE(wall.find("BlockedReadInner"), std::string::npos) << run.Where();
  const std::string page = ReadFile(run.dir + "/report/report.html");
  EXPECT_NE(page.find("BlockedReadInner"), std::string::npos) << run.Where();
}

TEST(BlockedStacks, ReadInAKnownChainOfFunctions) {
  ExpectTheChainInEveryReport(ProfileCommand({ProgramPath("blocked_read"), "chain", "30", "50"}));
}

// Most walks of `run` were taken again, not walked anew.
void ExpectWalksTakenAgain(const ProfiledRun& run) {
  uint64_t walks = 0, reused = 0;
  for (const Process& p : run.profile.processes) {
    if (auto it = p.counters.find("blocked_walks"); it != p.counters.end()) walks += it->second;
    if (auto it = p.counters.find("blocked_walks_reused"); it != p.counters.end()) {
      reused += it->second;
    }
  }
  std::printf("%llu walks, %llu reused\n", static_cast<unsigned long long>(walks),
              static_cast<unsigned long long>(reused));
  EXPECT_GT(walks, 50u) << run.Where();
  EXPECT_GT(reused, walks / 2) << run.Where();
}

// A thread that blocks again and again where it blocked before (300 reads,
// 5 ms apart: woken at every tick) is walked once: later ticks check the
// words that walk read, in place, and take its frames again
// (Collector::NativeWalk). The chain stays right.
TEST(BlockedStacks, AThreadBlockedAgainWhereItWasIsNotWalkedAgain) {
  const ProfiledRun run = ProfileCommand({ProgramPath("blocked_read"), "chain", "300", "5"});
  ExpectTheChainInEveryReport(run);
  ExpectWalksTakenAgain(run);
}

// The same chain blocked in syscall(SYS_read), as Rust's futex waits and
// raw reads block: libdlprof interposes syscall(), and its frames there keep
// their CFA off %rbp so that the walk goes on through them to the program.
TEST(BlockedStacks, ReadThroughTheInterposedSyscallKeepsItsChain) {
  ExpectTheChainInEveryReport(
      ProfileCommand({ProgramPath("blocked_read"), "chain-syscall", "30", "50"}));
}

// In a container whose seccomp profile refuses process_vm_readv (EPERM, as
// runtimes without CAP_SYS_PTRACE may), the stack is copied through
// /proc/self/mem instead: the same chain, as often.
TEST(BlockedStacks, ReadInAKnownChainWhereProcessVmReadvIsRefused) {
  ExpectTheChainInEveryReport(
      ProfileCommand({ProgramPath("blocked_read"), "chain", "30", "50"}, 120,
                     std::string(DLPROF_BUILD_DIR) + "/tests/harm/deny_vm_readv",
                     // The helper would inherit the filter: it reads nothing.
                     {{"DLPROF_COLLECTOR", "thread"}}));
}

// A thread that wakes and blocks again all the time, alternately through
// RaceA1 -> RaceA2 -> RaceBlock and RaceB1 -> RaceB2 -> RaceBlock, at the
// same sp and pc in read(): a walk the thread woke during must be dropped,
// so every stack is one of the two real chains, never a mix.
void ExpectNoWrongStackWhenTheThreadWakesMidWalk(std::map<std::string, std::string> env) {
  env["DLPROF_CHECK_REUSED_WALKS"] = "1";
  ProfiledRun run = ProfileCommand({ProgramPath("blocked_read"), "race", "6000", "300"}, 120, "",
                                   env);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_TRUE(run.errors.empty()) << run.errors[0];
  int with_chain = 0, a = 0, b = 0;
  int64_t a_ns = 0, b_ns = 0;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kWall || s.on_cpu || StageOf(run.profile, s) != "race") continue;
    const std::vector<const Frame*> f = Frames(run.profile, s.stack);
    size_t block = 0;
    while (block < f.size() && !Named(f[block], "RaceBlock")) ++block;
    bool named = false;
    for (const Frame* x : f) named = named || Named(x, "RaceA") || Named(x, "RaceB");
    if (block == f.size()) {
      EXPECT_FALSE(named) << "a chain without its RaceBlock:\n" << Show(run.profile, s.stack);
      continue;
    }
    ++with_chain;
    // A walk may stop early (the first one, before the program's unwind
    // rows are decoded): a prefix of a real chain is right, a mix never is.
    if (block + 1 == f.size()) continue;
    const bool a2 = Named(f[block + 1], "RaceA2"), b2 = Named(f[block + 1], "RaceB2");
    EXPECT_TRUE(a2 || b2) << "not a real chain:\n" << Show(run.profile, s.stack);
    if (block + 2 == f.size()) continue;
    const bool chain_a = a2 && Named(f[block + 2], "RaceA1");
    const bool chain_b = b2 && Named(f[block + 2], "RaceB1");
    EXPECT_TRUE(chain_a || chain_b) << "not a real chain:\n" << Show(run.profile, s.stack);
    a += chain_a;
    b += chain_b;
    (chain_a ? a_ns : b_ns) += chain_a || chain_b ? BlockedNs(s) : 0;
  }
  uint64_t walks = 0, dropped = 0, mismatched = 0;
  for (const Process& p : run.profile.processes) {
    if (auto it = p.counters.find("blocked_walks"); it != p.counters.end()) walks += it->second;
    // A walk taken again (Collector::NativeWalk) is walked anew too here:
    // none differs. (Taken on its pc and sp alone, dozens did.)
    if (auto it = p.counters.find("blocked_walks_reuse_mismatched"); it != p.counters.end()) {
      mismatched += it->second;
    }
    if (auto it = p.counters.find("blocked_walks_dropped"); it != p.counters.end()) {
      dropped += it->second;
    }
  }
  // Not vacuous: both chains were seen blocked, and the thread woke during
  // some walks (one every ~300 us, a walk takes tens of us): those were
  // noticed and dropped. (Without the check after the walk none is dropped:
  // each walk reads one copy of the stack, taken in one system call, and no
  // mixed stack was seen even then; the check is what guarantees it.)
  ::testing::Test::RecordProperty("walks", std::to_string(walks));
  ::testing::Test::RecordProperty("dropped", std::to_string(dropped));
  std::printf("%d records with a chain (A %d, B %d); %llu walks, %llu dropped\n", with_chain, a, b,
              static_cast<unsigned long long>(walks), static_cast<unsigned long long>(dropped));
  EXPECT_GT(a, 0) << run.Where();
  EXPECT_GT(b, 0) << run.Where();
  EXPECT_EQ(mismatched, 0u) << run.Where();
  // Each chain's share of the blocked time is the program's own: a walk
  // taken again where the thread blocked before (Collector::NativeWalk) is
  // the same chain. (Taking it on the pc and sp alone gave A 0.93.)
  long long truth_a = 0, truth_b = 0;
  ASSERT_EQ(std::sscanf(run.result.out.c_str(), "read %*d bytes (%*d)\nrace_a_ns=%lld race_b_ns=%lld",
                        &truth_a, &truth_b),
            2)
      << run.result.out;
  ASSERT_GT(a_ns + b_ns, 0);
  EXPECT_NEAR(static_cast<double>(a_ns) / static_cast<double>(a_ns + b_ns),
              static_cast<double>(truth_a) / static_cast<double>(truth_a + truth_b), 0.15)
      << a_ns << " ns in A, " << b_ns << " in B; the program: " << run.result.out << run.Where();
  DLPROF_SKIP_TIMING_UNDER_SANITIZER();  // wake-ups during walks need the walks' usual speed
  EXPECT_GT(dropped, 0u) << walks << " walks" << run.Where();
}

TEST(BlockedStacks, AThreadThatWakesMidWalkNeverGetsAWrongStack) {
  ExpectNoWrongStackWhenTheThreadWakesMidWalk({});
}

// A Python thread sleeping in slow_io() from reader_loop(), and a forked
// worker blocked in os.read() in slow_io() from worker_main(): both show
// slow_io (with its file) in their off-CPU stacks.
// Every process of `run` was served by the collector `place` ("thread", or
// "process" under DLPROF_COLLECTOR=process).
void ExpectCollector(const ProfiledRun& run, const std::string& place) {
  for (const Process& proc : run.profile.processes) {
    auto it = proc.fields.find("collector");
    EXPECT_EQ(it == proc.fields.end() ? std::string("thread") : it->second, place)
        << "pid " << proc.pid << run.Where();
  }
}

// ---- the same from the collector process (DLPROF_COLLECTOR=process) ----
// The helper walks the blocked thread's stack over a copy it reads with
// process_vm_readv, with the unwind tables it builds into the arena
// (issue 11, phase 4); before, such records were the leaf alone.
const std::map<std::string, std::string> kProcess = {{"DLPROF_COLLECTOR", "process"}};

TEST(BlockedStacks, CollectorProcessReadsAKnownChainOfFunctions) {
  const ProfiledRun run =
      ProfileCommand({ProgramPath("blocked_read"), "chain", "30", "50"}, 120, "", kProcess);
  ExpectCollector(run, "process");
  ExpectTheChainInEveryReport(run);
}

// From outside, a walk taken again is checked with one process_vm_readv of
// the words it read.
TEST(BlockedStacks, CollectorProcessDoesNotWalkAThreadBlockedAgainWhereItWas) {
  const ProfiledRun run =
      ProfileCommand({ProgramPath("blocked_read"), "chain", "300", "5"}, 120, "", kProcess);
  ExpectCollector(run, "process");
  ExpectTheChainInEveryReport(run);
  ExpectWalksTakenAgain(run);
}

TEST(BlockedStacks, CollectorProcessNeverGivesAThreadThatWakesMidWalkAWrongStack) {
  ExpectNoWrongStackWhenTheThreadWakesMidWalk(kProcess);
}

// blocked_io.py profiled with `env`: a thread and a forked worker block in
// slow_io(), called by reader_loop() and worker_main().
void ExpectPythonFunctionsOfABlockedThreadAndWorker(const std::map<std::string, std::string>& env,
                                                    const std::string& collector) {
  const std::string script = std::string(DLPROF_SOURCE_DIR) + "/tests/python/blocked_io.py";
  ProfiledRun run = ProfileCommand({testing::kDebianPython, script, "1.5"}, 120, "", env);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_TRUE(run.errors.empty()) << run.errors[0];
  ExpectCollector(run, collector);
  std::map<int, int64_t> slow_io_ns;  // by pid
  std::map<std::string, int64_t> callers;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kWall || s.on_cpu) continue;
    const std::vector<const Frame*> f = Frames(run.profile, s.stack);
    for (size_t i = 0; i < f.size(); ++i) {
      if (!f[i]->python || f[i]->function != "slow_io") continue;
      EXPECT_EQ(f[i]->file, script) << Show(run.profile, s.stack);
      EXPECT_EQ(f[0]->function.rfind("[off-cpu: ", 0), 0u) << Show(run.profile, s.stack);
      slow_io_ns[run.profile.processes[s.process].pid] += BlockedNs(s);
      if (i + 1 < f.size() && f[i + 1]->python) callers[f[i + 1]->function] += BlockedNs(s);
      break;
    }
  }
  // Two processes, each blocked in slow_io for most of 1.5 s.
  ASSERT_EQ(slow_io_ns.size(), 2u) << run.Where();
  for (const auto& [pid, ns] : slow_io_ns) EXPECT_GT(ns, 500000000) << "pid " << pid << run.Where();
  EXPECT_GT(callers["reader_loop"], 500000000) << run.Where();
  EXPECT_GT(callers["worker_main"], 500000000) << run.Where();
  const std::string folded = ReadFile(run.dir + "/report/stacks.offcpu.folded");
  EXPECT_NE(folded.find("reader_loop (blocked_io.py:"), std::string::npos)
      << folded.substr(0, 3000);
  EXPECT_NE(folded.find("slow_io (blocked_io.py:"), std::string::npos) << folded.substr(0, 3000);
  // pprof's view of the same: the wall profile's blocked ticks (cpu=off).
  if (access("/usr/bin/go", X_OK) == 0) {
    const ProcessResult top = RunProcess({"/usr/bin/go", "tool", "pprof", "-top", "-cum",
                                          "-tagfocus=cpu=off", "-nodecount=30",
                                          run.dir + "/report/profile.wall.pb.gz"});
    ASSERT_EQ(top.exit_code, 0) << top.err;
    for (const char* fn : {" slow_io\n", " reader_loop\n", " worker_main\n"}) {
      EXPECT_NE(top.out.find(fn), std::string::npos) << fn << top.out;
    }
  }
}

TEST(BlockedStacks, PythonFunctionsOfABlockedThreadAndWorker) {
#ifdef DLPROF_UNDER_TSAN
  GTEST_SKIP() << "TSan's runtime cannot be preloaded into an uninstrumented python3";
#endif
  ExpectPythonFunctionsOfABlockedThreadAndWorker({{"DLPROF_COLLECTOR", "thread"}}, "thread");
}

// The same from the collector process: it reads the blocked threads' Python
// frames from outside (process_vm_readv), under the leaf the kernel reports
// (no native stack yet: no unwind tables there).
TEST(BlockedStacks, CollectorProcessReadsThePythonFunctionsOfABlockedThreadAndWorker) {
#ifdef DLPROF_UNDER_TSAN
  GTEST_SKIP() << "TSan's runtime cannot be preloaded into an uninstrumented python3";
#endif
  ExpectPythonFunctionsOfABlockedThreadAndWorker({{"DLPROF_COLLECTOR", "process"}}, "process");
}

// A torch DataLoader whose workers block in slow_io() inside __getitem__:
// the verdict calls it I/O-bound and names slow_io, from the blocked
// stacks (it has almost no CPU samples).
void ExpectTheIoBoundDataLoadersCulprit(const std::map<std::string, std::string>& env,
                                        const std::string& collector) {
  const std::string script = std::string(DLPROF_SOURCE_DIR) + "/tests/python/blocked_dataloader.py";
  ProfiledRun run = ProfileCommand({testing::kDebianPython, script}, 240, "", env);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ExpectCollector(run, collector);
  const nlohmann::json summary =
      nlohmann::json::parse(ReadFile(run.dir + "/report/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << run.Where();
  const nlohmann::json& v = summary["verdict"];
  SCOPED_TRACE(v.dump(2) + run.Where());
  EXPECT_EQ(v["bottleneck_kind"], "io");
  EXPECT_EQ(v["bottleneck_role"], "worker");
  const nlohmann::json& fs = v["bottleneck_functions"];
  ASSERT_TRUE(fs.is_array() && !fs.empty());
  EXPECT_EQ(fs[0]["name"], "slow_io");
  EXPECT_EQ(fs[0]["file"], script);
  EXPECT_GE(fs[0]["share"].get<double>(), 0.8);
}

TEST(BlockedStacks, AnIoBoundDataLoadersCulpritIsTheFunctionItBlocksIn) {
#ifdef DLPROF_UNDER_TSAN
  GTEST_SKIP() << "TSan's runtime cannot be preloaded into an uninstrumented python3";
#endif
  ExpectTheIoBoundDataLoadersCulprit({{"DLPROF_COLLECTOR", "thread"}}, "thread");
}

TEST(BlockedStacks, CollectorProcessFindsTheIoBoundDataLoadersCulprit) {
#ifdef DLPROF_UNDER_TSAN
  GTEST_SKIP() << "TSan's runtime cannot be preloaded into an uninstrumented python3";
#endif
  ExpectTheIoBoundDataLoadersCulprit({{"DLPROF_COLLECTOR", "process"}}, "process");
}

// blocked_chains.py under the helper: a thread blocks again and again
// through one of two Python chains whose frames sit at the same addresses
// over the same C stack. A Python walk taken again (Collector::PythonWalk,
// checked here against the walk anew) must be the chain the thread is in:
// never the other one's, and each chain's blocked time as the program
// measured it.
TEST(BlockedStacks, CollectorProcessTakesAPythonWalkAgainOnlyForTheSameChain) {
#ifdef DLPROF_UNDER_TSAN
  GTEST_SKIP() << "TSan's runtime cannot be preloaded into an uninstrumented python3";
#endif
  const std::string script = std::string(DLPROF_SOURCE_DIR) + "/tests/python/blocked_chains.py";
  ProfiledRun run = ProfileCommand({testing::kDebianPython, script, "1.5"}, 120, "",
                                   {{"DLPROF_COLLECTOR", "process"},
                                    {"DLPROF_CHECK_REUSED_WALKS", "1"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_TRUE(run.errors.empty()) << run.errors[0];
  ExpectCollector(run, "process");
  const nlohmann::json own = nlohmann::json::parse(run.result.out);
  const double own_a = own.at("a").get<double>(), own_b = own.at("b").get<double>();
  ASSERT_GT(own_a + own_b, 1e9) << run.result.out;
  int64_t a_ns = 0, b_ns = 0;
  int mixed = 0;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kWall || s.on_cpu) continue;
    const std::vector<const Frame*> f = Frames(run.profile, s.stack);
    for (size_t i = 0; i < f.size(); ++i) {
      if (!f[i]->python || f[i]->function != "wait_byte") continue;
      // A chain may be cut short by nothing here: the thread's stack is
      // three frames above main's.
      ASSERT_LT(i + 2, f.size()) << Show(run.profile, s.stack);
      const std::string via = f[i + 1]->function, chain = f[i + 2]->function;
      if (via == "via_a" && chain == "chain_a") {
        a_ns += BlockedNs(s);
      } else if (via == "via_b" && chain == "chain_b") {
        b_ns += BlockedNs(s);
      } else {
        ++mixed;
        ADD_FAILURE() << "not a real chain:\n" << Show(run.profile, s.stack);
      }
      break;
    }
  }
  uint64_t walks = 0, reused = 0, mismatched = 0;
  for (const Process& p : run.profile.processes) {
    auto count = [&](const char* key) {
      auto it = p.counters.find(key);
      return it == p.counters.end() ? uint64_t{0} : it->second;
    };
    walks += count("python_walks");
    reused += count("python_walks_reused");
    mismatched += count("python_walks_reuse_mismatched");
  }
  std::printf("python walks %llu, taken again %llu, differed %llu; blocked a %.0f ms (own %.0f), "
              "b %.0f ms (own %.0f)\n",
              static_cast<unsigned long long>(walks), static_cast<unsigned long long>(reused),
              static_cast<unsigned long long>(mismatched), a_ns / 1e6, own_a / 1e6, b_ns / 1e6,
              own_b / 1e6);
  EXPECT_EQ(mixed, 0);
  EXPECT_GT(reused, 0u) << walks << " walks" << run.Where();
  EXPECT_EQ(mismatched, 0u) << run.Where();
  // Each chain's share of the blocked time, within 12 points of the
  // program's own (the ticks sample a 2 ms cadence every 10 ms).
  ASSERT_GT(a_ns + b_ns, 500000000) << run.Where();
  const double share = static_cast<double>(a_ns) / static_cast<double>(a_ns + b_ns);
  EXPECT_NEAR(share, own_a / (own_a + own_b), 0.12) << run.Where();
}

// A PyTorch training run (bench/python_train.py: DataLoader, two forked
// workers, PIL): the walks of its blocked threads taken again
// (Collector::NativeWalk) are each walked anew too
// (DLPROF_CHECK_REUSED_WALKS) and none differs, in every process, through
// libtorch, CPython and libc frames. So are the Python walks the helpers
// take again (Collector::PythonWalk): the workers' queue feeder threads
// block where they were at each item.
TEST(BlockedStacks, WalksTakenAgainInATorchRunAreTheWalksAnew) {
#ifdef DLPROF_UNDER_TSAN
  GTEST_SKIP() << "TSan's runtime cannot be preloaded into an uninstrumented python3";
#endif
  const std::string script = std::string(DLPROF_SOURCE_DIR) + "/bench/python_train.py";
  const ProfiledRun run = ProfileCommand({testing::kDebianPython, script, "1"}, 240, "",
                                         {{"DLPROF_CHECK_REUSED_WALKS", "1"}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_TRUE(run.errors.empty()) << run.errors[0];
  uint64_t walks = 0, reused = 0, mismatched = 0;
  uint64_t py_walks = 0, py_reused = 0, py_mismatched = 0;
  int workers = 0;
  for (const Process& p : run.profile.processes) {
    auto count = [&](const char* key) {
      auto it = p.counters.find(key);
      return it == p.counters.end() ? uint64_t{0} : it->second;
    };
    EXPECT_NE(p.counters.find("blocked_walks_reuse_mismatched"), p.counters.end());
    walks += count("blocked_walks");
    reused += count("blocked_walks_reused");
    mismatched += count("blocked_walks_reuse_mismatched");
    py_walks += count("python_walks");
    py_reused += count("python_walks_reused");
    py_mismatched += count("python_walks_reuse_mismatched");
    workers += p.role == "worker";
  }
  std::printf("%d workers; %llu walks, %llu taken again, %llu differed\n", workers,
              static_cast<unsigned long long>(walks), static_cast<unsigned long long>(reused),
              static_cast<unsigned long long>(mismatched));
  EXPECT_EQ(workers, 2) << run.Where();
  EXPECT_GT(reused, walks / 4) << walks << " walks" << run.Where();
  EXPECT_EQ(mismatched, 0u) << run.Where();
  std::printf("python: %llu walks, %llu taken again, %llu differed\n",
              static_cast<unsigned long long>(py_walks), static_cast<unsigned long long>(py_reused),
              static_cast<unsigned long long>(py_mismatched));
  EXPECT_GT(py_reused, py_walks / 4) << py_walks << " Python walks" << run.Where();
  EXPECT_EQ(py_mismatched, 0u) << run.Where();
}

}  // namespace
}  // namespace dlprof
