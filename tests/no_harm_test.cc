// "No harm" end-to-end tests (issue 11): ordinary, small, hostile programs
// (tests/harm/*.c, never linked with dlprof) run twice, without dlprof and
// with DLPROF_SAMPLE=1 DLPROF_HZ=1000 LD_PRELOAD=libdlprof.so, and what the
// program can observe is compared: stdout, exit status, its own fds' bytes,
// the signals it gets, its threads. A test passes when the profiled run
// behaves as the plain one, or when dlprof steps aside as documented: the
// program still behaves, stderr has exactly one more line, starting with
// "dlprof:", and the recorded profile stays readable (`dlprof report` exits
// 0). Each assertion prints what was observed.
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "readers/dlprof_reader.h"
#include "readers/symbolizer.h"
#include "tests/support/files.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::kUnset;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ReadFile;
using testing::RunProcess;

const std::string kLib = DLPROF_LIB_PATH;
const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";
const char* const kDirToken = "@DIR@";  // in argv: the run's own scratch folder

std::string Harm(const std::string& name) {
  return std::string(DLPROF_BUILD_DIR) + "/tests/harm/" + name;
}

std::string Show(const ProcessResult& r) {
  std::ostringstream s;
  s << "exit " << r.exit_code;
  if (r.term_signal != 0) s << ", killed by signal " << r.term_signal << " (" << strsignal(r.term_signal) << ")";
  s << "\n  stdout: <<" << r.out << ">>\n  stderr: <<" << r.err << ">>";
  return s.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

struct Run {
  ProcessResult result;
  std::string dir;  // scratch folder the program may be given (@DIR@)
};

struct Pair {
  Run plain, profiled;
  std::string tmp;  // holds both runs' folders
  std::string out;  // the profiled run's DLPROF_OUT
  std::vector<std::string> files;
  Profile profile;
  std::vector<std::string> read_errors;

  // CPU samples of the processes whose command line starts with `program`
  // (a path, as the tests run it; "" = all).
  uint64_t Samples(const std::string& program = "") const {
    uint64_t n = 0;
    for (const Process& p : profile.processes) {
      if (p.command.rfind(program, 0) == 0) n += p.samples;
    }
    return n;
  }
  std::string Processes() const {
    std::ostringstream s;
    s << files.size() << " file(s) in " << out << ":";
    for (const Process& p : profile.processes) {
      s << "\n  pid " << p.pid << " '" << p.command << "' role " << p.role << " timer " << p.timer
        << " unwinder " << p.unwinder << " samples " << p.samples << " dropped " << p.dropped
        << " complete " << p.complete << " end '" << p.end_reason << "' wall "
        << (p.end_ns - p.start_ns) / 1000000 << " ms, " << p.warnings.size() << " warning(s)";
    }
    for (const auto& e : read_errors) s << "\n  read error: " << e;
    return s.str();
  }
};

std::vector<std::string> WithDir(std::vector<std::string> argv, const std::string& dir) {
  for (auto& a : argv) {
    size_t at = a.find(kDirToken);
    if (at != std::string::npos) a.replace(at, strlen(kDirToken), dir);
  }
  return argv;
}

// The environment of a run without dlprof: none of its variables.
std::map<std::string, std::string> PlainEnv(const std::map<std::string, std::string>& extra = {}) {
  std::map<std::string, std::string> env = {{"LD_PRELOAD", kUnset}};
  for (const char* v : {"DLPROF_SAMPLE", "DLPROF_OUT", "DLPROF_HZ", "DLPROF_TIMER", "DLPROF_BACKEND",
                        "DLPROF_MODE", "DLPROF_RUN_ID", "DLPROF_RUN_MAIN_PID",
                        "DLPROF_BASELINE_STEPS", "DLPROF_WARMUP_STEPS", "DLPROF_SNAPSHOT_MS",
                        "DLPROF_MAX_FRAMES", "DLPROF_COLLECTOR"}) {
    env[v] = kUnset;
  }
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

std::map<std::string, std::string> ProfiledEnv(const std::string& out,
                                               const std::map<std::string, std::string>& extra = {}) {
  auto env = PlainEnv();
  env["DLPROF_SAMPLE"] = "1";
  env["DLPROF_HZ"] = "1000";
  env["LD_PRELOAD"] = kLib;
  env["DLPROF_OUT"] = out;
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

void ReadProfile(Pair* p) {
  std::string error;
  p->files = ListRunFiles(p->out, &error);
  if (!error.empty()) p->read_errors.push_back(error);
  ReadDlprofFiles(p->files, &p->profile, &p->read_errors);
}

// Runs argv without dlprof, then with it; `profiled_env` adds to (or
// overrides) the profiled run's environment, `both_env` is given to both.
Pair RunBoth(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& profiled_env = {},
             const std::map<std::string, std::string>& both_env = {}, int timeout_s = 60) {
  Pair p;
  p.tmp = MakeTempDir("dlprof-noharm");
  p.plain.dir = p.tmp + "/plain";
  p.profiled.dir = p.tmp + "/profiled";
  mkdir(p.plain.dir.c_str(), 0700);
  mkdir(p.profiled.dir.c_str(), 0700);
  p.out = p.tmp + "/out";
  p.plain.result = RunProcess(WithDir(argv, p.plain.dir), PlainEnv(both_env), timeout_s);
  auto env = ProfiledEnv(p.out, both_env);
  for (const auto& [k, v] : profiled_env) env[k] = v;
  p.profiled.result = RunProcess(WithDir(argv, p.profiled.dir), env, timeout_s);
  ReadProfile(&p);
  return p;
}

// Lines of `b` that are not in `a` (as multisets).
std::vector<std::string> ExtraLines(const std::string& a, const std::string& b) {
  std::vector<std::string> have = Lines(a), extra;
  for (const auto& line : Lines(b)) {
    auto it = std::find(have.begin(), have.end(), line);
    if (it != have.end()) have.erase(it);
    else extra.push_back(line);
  }
  return extra;
}

bool ReportReads(const std::string& out, const std::string& report_dir, std::string* why) {
  ProcessResult r = RunProcess({kDlprof, "report", out, "-o", report_dir}, PlainEnv(), 120);
  if (r.exit_code != 0) *why = "`dlprof report " + out + "` failed: " + Show(r);
  return r.exit_code == 0;
}

// The program behaved as without dlprof (exit status, signal, stdout), and
// stderr is the same or has exactly one more line, "dlprof: ...", with the
// recorded profile readable. *stepped_aside tells which.
::testing::AssertionResult NoHarm(const Pair& p, bool* stepped_aside = nullptr) {
  const ProcessResult& a = p.plain.result;
  const ProcessResult& b = p.profiled.result;
  if (stepped_aside != nullptr) *stepped_aside = false;
  if (a.exit_code != b.exit_code || a.term_signal != b.term_signal || a.out != b.out) {
    return ::testing::AssertionFailure() << "the program behaved differently under dlprof.\n without: "
                                         << Show(a) << "\n with:    " << Show(b);
  }
  std::vector<std::string> extra = ExtraLines(a.err, b.err);
  if (extra.empty()) return ::testing::AssertionSuccess();
  if (extra.size() != 1 || extra[0].rfind("dlprof:", 0) != 0) {
    return ::testing::AssertionFailure()
           << "stderr under dlprof has " << extra.size()
           << " extra line(s), not one 'dlprof:' step-aside line.\n without: " << Show(a)
           << "\n with:    " << Show(b);
  }
  std::string why;
  if (!ReportReads(p.out, p.tmp + "/report", &why)) {
    return ::testing::AssertionFailure() << "dlprof stepped aside (" << extra[0]
                                         << ") but what it recorded is not readable: " << why;
  }
  if (stepped_aside != nullptr) *stepped_aside = true;
  return ::testing::AssertionSuccess();
}

std::string FindPython() {
  const char* path = getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = dir + "/python3";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// ---------------------------------------------------------------------------
// 1. Perf events refused.

void ExpectSamplesWith(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                       const std::string& command) {
  Pair p = RunBoth(argv, env);
  ASSERT_EQ(p.plain.result.exit_code, 0) << "the program fails even without dlprof: " << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  EXPECT_EQ(p.profiled.result.exit_code, 0) << Show(p.profiled.result);
  // 2 threads x 1 s of CPU. At 1000 Hz that is ~2000 perf samples, but CPU-time
  // POSIX timers and ITIMER_PROF expire at most once per kernel tick (CONFIG_HZ,
  // often 250): ~500 and ~370 here. Any real sampling gives well over 100.
  EXPECT_GT(p.Samples(command), 100u) << p.Processes();
}

TEST(NoHarm, PerfRefusedBySeccompStillSamplesWithPosixTimers) {
  ExpectSamplesWith({Harm("deny_perf"), Harm("cpu_burn"), "1000", "2"}, {}, Harm("cpu_burn"));
}

TEST(NoHarm, PerfRefusedBySeccompAndPosixTimerAskedForStillSamples) {
  ExpectSamplesWith({Harm("deny_perf"), Harm("cpu_burn"), "1000", "2"}, {{"DLPROF_TIMER", "posix"}},
                    Harm("cpu_burn"));
}

// memfd_create refused (a container profile may): the shared arena is
// private memory, and a fork child is still sampled.
TEST(NoHarm, MemfdRefusedBySeccompStillSamplesForkedWorkers) {
  ExpectSamplesWith({Harm("deny_memfd"), Harm("fork_burn"), "500"}, {}, Harm("fork_burn"));
}

TEST(NoHarm, PosixTimerSamplesWithoutKillingTheProgram) {
  ExpectSamplesWith({Harm("cpu_burn"), "1000", "2"}, {{"DLPROF_TIMER", "posix"}}, Harm("cpu_burn"));
}

TEST(NoHarm, ItimerSamplesWithoutKillingTheProgram) {
  ExpectSamplesWith({Harm("cpu_burn"), "1000", "2"}, {{"DLPROF_TIMER", "itimer"}}, Harm("cpu_burn"));
}

// ---------------------------------------------------------------------------
// 2. dlprof's file descriptors among the program's.

void ExpectOwnBytesOnly(const std::string& how) {
  Pair p = RunBoth({Harm("close_all_fds"), kDirToken, how}, {}, {}, 20);
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  ASSERT_NE(p.plain.result.out.find("foreign records 0, short reads 0, extra bytes 0, CHNK seen 0"),
            std::string::npos)
      << "the program is wrong without dlprof: " << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  std::string plain_log = ReadFile(p.plain.dir + "/own.log");
  std::string profiled_log = ReadFile(p.profiled.dir + "/own.log");
  ASSERT_EQ(plain_log.size(), 300u * 64);
  EXPECT_EQ(profiled_log.find("CHNK"), std::string::npos)
      << "dlprof's chunks in the program's log file (" << profiled_log.size() << " bytes)";
  EXPECT_TRUE(profiled_log == plain_log)
      << "log file differs: " << profiled_log.size() << " bytes with dlprof, " << plain_log.size()
      << " without";
}

TEST(NoHarm, ProgramThatClosesEveryFdKeepsItsPipeClean) { ExpectOwnBytesOnly("range"); }

TEST(NoHarm, ProgramThatClosesEveryFdInALoopKeepsItsLogClean) { ExpectOwnBytesOnly("loop"); }

TEST(NoHarm, FdsReusedAfterCloseRangeStayOpenWhenThreadsExit) {
  Pair p = RunBoth({Harm("close_all_fds"), kDirToken, "range"}, {}, {}, 20);
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  // The lines about the program's fds: still open, same file, same /proc link.
  auto fd_lines = [](const std::string& out) {
    std::string s;
    for (const auto& line : Lines(out)) {
      if (line.rfind("fd", 0) == 0 && line.rfind("fds after", 0) != 0) s += line + "\n";
    }
    return s;
  };
  std::string want = fd_lines(p.plain.result.out);
  ASSERT_EQ(want,
            "fd 3: open 1, same file 1, /proc/self/fd unchanged 1\n"
            "fd 4: open 1, same file 1, /proc/self/fd unchanged 1\n"
            "fd 5: open 1, same file 1, /proc/self/fd unchanged 1\n"
            "fds 6..29: 24 open, 24 on the same file\n");
  EXPECT_EQ(fd_lines(p.profiled.result.out), want) << Show(p.profiled.result);
  EXPECT_EQ(p.profiled.result.term_signal, 0) << Show(p.profiled.result);
}

TEST(NoHarm, Dup2OntoLowFdsKeepsEveryLogTheProgramsOwn) {
  Pair p = RunBoth({Harm("dup2_log"), kDirToken});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  for (int fd = 3; fd <= 10; ++fd) {
    std::string name = "/log" + std::to_string(fd);
    std::string want = ReadFile(p.plain.dir + name), got = ReadFile(p.profiled.dir + name);
    ASSERT_GT(want.size(), 1000u);
    EXPECT_EQ(got.find("CHNK"), std::string::npos) << "dlprof's chunks in the program's fd " << fd;
    EXPECT_TRUE(got == want) << "fd " << fd << "'s log: " << got.size() << " bytes with dlprof, "
                             << want.size() << " without";
  }
}

TEST(NoHarm, LowFdLimitLeavesTheProgramAllItsFds) {
  Pair p = RunBoth({Harm("nofile_limit"), "64", "8"});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  // 64 less stdin/out/err and what the test's environment lets children inherit.
  ASSERT_GE(atoi(p.plain.result.out.c_str() + strlen("opened ")), 55) << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
}

// ---------------------------------------------------------------------------
// 3. dlprof's collector thread.

TEST(NoHarm, MainThreadPthreadExitStillEndsTheProcess) {
  Pair p = RunBoth({Harm("main_pthread_exit")}, {}, {}, 20);
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p)) << "(a process still running after 20 s is killed: signal 9)";
}

TEST(NoHarm, UnshareUserNamespaceWorksAsWithoutDlprof) {
  Pair p = RunBoth({Harm("unshare_user")});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  if (p.plain.result.out.find("= 0 (ok)") == std::string::npos) {
    GTEST_SKIP() << "unshare(CLONE_NEWUSER) fails here even without dlprof: " << p.plain.result.out;
  }
  EXPECT_TRUE(NoHarm(p));
}

// Known gap, not handled yet (RELIABILITY.md, "Not handled"): the collector is a thread of the process.
// Kept as the reproducer; run it with --gtest_also_run_disabled_tests.
TEST(NoHarm, DISABLED_ThreadCountInProcSelfTaskIsTheProgramsOwn) {
  Pair p = RunBoth({Harm("thread_count")});
  ASSERT_EQ(p.plain.result.out,
            "at start: 1\nafter work: 1\nwith 3 threads: 4\nafter join: 1\n");
  EXPECT_TRUE(NoHarm(p));
}

// ---------------------------------------------------------------------------
// 3b. The collector process (DLPROF_COLLECTOR=process, issue 11's phase 2):
// what the collector thread cannot do, done by the helper.

const std::map<std::string, std::string> kCollectorProcess = {{"DLPROF_COLLECTOR", "process"}};

// Every process of the run was served by a helper process, not a thread.
::testing::AssertionResult ServedByCollectorProcesses(const Pair& p, size_t processes) {
  if (p.profile.processes.size() != processes) {
    return ::testing::AssertionFailure() << "expected " << processes << " process(es)\n" << p.Processes();
  }
  for (const Process& proc : p.profile.processes) {
    auto it = proc.fields.find("collector");
    const std::string collector = it == proc.fields.end() ? "(none)" : it->second;
    if (collector != "process") {
      return ::testing::AssertionFailure() << "pid " << proc.pid << "'s collector: " << collector;
    }
  }
  return ::testing::AssertionSuccess();
}

std::string EndField(const Process& proc) {
  auto it = proc.fields.find("end");
  return it == proc.fields.end() ? "" : it->second;
}

// The reproducer of DISABLED_ThreadCountInProcSelfTaskIsTheProgramsOwn
// passes: the program counts only its own threads, at every point.
TEST(NoHarm, CollectorProcessLeavesProcSelfTaskToTheProgram) {
  Pair p = RunBoth({Harm("thread_count")}, kCollectorProcess);
  ASSERT_EQ(p.plain.result.out, "at start: 1\nafter work: 1\nwith 3 threads: 4\nafter join: 1\n");
  EXPECT_TRUE(NoHarm(p));
  ASSERT_TRUE(ServedByCollectorProcesses(p, 1));
  // 100 ms of the main thread's CPU and 20 ms of each worker's, at 1000 Hz.
  EXPECT_GT(p.Samples(Harm("thread_count")), 120u) << p.Processes();
  EXPECT_EQ(EndField(p.profile.processes[0]), "exit") << p.Processes();
}

// The thread loses what it has not written at a SIGKILL (up to a second:
// here all 400 ms, the first write being due at 1 s). The helper drains the
// arena after the death: every committed sample is there. Its END says
// "signal 9" when it read the zombie's exit status before the parent reaped
// it (a race it usually wins); else there is none, and the reader says the
// process died.
TEST(NoHarm, CollectorProcessKeepsTheSamplesOfASigkilledProgram) {
  Pair p = RunBoth({Harm("burn_then_sigkill"), "400"}, kCollectorProcess);
  ASSERT_EQ(p.plain.result.term_signal, SIGKILL) << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  ASSERT_TRUE(ServedByCollectorProcesses(p, 1));
  const uint64_t samples = p.Samples(Harm("burn_then_sigkill"));
  EXPECT_GE(samples, 340u) << "400 ms of CPU at 1000 Hz\n" << p.Processes();
  EXPECT_LE(samples, 460u) << p.Processes();
  const std::string end = EndField(p.profile.processes[0]);
  EXPECT_TRUE(end == "signal 9" || end.empty()) << end << "\n" << p.Processes();
}

// A fork child gets a helper of its own, with its own file; its _exit is
// written as such.
TEST(NoHarm, CollectorProcessServesEachForkChild) {
  Pair p = RunBoth({Harm("fork_burn"), "300"}, kCollectorProcess);
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  ASSERT_TRUE(ServedByCollectorProcesses(p, 2));
  const Process* child = nullptr;
  for (const Process& proc : p.profile.processes) {
    if (proc.role == "worker") child = &proc;
  }
  ASSERT_NE(child, nullptr) << p.Processes();
  EXPECT_GE(child->samples, 255u) << "300 ms of CPU at 1000 Hz\n" << p.Processes();
  EXPECT_LE(child->samples, 345u) << p.Processes();
  EXPECT_EQ(EndField(*child), "_exit 0") << p.Processes();
}

// Each image of a pid that execs itself has its file, ended "exec" by its
// helper after the image is gone; the last one's ends "exit".
TEST(NoHarm, CollectorProcessEndsEachImageOfAnExecChain) {
  Pair p = RunBoth({Harm("reexec"), "3"}, kCollectorProcess);
  ASSERT_EQ(p.plain.result.out, "done\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  ASSERT_TRUE(ServedByCollectorProcesses(p, 4));
  int execs = 0, exits = 0;
  for (const Process& proc : p.profile.processes) {
    const std::string end = EndField(proc);
    execs += end == "exec";
    exits += end == "exit";
  }
  EXPECT_EQ(execs, 3) << p.Processes();
  EXPECT_EQ(exits, 1) << p.Processes();
}

// The collector thread needs SIGTERM and SIGINT handlers to end the file
// (the program's sigaction still says SIG_DFL, but /proc's SigCgt shows them
// caught, and a stopped or vfork-waiting process ends late). The collector
// process sees the end from outside: no handler at all.
TEST(NoHarm, CollectorProcessCatchesNoTerminationSignal) {
  Pair p = RunBoth({Harm("caught_signals")}, kCollectorProcess);
  ASSERT_EQ(p.plain.result.out,
            "SIGTERM: SigCgt default, sigaction default\nSIGINT: SigCgt default, sigaction default\n");
  EXPECT_TRUE(NoHarm(p));
  EXPECT_TRUE(ServedByCollectorProcesses(p, 1));
}

// A child subreaper (tini, a container's init, a supervisor) reaps every
// orphan of its descendants with wait(-1): a helper orphaned to it would be
// reaped too, and waited for until its program ended (the program itself:
// for ever). Such a process gets the thread, as do its fork children once
// it became one (hostile review, session 23), however it did: a prctl made
// by the syscall instruction, which no interposer sees, is asked of the
// kernel before each fork (hostile review, session 24). Its exec'd
// descendants learn it from DLPROF_REAPER ("spawn": before, their three
// helpers were reaped by it too, hostile review, session 26).
TEST(NoHarm, CollectorProcessIsNeverASubreapersChild) {
  for (const char* when : {"late", "exec", "raw", "spawn"}) {
    Pair p = RunBoth({Harm("subreaper_reaps_all"), when, "3"}, kCollectorProcess, {}, 30);
    ASSERT_EQ(p.plain.result.out, "reaped 6 (No child processes)\n") << when << ": " << Show(p.plain.result);
    EXPECT_TRUE(NoHarm(p)) << when;
  }
}

// A process that ends before the collector process's first flush (a
// second) still has its mappings written (a zombie has none left to read),
// so its samples are named, libc's too, whose path is in no other record.
TEST(NoHarm, CollectorProcessNamesTheSamplesOfAShortProcess) {
  Pair p = RunBoth({Harm("cpu_burn"), "300"}, kCollectorProcess);
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  ASSERT_TRUE(ServedByCollectorProcesses(p, 1));
  bool libc_mapped = false;
  for (const auto& m : p.profile.processes[0].mappings) {
    libc_mapped |= m.path.find("/libc.so") != std::string::npos;
  }
  EXPECT_TRUE(libc_mapped) << p.Processes();
  Symbolizer().SymbolizeProfile(&p.profile);
  std::map<std::string, uint64_t> by_function;
  uint64_t total = 0;
  for (const Sample& s : p.profile.samples) {
    if (s.kind != SampleKind::kCpu || s.stack >= p.profile.stacks.size() || p.profile.stacks[s.stack].empty()) continue;
    const Location& leaf = p.profile.locations[p.profile.stacks[s.stack][0]];
    by_function[leaf.frames.empty() ? "" : leaf.frames[0].function] += s.count;
    total += s.count;
  }
  ASSERT_GT(total, 200u) << p.Processes();
  EXPECT_GT(by_function["harm_burn_ms"], total * 8 / 10) << p.Processes();
}

// A program that closes every fd >= 3 at start, then starts threads: the
// arena's memfd number is gone, and each new thread's slot needs an extent.
// The arena opens the memfd again through the collector process's copy;
// before, the extents became private, the helper stopped, and the profile
// was lost without a word (hostile review: 0 samples of 18 s of CPU).
TEST(NoHarm, CollectorProcessFollowsAProgramThatClosedItsDescriptors) {
  Pair p = RunBoth({Harm("close_then_threads"), "32", "30"}, kCollectorProcess);
  ASSERT_EQ(p.plain.result.out, "32 threads ran\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  ASSERT_TRUE(ServedByCollectorProcesses(p, 1));
  // 32 x 30 ms of CPU at 1000 Hz.
  EXPECT_GT(p.Samples(Harm("close_then_threads")), 32u * 30 * 8 / 10) << p.Processes();
  EXPECT_EQ(EndField(p.profile.processes[0]), "exit") << p.Processes();
}

// A single-threaded program whose signal handler forks while the
// interrupted code is inside malloc. Under the collector thread the fork
// hangs (glibc's fork takes malloc's locks in a multi-threaded process, and
// the interrupted free() holds one): a known gap of the thread. The
// collector process leaves the process single-threaded, and the child
// starts its helper without allocating (its heap is the parent's, mid-
// operation): before that, glibc's malloc assertion aborted the children.
TEST(NoHarm, CollectorProcessForkFromASignalHandlerInsideMalloc) {
  // A sanitizer's libdlprof brings the sanitizer's allocator into the
  // program, whose fork interceptor locks that allocator in every process:
  // the fork can then wait for the free() it interrupted. 2 runs of 7 hung
  // under ASan (the hang was not caught in a debugger; this is the likely
  // cause). The normal build, where the allocator is glibc's, runs it.
  if (testing::kUnderSanitizer) GTEST_SKIP() << "the sanitizer's allocator locks itself at fork";
  Pair p = RunBoth({Harm("fork_in_handler"), "300"}, kCollectorProcess, {}, 30);
  ASSERT_EQ(p.plain.result.out, "forked\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
}

// prctl(PR_SET_SECCOMP) filters the calling thread and the threads it starts
// later, not a collector thread started before; seccomp(2) with
// SECCOMP_FILTER_FLAG_TSYNC filters every thread.
void ExpectSandboxedProgramUnharmed(const std::string& action, const std::string& scope) {
  Pair p = RunBoth({Harm("seccomp_openat"), action, scope});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  ASSERT_NE(p.plain.result.out.find("done"), std::string::npos) << Show(p.plain.result);
  if (action == "errno") {
    ASSERT_NE(p.plain.result.out.find("own open: -1 (Operation not permitted)"), std::string::npos)
        << Show(p.plain.result);
  }
  EXPECT_TRUE(NoHarm(p));
}

TEST(NoHarm, SeccompFilterRefusingOpenatWithEpermLeavesTheProgramRunning) {
  ExpectSandboxedProgramUnharmed("errno", "thread");
}

TEST(NoHarm, SeccompFilterKillingOnOpenatDoesNotKillTheProgram) {
  ExpectSandboxedProgramUnharmed("kill", "thread");
}

TEST(NoHarm, SeccompFilterOnEveryThreadRefusingOpenatLeavesTheProgramRunning) {
  ExpectSandboxedProgramUnharmed("errno", "tsync");
}

TEST(NoHarm, SeccompFilterOnEveryThreadKillingOnOpenatDoesNotKillTheProgram) {
  ExpectSandboxedProgramUnharmed("kill", "tsync");
}

// A program that chroots (a sandbox, a daemon's privilege separation): the
// profile's path no longer exists inside the new root. The file was reopened
// by its path at each flush, so everything after the chroot was lost, with
// a line on stderr; now it is kept open from the chroot on, as for a
// privilege drop. 500 ms of CPU at 1000 Hz: the 400 ms after the chroot
// must be there. The new root has no /proc, from which the collector reads
// where a thread is blocked: the 300 ms sleep came out as running; now the
// thread's clocks say it was off a core (blocked, call unknown).
TEST(NoHarm, ChrootKeepsTheProfileWritten) {
  Pair p = RunBoth({Harm("chroot_burn"), std::string(kDirToken) + "/newroot"});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  if (p.plain.result.out == "not root\n") GTEST_SKIP() << "needs CAP_SYS_CHROOT";
  ASSERT_EQ(p.plain.result.out, "chrooted\n") << Show(p.plain.result);
  bool stepped_aside = false;
  EXPECT_TRUE(NoHarm(p, &stepped_aside));
  EXPECT_FALSE(stepped_aside) << Show(p.profiled.result);
  EXPECT_GT(p.Samples(Harm("chroot_burn")), 350u) << p.Processes();
  int64_t wall = 0, blocked = 0;
  for (const Sample& s : p.profile.samples) {
    if (s.kind != SampleKind::kWall) continue;
    wall += s.wall_ns;
    if (!s.on_cpu) blocked += s.wall_ns - s.cpu_ns;
  }
  EXPECT_GT(wall, 700000000) << p.Processes();
  // (No upper bound but the wall time: without /proc a wait for a core is
  // off a core too, and on a loaded machine the burns wait.)
  EXPECT_GT(blocked, 250000000) << "the program slept 300 ms in its new root, but " << blocked / 1000000
                                << " ms of " << wall / 1000000 << " are recorded as blocked";
}

// Known gap, not handled yet (RELIABILITY.md, "Not handled"): the collector thread counts against RLIMIT_NPROC.
// Kept as the reproducer; run it with --gtest_also_run_disabled_tests.
TEST(NoHarm, DISABLED_RlimitNprocCountsOnlyTheProgramsThreads) {
  Pair p = RunBoth({Harm("priv_drop"), std::string(kDirToken) + "/side", "nproc"});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  if (p.plain.result.out == "not root\n") GTEST_SKIP() << "needs root to become nobody";
  ASSERT_NE(p.plain.result.out.find("started "), std::string::npos) << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
}

// Each of the program's threads used to get a malloc arena from dlprof's
// stack-bounds lookup (pthread_getattr_np mallocs) and the free of its start
// record: 64 MiB of address space each, which the program's own threads
// (which malloc nothing here) would not have had: 442 of 956 MiB were left.
TEST(NoHarm, AddressSpaceLimitLeavesTheProgramItsMemory) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "sanitizers reserve terabytes of shadow: no RLIMIT_AS";
  Pair p = RunBoth({Harm("address_space"), "1024", "8"});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  auto mib = [](const std::string& out) { return atol(out.c_str() + strlen("allocated ")); };
  long plain = mib(p.plain.result.out), profiled = mib(p.profiled.result.out);
  ASSERT_GT(plain, 500) << Show(p.plain.result);
  EXPECT_EQ(p.profiled.result.exit_code, 0) << Show(p.profiled.result);
  // dlprof's own memory is allowed for, not an arena per thread.
  EXPECT_GE(profiled, plain * 9 / 10) << "under RLIMIT_AS the program got " << profiled
                                      << " MiB with dlprof, " << plain << " MiB without";
}

// libdlprof links libstdc++ in (core/CMakeLists.txt) with exception memory
// of its own (core/exception_memory.cc): libstdc++'s emergency pool, 73 KB
// malloc'd at load, is not on the heap of a program that has no C++ runtime
// (82 KB at main before, 9.7 KB now: the session's own start).
// A thread cancelled before its start routine runs: the cancel used to fire
// inside dlprof's registration (close() is a cancellation point), and with
// libgcc's unwinder linked into libdlprof as well, the unwind glibc drives
// through libgcc_s called dlprof's personality routine, whose private
// _Unwind_SetGR aborted the process (7 runs of 7, issue 11's hostile review).
// The program takes all the address space RLIMIT_AS leaves and holds it
// for 500 ms while four threads wait: every allocation of the collector's
// fails meanwhile. A std::bad_alloc from its ticks (interning a blocked
// thread's stack, the "sampling off" field, the unwind tables' scan of the
// loaded objects, thrown through glibc's dl_iterate_phdr) ended the program
// by std::terminate in 4 runs of 4. Now CPU sampling steps aside with one
// line, and what was recorded is written.
TEST(NoHarm, AnExhaustedAddressSpaceStopsSamplingInsteadOfTheProgram) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "sanitizers reserve terabytes of shadow: no RLIMIT_AS";
  Pair p = RunBoth({Harm("exhaust_memory"), "4"});
  ASSERT_EQ(p.plain.result.out, "held over 16 MiB for 500 ms with 4 threads waiting\n")
      << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
}

// A program started with its stderr closed (`2>&-`, a daemon) opens its log
// as fd 2: dlprof's step-aside line went into that log.
TEST(NoHarm, DlprofsLinesNeverGoToAFileTheProgramOpenedAsStderr) {
  Pair p = RunBoth({Harm("closed_stdio"), "log", std::string(kDirToken) + "/app.log"});
  ASSERT_EQ(p.plain.result.out, "log: the program's own line\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
}

// A process that runs its steps by exec (a shell, a launcher): one profile
// per image. Names were tried up to pid.99: from the 101st image on, each
// printed "cannot create ...: File exists; profiling off" (51 lines for 150).
TEST(NoHarm, AProcessThatExecsManyTimesProfilesEveryImage) {
  Pair p = RunBoth({Harm("reexec"), "150"}, {}, {}, 60);
  ASSERT_EQ(p.plain.result.out, "done\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  EXPECT_EQ(p.profiled.result.err, p.plain.result.err);
  EXPECT_EQ(p.files.size(), 151u) << p.Processes();
}

// A privilege drop that keeps capabilities (setpriv --reuid, ping,
// dumpcap): after setresuid and a capset on the calling thread alone, the
// collector thread could not follow glibc's setxid broadcast of setresgid,
// and glibc aborted the program (SIGABRT, 134; issue 11's hostile review).
TEST(NoHarm, APrivilegeDropThatKeepsCapabilitiesCompletes) {
  Pair p = RunBoth({Harm("keepcaps_drop")});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  if (p.plain.result.out == "not root\n") GTEST_SKIP() << "needs root to drop privileges";
  ASSERT_EQ(p.plain.result.out, "dropped to uid 65534 gid 65534\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  // With 440 supplementary groups the capability lines of
  // /proc/<tid>/status are past its first 4 KiB: a comparison of cut texts
  // found the threads alike, and glibc aborted (5 of 5).
  Pair many = RunBoth({Harm("keepcaps_drop"), "440"});
  ASSERT_EQ(many.plain.result.out, "dropped to uid 65534 gid 65534\n") << Show(many.plain.result);
  EXPECT_TRUE(NoHarm(many));
}

// Credential calls from several threads at once: each caller stopped and
// restarted the collector on its own, and collectors leaked (3-6 more
// threads after the calls) or ran two at once (SIGSEGV in the unwind
// tables).
TEST(NoHarm, CredentialCallsFromManyThreadsLeaveNoThreadBehind) {
  for (const char* mode : {"toggle", "perthread"}) {
    Pair p = RunBoth({Harm("cred_threads"), mode, "100"}, {}, {}, 60);
    ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
    if (p.plain.result.out == "not root\n") GTEST_SKIP() << "needs root";
    ASSERT_EQ(p.plain.result.out, "extra threads after the calls: 0\n") << Show(p.plain.result);
    EXPECT_TRUE(NoHarm(p)) << mode;
  }
}

// The program's own handlers never run inside a sample: one with 96 KiB of
// locals ran on dlprof's 64 KiB sampling stack and died of SIGSEGV (3 runs
// of 3), and one that leaves by siglongjmp left its thread marked as inside
// dlprof's handler, so each later fork waited 2-3.5 s for it.
TEST(NoHarm, TheProgramsSignalHandlersRunOnItsOwnStack) {
  Pair p = RunBoth({Harm("nested_signals"), "bigstack"});
  ASSERT_EQ(p.plain.result.out, "handled: 1\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
}

// The same for a SIGSEGV or SIGBUS another thread sends: these stayed open
// during samples for fault-safe reads, so the program's handler ran inside
// the sample and died on dlprof's stack. Now they are blocked there unless
// the process takes fault-safe reads (Python), where dlprof's fault handler
// sends them again at the sample's end (FaultHandler.SentFaultsWaitFor...).
TEST(NoHarm, SentSegvAndBusRunTheProgramsHandlerOnItsOwnStack) {
  for (const char* signal : {"segv", "bus"}) {
    Pair p = RunBoth({Harm("nested_signals"), signal});
    ASSERT_EQ(p.plain.result.out, "handled: 1\nnot from the sender: 0\n")
        << signal << Show(p.plain.result);
    EXPECT_TRUE(NoHarm(p)) << signal;
  }
}

TEST(NoHarm, SiglongjmpOutOfAHandlerLeavesForksAsFast) {
  Pair p = RunBoth({Harm("nested_signals"), "longjmp"});
  ASSERT_EQ(p.plain.result.out, "jumped: 1\nslowest fork over 1.5 s: 0\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
}

// exit() from a SIGTERM handler that interrupted fork(): the handler's exit
// ends the program as it would without dlprof (its exit once waited for a
// lock of dlprof's that the interrupted fork's prepare handler held).
TEST(NoHarm, ExitFromAHandlerThatInterruptedForkEndsTheProgram) {
  Pair p = RunBoth({Harm("exit_in_fork"), "64"}, {}, {}, 30);
  ASSERT_EQ(p.plain.result.out, "ended by SIGTERM\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
}

// fork() from a signal handler that interrupted dlprof_stage_intern on the
// same thread: the fork goes on as without dlprof (its prepare handler waited
// for the stage lock the interrupted intern held, for ever: 3 of 3 runs;
// then, in the moments around taking and giving it back, and under nested
// forks, 1 run in 8).
TEST(NoHarm, ForkFromAHandlerThatInterruptedAStageInternGoesOn) {
  Pair p = RunBoth({Harm("fork_in_stage_intern"), "1500"}, {}, {}, 30);
  ASSERT_EQ(p.plain.result.out, "forked yes\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  EXPECT_GT(p.files.size(), 1u) << "the forked children's profiles";
}

TEST(NoHarm, ThreadsCancelledBeforeTheyStartEndCancelled) {
  Pair p = RunBoth({Harm("cancel_early"), "200"});
  ASSERT_EQ(p.plain.result.out, "cancelled 200 of 200\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
}

TEST(NoHarm, AProgramsHeapAtMainHoldsNoExceptionPoolOfDlprofs) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "sanitizer builds keep libstdc++ shared (and own the heap)";
  Pair p = RunBoth({Harm("heap_at_main")});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  ASSERT_EQ(p.profiled.result.exit_code, 0) << Show(p.profiled.result);
  auto bytes = [](const std::string& out) { return atol(out.c_str() + strlen("in use at main: ")); };
  const long plain = bytes(p.plain.result.out), profiled = bytes(p.profiled.result.out);
  EXPECT_LT(profiled - plain, 32 * 1024) << "heap in use at main: " << profiled << " bytes with dlprof, "
                                         << plain << " without";
  EXPECT_FALSE(p.files.empty()) << "the profiled run started a session";
}

// A Python process takes fault-safe reads, so its samples keep SIGSEGV and
// SIGBUS open, and dlprof's fault handler sends a copy that came during a
// sample again at its end. A child process sends them (a thread of the same
// process would need the GIL, so the main thread would never be running, or
// sampled, when one arrives): at 1000 Hz, 3 and 9 of 1000 came during a
// sample in two runs. Python's handlers still see both kinds. (The count is
// not compared: the kernel merges copies sent while one is pending, with or
// without dlprof, more often under load.)
TEST(NoHarm, PythonHandlersOfSentSegvAndBusRunAsWithoutDlprof) {
  std::string python = FindPython();
  if (python.empty()) GTEST_SKIP() << "no python3 in PATH";
  const char* script =
      "import os, signal, time\n"
      "seen = {}\n"
      "def on(signum, frame): seen[signum] = seen.get(signum, 0) + 1\n"
      "signal.signal(signal.SIGSEGV, on)\n"
      "signal.signal(signal.SIGBUS, on)\n"
      "parent = os.getpid()\n"
      "child = os.fork()\n"
      "if child == 0:\n"
      "    for n in range(1000):\n"
      "        os.kill(parent, signal.SIGSEGV if n % 2 else signal.SIGBUS)\n"
      "        time.sleep(0.0003)\n"
      "    os._exit(0)\n"
      "x = 0\n"
      "while os.waitpid(child, os.WNOHANG) == (0, 0):\n"
      "    for i in range(2000): x += i * i\n"
      "time.sleep(0.05)\n"
      "print('kinds', sorted(signal.Signals(k).name for k in seen))\n";
  Pair p = RunBoth({python, "-c", script}, {{"DLPROF_HZ", "1000"}});
  ASSERT_EQ(p.plain.result.out, "kinds ['SIGBUS', 'SIGSEGV']\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  EXPECT_FALSE(p.files.empty()) << "the profiled run started a session";
}

// The same where a handler leaves by siglongjmp without restoring the mask
// (SA_NODEFER, sigsetjmp(env, 0)), in a Python process (tests/harm/lib/
// segv_jump.c through ctypes). With SIGSEGV open for the whole sampling
// handler, a copy that landed on its first instructions ran the handler on
// top of dlprof's mask, and the jump left SIGINT, SIGTERM and SIGPROF
// blocked for good (3 runs of 3, hostile review). Now only the Python
// walk's reads have it open, and a copy that comes then waits.
TEST(NoHarm, ASiglongjmpOutOfASentSegvHandlerLeavesThePythonThreadsMaskAlone) {
  std::string python = FindPython();
  if (python.empty()) GTEST_SKIP() << "no python3 in PATH";
  const std::string script = "import ctypes\nctypes.CDLL('" + Harm("libsegv_jump.so") +
                             "').segv_jump_run(20000, 200)\n";
  Pair p = RunBoth({python, "-c", script}, {{"DLPROF_HZ", "10000"}});
  ASSERT_EQ(p.plain.result.out,
            "runs on a masked context: 0\nSIGINT or SIGPROF blocked at the end: no\n")
      << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  EXPECT_FALSE(p.files.empty()) << "the profiled run started a session";
}

// The interpreters that warn at os.fork() in a multi-threaded process
// (Python 3.12 and later), one per version: python3 in PATH if it is one,
// python3.12 and up in PATH and /usr/bin, and pyenv's (the development
// machine has 3.12 and 3.13 there; Debian's python3 is 3.11).
std::vector<std::string> PythonsThatWarnAtFork() {
  std::vector<std::string> candidates;
  const char* path = getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    for (const char* name : {"python3", "python3.12", "python3.13", "python3.14"}) {
      candidates.push_back(dir + "/" + name);
    }
  }
  for (const char* name : {"/usr/bin/python3.12", "/usr/bin/python3.13", "/usr/bin/python3.14"}) {
    candidates.push_back(name);
  }
  const char* home = getenv("HOME");
  const std::string pyenv = getenv("PYENV_ROOT") ? getenv("PYENV_ROOT")
                                                 : std::string(home ? home : "/root") + "/.pyenv";
  for (const char* version : {"3.12", "3.13", "3.14"}) {
    ProcessResult ls = RunProcess({"/bin/sh", "-c", "ls -d " + pyenv + "/versions/" + version +
                                                        ".*/bin/python3 2>/dev/null | tail -1"},
                                  PlainEnv());
    if (!ls.out.empty()) candidates.push_back(ls.out.substr(0, ls.out.find('\n')));
  }
  std::vector<std::string> found, versions;
  for (const std::string& python : candidates) {
    if (access(python.c_str(), X_OK) != 0) continue;
    ProcessResult v = RunProcess(
        {python, "-c", "import sys; print('%d.%d' % sys.version_info[:2] if sys.version_info >= (3, 12) else '')"},
        PlainEnv());
    if (v.exit_code != 0 || v.out.size() < 2) continue;
    if (std::find(versions.begin(), versions.end(), v.out) != versions.end()) continue;
    versions.push_back(v.out);
    found.push_back(python);
  }
  return found;
}

// Forks 20 times; an at-fork hook written in Python runs inside each
// os.fork (3.13 counts the threads after it: a collector back by then would
// be counted); then sleeps and, for the second test, prints how many threads
// the process has.
const char* kPythonForkScript =
    "import os, sys, time\n"
    "os.register_at_fork(after_in_parent=lambda: sum(range(1000)))\n"
    "end = time.process_time() + 0.1\n"
    "while time.process_time() < end: pass\n"
    "codes = []\n"
    "for i in range(20):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        os._exit(0)\n"
    "    codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
    "print('children exited', sorted(set(codes)))\n"
    "if sys.argv[1:] == ['threads']:\n"
    "    time.sleep(0.3)\n"
    "    print('threads', len(os.listdir('/proc/self/task')))\n";

// Python 3.12+ warns "This process (pid=N) is multi-threaded, use of fork()
// may lead to deadlocks in the child" when it counts another thread after
// os.fork(): the collector leaves around each fork (core/python_fork.h).
TEST(NoHarm, PythonForkDoesNotWarnAboutThreadsItDidNotStart) {
  const std::vector<std::string> pythons = PythonsThatWarnAtFork();
  if (pythons.empty()) {
    GTEST_SKIP() << "no Python 3.12 or later here (only they warn; the comparison would pass for no reason)";
  }
  for (const std::string& python : pythons) {
    SCOPED_TRACE(python);
    Pair p = RunBoth({python, "-W", "always", "-c", kPythonForkScript});
    ASSERT_EQ(p.plain.result.out, "children exited [0]\n") << Show(p.plain.result);
    EXPECT_TRUE(NoHarm(p));
    EXPECT_EQ(p.profiled.result.err.find("multi-threaded"), std::string::npos) << Show(p.profiled.result);
    EXPECT_GT(p.Samples(python), 0u) << "the profiled run sampled nothing: " << p.Processes();
  }
}

// ... and comes back once os.fork has returned: the process has its
// collector thread again (a thread more than the program's own; a helper
// process is no thread at all).
TEST(NoHarm, PythonForkGetsItsCollectorBackAfterTheFork) {
  const std::vector<std::string> pythons = PythonsThatWarnAtFork();
  if (pythons.empty()) GTEST_SKIP() << "no Python 3.12 or later here";
  for (const std::string& python : pythons) {
    SCOPED_TRACE(python);
    Pair p = RunBoth({python, "-W", "always", "-c", kPythonForkScript, "threads"},
                     {{"DLPROF_COLLECTOR", "thread"}});
    EXPECT_EQ(p.plain.result.out, "children exited [0]\nthreads 1\n") << Show(p.plain.result);
    EXPECT_EQ(p.profiled.result.out, "children exited [0]\nthreads 2\n") << Show(p.profiled.result);
  }
}

// What a hostile review of the above found, each a difference under dlprof
// or a crash before it was mended (3.12 and 3.13):
// - the forking function's objects outlived it: dlprof held its frame until
//   the collector came back (a file it did not close was not flushed);
// - a fork through ctypes (the GIL released) after a subinterpreter existed
//   crashed: PyGILState_Check says yes for good then, and no thread state
//   was there for the pending call's frame lookup;
// - os.forkpty still warned (glibc's forkpty does not go through fork());
// - a parent that leaves by os._exit right after the fork lost its whole
//   profile: the collector that writes the end was still away.
const char* kPythonForkCornersScript =
    "import ctypes, os, sys, time\n"
    "def spawn(path):\n"
    "    f = open(path, 'w')\n"
    "    f.write('hello\\n')\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        os._exit(0)\n"
    "    return pid\n"
    "pid = spawn(sys.argv[1])\n"
    "print('size after spawn', os.stat(sys.argv[1]).st_size)\n"
    "os.waitpid(pid, 0)\n"
    "try:\n"
    "    import _xxsubinterpreters as interp\n"
    "except ImportError:\n"
    "    import _interpreters as interp\n"
    "interp.destroy(interp.create())\n"
    "pid = ctypes.CDLL(None).fork()\n"
    "if pid == 0:\n"
    "    os._exit(7)\n"
    "print('ctypes child', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
    "pid, fd = os.forkpty()\n"
    "if pid == 0:\n"
    "    os._exit(0)\n"
    "os.waitpid(pid, 0)\n"
    "os.close(fd)\n"
    "print('forkpty child done', flush=True)\n"
    "end = time.process_time() + 0.3\n"
    "while time.process_time() < end: pass\n"
    "if os.fork() == 0:\n"
    "    os._exit(0)\n"
    "os._exit(5)\n";

TEST(NoHarm, PythonForkCornersBehaveAsWithoutDlprof) {
  const std::vector<std::string> pythons = PythonsThatWarnAtFork();
  if (pythons.empty()) GTEST_SKIP() << "no Python 3.12 or later here";
  for (const std::string& python : pythons) {
    SCOPED_TRACE(python);
    Pair p = RunBoth({python, "-W", "always::DeprecationWarning", "-c", kPythonForkCornersScript,
                      std::string(kDirToken) + "/unclosed.txt"});
    ASSERT_EQ(p.plain.result.out, "size after spawn 6\nctypes child 7\nforkpty child done\n")
        << Show(p.plain.result);
    ASSERT_EQ(p.plain.result.exit_code, 5) << Show(p.plain.result);
    EXPECT_TRUE(NoHarm(p));
    EXPECT_EQ(p.profiled.result.err.find("multi-threaded"), std::string::npos) << Show(p.profiled.result);
    // The parent's own profile, ended by its _exit: 0.3 s of CPU at 1000 Hz
    // just before it.
    const Process* parent = nullptr;
    for (const Process& proc : p.profile.processes) {
      if (proc.end_reason.find("_exit 5") != std::string::npos) parent = &proc;
    }
    ASSERT_NE(parent, nullptr) << "no profile ends with the parent's _exit 5: " << p.Processes();
    EXPECT_GT(parent->samples, 150u) << p.Processes();
  }
}

// ---------------------------------------------------------------------------
// 4. Signals.

TEST(NoHarm, SigprofBlockedAtExecDoesNotKillTheNewImage) {
  // The exec'd image has no dlprof (a launcher that cleans the environment):
  // nothing dlprof left may be pending for it.
  Pair p = RunBoth({Harm("exec_after"), "blocked", "clean", Harm("sigprof_report"), "full"});
  ASSERT_EQ(p.plain.result.out,
            "SIGPROF: ignored 0, caught 0, blocked 1, pending 0\nalive after unblocking SIGPROF\n");
  EXPECT_TRUE(NoHarm(p));
}

TEST(NoHarm, SigprofBlockedAtExecDoesNotKillTheNewImageProfiledToo) {
  // The exec'd image inherits LD_PRELOAD and is profiled as well.
  Pair p = RunBoth({Harm("exec_after"), "blocked", "inherit", Harm("sigprof_report"), "alive"});
  ASSERT_EQ(p.plain.result.out, "alive after unblocking SIGPROF\n");
  EXPECT_TRUE(NoHarm(p));
}

TEST(NoHarm, SigIgnForSigprofIsInheritedAcrossExec) {
  Pair p = RunBoth({Harm("exec_after"), "ignored", "clean", Harm("sigprof_report"), "full"});
  ASSERT_EQ(p.plain.result.out,
            "SIGPROF: ignored 1, caught 0, blocked 0, pending 0\nalive after unblocking SIGPROF\n");
  EXPECT_TRUE(NoHarm(p));
}

TEST(NoHarm, ProgramWaitingForSigprofReceivesNoneOfDlprofs) {
  Pair p = RunBoth({Harm("sigprof_wait"), "wait"});
  ASSERT_EQ(p.plain.result.out, "SIGPROF seen: sigpending 0, sigtimedwait 0, signalfd 0\n");
  EXPECT_TRUE(NoHarm(p));
}

TEST(NoHarm, SigprofBlockedInEveryThreadWarnsInsteadOfRecordingNothing) {
  Pair p = RunBoth({Harm("sigprof_wait"), "block"});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  bool stepped_aside = false;
  EXPECT_TRUE(NoHarm(p, &stepped_aside));
  // Either it samples anyway, or it says that it cannot.
  EXPECT_TRUE(p.Samples(Harm("sigprof_wait")) > 0 || stepped_aside)
      << "0 samples and no warning: " << Show(p.profiled.result) << "\n" << p.Processes();
}

// ---------------------------------------------------------------------------
// 5. Stacks.

void ExpectSmallStacksSurvive(const std::string& backend) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "instrumented frames do not fit 16 KiB stacks";
  std::map<std::string, std::string> env;
  if (!backend.empty()) env["DLPROF_BACKEND"] = backend;
  Pair p = RunBoth({Harm("small_stacks"), "4"}, env);
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p)) << p.Processes();
  EXPECT_EQ(p.profiled.result.term_signal, 0) << Show(p.profiled.result);
}

TEST(NoHarm, SixteenKibStacksSurviveSamplingWithTheDefaultUnwinder) { ExpectSmallStacksSurvive(""); }

TEST(NoHarm, SixteenKibStacksSurviveSamplingWithLibunwind) { ExpectSmallStacksSurvive("libunwind"); }

TEST(NoHarm, SixteenKibStacksSurviveSamplingWithCfiTables) { ExpectSmallStacksSurvive("cfi"); }

TEST(NoHarm, SixteenKibStacksSurviveSamplingWithFramePointers) { ExpectSmallStacksSurvive("fp"); }

TEST(NoHarm, ProgramWithRdtscDisabledIsNotKilled) {
  // The sanitizers' own runtime reads the TSC: the program dies of
  // PR_SET_TSC without dlprof too.
  if (testing::kUnderSanitizer) GTEST_SKIP() << "the sanitizer runtime itself uses RDTSC";
  Pair p = RunBoth({Harm("tsc_sigsegv")});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  if (p.plain.result.out.find("unsupported") != std::string::npos) {
    GTEST_SKIP() << p.plain.result.out;
  }
  EXPECT_TRUE(NoHarm(p));
}

// ---------------------------------------------------------------------------
// 6. Processes.

TEST(NoHarm, RawForkAndUnderscoreForkChildrenLeaveTheParentsProfileWhole) {
  Pair p = RunBoth({Harm("raw_fork"), std::string(kDirToken) + "/parent"});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  std::istringstream side(ReadFile(p.profiled.dir + "/parent"));
  int pid = 0;
  int64_t fork_ns = 0, after_ns = 0, cpu_ms_before_fork = 0;
  side >> pid >> fork_ns >> after_ns >> cpu_ms_before_fork;
  ASSERT_GT(pid, 0) << "the profiled parent wrote no pid";
  int found = -1, count = 0;
  for (size_t i = 0; i < p.profile.processes.size(); ++i) {
    if (p.profile.processes[i].pid != pid) continue;
    found = static_cast<int>(i);
    ++count;
  }
  ASSERT_EQ(count, 1) << "the parent (pid " << pid << ") should be one process\n" << p.Processes();
  const Process& parent = p.profile.processes[found];
  EXPECT_TRUE(parent.complete && parent.end_reason == "exit") << p.Processes();
  EXPECT_TRUE(parent.warnings.empty()) << p.Processes() << "\n first: "
                                       << (parent.warnings.empty() ? "" : parent.warnings[0]);
  // 500 ms of CPU after the children were reaped, at 1000 Hz.
  // While the children burn 200 ms of CPU the parent waits in waitpid: CPU
  // samples in its profile then are the children's.
  // Before the fork, no more samples than the parent's CPU time at 1000 Hz.
  int64_t before = 0, after = 0, while_waiting = 0;
  for (const Sample& s : p.profile.samples) {
    if (s.process != static_cast<uint32_t>(found) || s.kind != SampleKind::kCpu) continue;
    if (s.time_ns <= fork_ns) before += s.count;
    if (s.time_ns > after_ns) after += s.count;
    if (s.time_ns > fork_ns && s.time_ns < after_ns) while_waiting += s.count;
  }
  EXPECT_LE(before, cpu_ms_before_fork * 5 / 4 + 20)
      << "samples stamped before the fork: more than the parent's " << cpu_ms_before_fork
      << " ms of CPU then (the children wrote the parent's samples again?)\n" << p.Processes();
  EXPECT_LT(while_waiting, 50) << "the children's samples landed in the parent's file\n" << p.Processes();
  EXPECT_GT(after, 200) << "the parent's sampling stopped when a child exited\n" << p.Processes();
  // The parent has one thread and no stage. The _Fork child's thread and
  // stage must not have reached the parent's table of threads (shared
  // memory, core/shared_arena.h).
  std::set<uint32_t> tids;
  int64_t in_a_stage = 0;
  for (const Sample& s : p.profile.samples) {
    if (s.process != static_cast<uint32_t>(found)) continue;
    tids.insert(s.tid);
    if (s.stage_path != 0) ++in_a_stage;
  }
  EXPECT_EQ(in_a_stage, 0) << "the _Fork child's stage landed on the parent's thread\n"
                           << p.Processes();
  EXPECT_EQ(tids, std::set<uint32_t>{static_cast<uint32_t>(pid)})
      << "threads other than the parent's in its profile\n" << p.Processes();
}

TEST(NoHarm, RelativeOutFolderKeepsWorkersStartedAfterChdir) {
  std::string tmp = MakeTempDir("dlprof-noharm-rel");
  std::string elsewhere = tmp + "/elsewhere";
  mkdir(elsewhere.c_str(), 0700);
  mkdir((tmp + "/rel").c_str(), 0700);  // only out/ is missing: dlprof makes that one
  char cwd[PATH_MAX];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(tmp.c_str()), 0);
  ProcessResult r = RunProcess({Harm("chdir_spawn"), elsewhere, Harm("cpu_burn"), "300"},
                               ProfiledEnv("rel/out"));
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(r.out, "cpu_burn: 1 thread(s) burned 300 ms each\nworker exited 0\n") << Show(r);
  EXPECT_EQ(r.err, "") << Show(r);
  Pair p;
  p.out = tmp + "/rel/out";
  ReadProfile(&p);
  EXPECT_GT(p.Samples(Harm("chdir_spawn")), 0u) << p.Processes();
  EXPECT_GT(p.Samples(Harm("cpu_burn")), 100u) << "the worker started after the cd is not in the run\n"
                                         << p.Processes();
  struct stat st;
  EXPECT_NE(stat((elsewhere + "/rel").c_str(), &st), 0)
      << "a profile went to the folder the program moved to: " << elsewhere << "/rel";
}

TEST(NoHarm, MissingParentFoldersOfOutAreCreated) {
  std::string tmp = MakeTempDir("dlprof-noharm-mkdir");
  ProcessResult r = RunProcess({Harm("cpu_burn"), "300"}, ProfiledEnv(tmp + "/a/b/c"));
  EXPECT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(r.out, "cpu_burn: 1 thread(s) burned 300 ms each\n");
  Pair p;
  p.out = tmp + "/a/b/c";
  ReadProfile(&p);
  EXPECT_GT(p.Samples(Harm("cpu_burn")), 100u) << "stderr: " << r.err << "\n" << p.Processes();
}

TEST(NoHarm, BackendsDescribeInstallsNoSigprofHandlerWhenLoadedWithDlopen) {
  ProcessResult r = RunProcess({Harm("describe_sigprof"), kLib}, PlainEnv());
  EXPECT_EQ(r.out, "before: SIGPROF caught 0\ndescribed: 1\nafter: SIGPROF caught 0, ignored 0\n")
      << Show(r);
  EXPECT_EQ(r.exit_code, 0);
}

TEST(NoHarm, BackendsDescribeInstallsNoSigprofHandlerWhenPreloadedButOff) {
  auto env = PlainEnv({{"LD_PRELOAD", kLib}});
  ProcessResult r = RunProcess({Harm("describe_sigprof")}, env);
  EXPECT_EQ(r.out, "before: SIGPROF caught 0\ndescribed: 1\nafter: SIGPROF caught 0, ignored 0\n")
      << Show(r);
  EXPECT_EQ(r.exit_code, 0);
}

void ExpectNoEintrWithItimer(const std::string& load, uint64_t min_samples) {
  Pair p = RunBoth({Harm("eintr_loops"), load}, {{"DLPROF_TIMER", "itimer"}});
  ASSERT_EQ(p.plain.result.out, "EINTR: select 0, epoll_wait 0, sem_timedwait 0\n");
  EXPECT_TRUE(NoHarm(p));
  EXPECT_GT(p.Samples(Harm("eintr_loops")), min_samples) << p.Processes();
}

// ~1 s of CPU at setitimer's 250 Hz is ~250 samples on a quiet machine; 160
// were seen at load 4, where the program gets less CPU. The count only shows
// that sampling was on while the EINTRs were counted.
// Known gap, not handled yet (RELIABILITY.md, "Not handled"): ITIMER_PROF
// counts kernel time, and its process-wide SIGPROF can land on a thread in
// a syscall (select saw one EINTR in a CI run). Kept as the reproducer; run
// it with --gtest_also_run_disabled_tests.
TEST(NoHarm, DISABLED_ItimerLeaksNoEintrIntoSelectEpollAndSemTimedwait) { ExpectNoEintrWithItimer("busy", 100); }

// Mostly idle: the ticks that expire while dlprof's own thread runs must not
// go to a waiting thread either.
// Known gap, not handled yet (RELIABILITY.md, "Not handled"): ITIMER_PROF
// counts kernel time, and its process-wide SIGPROF can land on a thread in
// a syscall (select saw one EINTR in a CI run). Kept as the reproducer; run
// it with --gtest_also_run_disabled_tests.
TEST(NoHarm, DISABLED_ItimerLeaksNoEintrIntoWaitsOfAMostlyIdleProgram) { ExpectNoEintrWithItimer("light", 20); }

TEST(NoHarm, GperftoolsBackendListedAsAvailableSamples) {
  ProcessResult list = RunProcess({kDlprof, "backends"}, PlainEnv());
  ASSERT_EQ(list.exit_code, 0) << Show(list);
  bool listed = false;
  for (const auto& line : Lines(list.out)) {
    std::istringstream words(line);
    std::string kind, name, available;
    words >> kind >> name >> available;
    if (kind == "unwinder" && name == "gperftools") listed = available == "yes";
  }
  if (!listed) GTEST_SKIP() << "gperftools is not listed as available here:\n" << list.out;
  Pair p = RunBoth({Harm("cpu_burn"), "500", "2"}, {{"DLPROF_BACKEND", "gperftools"}});
  EXPECT_TRUE(NoHarm(p));
  EXPECT_GT(p.Samples(Harm("cpu_burn")), 200u)
      << "`dlprof backends` lists gperftools as available, but it records no CPU samples\n"
      << Show(p.profiled.result) << "\n" << p.Processes();
}

TEST(NoHarm, WorkerForkedAfterAPrivilegeDropIsProfiledOrSaysWhy) {
  Pair p = RunBoth({Harm("priv_drop"), std::string(kDirToken) + "/side", "worker"});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  if (p.plain.result.out == "not root\n") GTEST_SKIP() << "needs root to drop privileges";
  ASSERT_EQ(p.plain.result.out, "worker exited 0\n");
  bool stepped_aside = false;
  EXPECT_TRUE(NoHarm(p, &stepped_aside));
  int worker = atoi(ReadFile(p.profiled.dir + "/side").c_str());
  uint64_t samples = 0;
  for (const Process& pr : p.profile.processes) {
    if (pr.pid == worker) samples += pr.samples;
  }
  EXPECT_TRUE(samples > 100 || stepped_aside)
      << "the worker (pid " << worker << ") is silently unprofiled: " << Show(p.profiled.result)
      << "\n" << p.Processes();
}

TEST(NoHarm, NonDumpableProcessReportsSleepingThreadAsBlocked) {
  // After the drop to nobody, ASan cannot open its log file in the
  // (root's) sanitizer-logs folder and fails the run, with or without dlprof.
  if (testing::kUnderSanitizer) GTEST_SKIP() << "the sanitizer's log_path is closed to nobody";
  Pair p = RunBoth({Harm("priv_drop"), std::string(kDirToken) + "/side", "nondumpable"});
  ASSERT_EQ(p.plain.result.exit_code, 0) << Show(p.plain.result);
  if (p.plain.result.out == "not root\n") GTEST_SKIP() << "needs root to drop privileges";
  EXPECT_TRUE(NoHarm(p));
  uint32_t sleeper = static_cast<uint32_t>(atoi(ReadFile(p.profiled.dir + "/side").c_str()));
  ASSERT_GT(sleeper, 0u);
  int64_t wall = 0, blocked = 0;
  for (const Sample& s : p.profile.samples) {
    if (s.kind != SampleKind::kWall || s.tid != sleeper) continue;
    wall += s.wall_ns;
    if (!s.on_cpu) blocked += s.wall_ns - s.cpu_ns;
  }
  ASSERT_GT(wall, 300000000) << "no wall time for the sleeping thread " << sleeper << "\n" << p.Processes();
  EXPECT_GT(static_cast<double>(blocked) / wall, 0.8)
      << "the thread slept 600 ms, but " << blocked / 1000000 << " of its " << wall / 1000000
      << " ms are recorded as blocked";
}

// ---------------------------------------------------------------------------
// 7. Loaded with dlopen.

void ExpectWholeWorkers(const Pair& p) {
  int workers = 0;
  for (size_t i = 0; i < p.profile.processes.size(); ++i) {
    const Process& w = p.profile.processes[i];
    if (w.role != "worker") continue;
    ++workers;
    // The CPU time the samples stand for: a loop on time.process_time()
    // lives in system calls, so each sample carries several periods.
    double cpu_s = 0;
    for (const Sample& s : p.profile.samples) {
      if (s.process == i && s.kind == SampleKind::kCpu) cpu_s += s.cpu_ns / 1e9;
    }
    double wall_s = (w.end_ns - w.start_ns) / 1e9;
    // Each burned 3 s of CPU. Losing the time since the last once-a-second
    // write (an unseen _exit) costs up to a second of it; losing a tick, a
    // few tens of ms.
    std::printf("[ noharm ] worker %d: %.3f s of CPU, %.3f s of wall time recorded\n", w.pid,
                cpu_s, wall_s);
    EXPECT_GT(cpu_s, 2.8) << "worker " << w.pid << ": " << cpu_s << " s of CPU recorded\n"
                          << p.Processes();
    EXPECT_GT(wall_s, 2.7) << "worker " << w.pid << ": " << wall_s << " s of wall time recorded";
  }
  EXPECT_EQ(workers, 2) << p.Processes();
}

TEST(NoHarm, DlopenedLibraryRecordsWholeRunsOfWorkersThatCallExit) {
  Pair p = RunBoth({Harm("dlopen_workers"), kLib, "3000", "exit"}, {{"LD_PRELOAD", kUnset}}, {}, 120);
  ASSERT_EQ(p.plain.result.out, "workers exited: 0 0\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  ExpectWholeWorkers(p);
}

// Loaded with dlopen, _exit is not interposed: each worker lost up to its
// last flush interval (1 s of 3) until the collector wrote at every tick
// there (`interposers` off in the profile).
TEST(NoHarm, DlopenedLibraryRecordsWholeRunsOfWorkersThatCallUnderscoreExit) {
  // As Python's multiprocessing and DataLoader workers leave: os._exit().
  Pair p = RunBoth({Harm("dlopen_workers"), kLib, "3000", "_exit"}, {{"LD_PRELOAD", kUnset}}, {}, 120);
  ASSERT_EQ(p.plain.result.out, "workers exited: 0 0\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  ExpectWholeWorkers(p);
}

// The same from Python, as a user tries it first: ctypes.CDLL, os._exit.
TEST(NoHarm, CtypesLoadedLibraryRecordsForkedWorkersWholeRuns) {
  std::string python = FindPython();
  if (python.empty()) GTEST_SKIP() << "no python3 in PATH";
  const char* script =
      "import ctypes, os, sys, time\n"
      "ctypes.CDLL(sys.argv[1])\n"
      "pids = []\n"
      "for i in range(2):\n"
      "    pid = os.fork()\n"
      "    if pid == 0:\n"
      "        end = time.process_time() + 3.0\n"
      "        x = 0\n"
      "        while time.process_time() < end:\n"
      "            x += 1\n"
      "        os._exit(0)\n"
      "    pids.append(pid)\n"
      "print('workers exited:', *[os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids])\n";
  Pair p = RunBoth({python, "-c", script, kLib}, {{"LD_PRELOAD", kUnset}}, {}, 120);
  ASSERT_EQ(p.plain.result.out, "workers exited: 0 0\n") << Show(p.plain.result);
  EXPECT_TRUE(NoHarm(p));
  ExpectWholeWorkers(p);
}

// ---------------------------------------------------------------------------
// 8. Messages.

TEST(NoHarm, NothingOfDlprofsEverGoesToStdout) {
  const std::string want = "cpu_burn: 2 thread(s) burned 200 ms each\n";
  std::string tmp = MakeTempDir("dlprof-noharm-stdout");
  const std::vector<std::map<std::string, std::string>> cases = {
      {},
      {{"DLPROF_HZ", "fast"}},
      {{"DLPROF_MODE", "verbose"}},
      {{"DLPROF_TIMER", "sundial"}},
      {{"DLPROF_BACKEND", "abacus"}},
      {{"DLPROF_TIMER", "perf"}},
      {{"DLPROF_OUT", "/proc/self/no/such/folder"}},
      {{"DLPROF_OUT", tmp + "/file"}},  // a file, not a folder
      {{"DLPROF_SAMPLE", "maybe"}},
  };
  testing::WriteFile(tmp + "/file", "x");
  for (const auto& extra : cases) {
    auto env = ProfiledEnv(tmp + "/out");
    for (const auto& [k, v] : extra) env[k] = v;
    ProcessResult r = RunProcess({Harm("cpu_burn"), "200", "2"}, env);
    std::string what = extra.empty() ? "(defaults)" : extra.begin()->first + "=" + extra.begin()->second;
    EXPECT_EQ(r.out, want) << what << ": " << Show(r);
    EXPECT_EQ(r.exit_code, 0) << what << ": " << Show(r);
  }
}

TEST(NoHarm, InvalidValueWarningHasNoRawControlCharacters) {
  Pair p = RunBoth({Harm("cpu_burn"), "200"}, {{"DLPROF_HZ", "\x1b[31mbad\x07\r"}});
  EXPECT_EQ(p.profiled.result.out, p.plain.result.out) << Show(p.profiled.result);
  EXPECT_EQ(p.profiled.result.exit_code, 0) << Show(p.profiled.result);
  const std::string& err = p.profiled.result.err;
  ASSERT_NE(err.find("DLPROF_HZ"), std::string::npos) << "no warning about DLPROF_HZ: " << Show(p.profiled.result);
  std::string raw;
  for (unsigned char c : err) {
    if ((c < 0x20 && c != '\n') || c == 0x7f) raw += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
  }
  EXPECT_EQ(raw, "") << "raw control characters on stderr: " << ::testing::PrintToString(err);
  EXPECT_EQ(Lines(err).size(), 1u) << ::testing::PrintToString(err);
}

}  // namespace
}  // namespace dlprof
