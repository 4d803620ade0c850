// Every timer source samples a whole run end to end, and "auto" falls back
// when perf events are refused, as they are under a container's default
// seccomp profile: there perf_event_open fails with EACCES (or EPERM with
// perf_event_paranoid=3 and no CAP_PERFMON). The program must run as it
// would without dlprof, and its stages must come out with the CPU shares it
// measured itself.
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "readers/dlprof_reader.h"
#include "tests/support/files.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::MakeTempDir;
using testing::ProgramPath;
using testing::ReadFile;

// Makes perf_event_open fail with EACCES for this process and everything it
// execs (a container's default profile says EPERM; both mean "refused").
bool DenyPerfEvents() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

struct WorkloadRun {
  int exit_code = -1;
  int term_signal = 0;
  std::string out, err;
  Profile profile;
  size_t files = 0;
};

// Runs rt_workload with `env` added, optionally with perf events refused.
WorkloadRun RunWorkload(const std::vector<std::string>& args, std::map<std::string, std::string> env,
                bool deny_perf) {
  WorkloadRun run;
  const std::string dir = MakeTempDir("dlprof-timer");
  env["DLPROF_OUT"] = dir + "/out";
  const std::string out_path = dir + "/stdout", err_path = dir + "/stderr";
  std::vector<std::string> argv = {ProgramPath("rt_workload")};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    if (deny_perf && !DenyPerfEvents()) _exit(126);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  std::string error;
  std::vector<std::string> files = ListRunFiles(dir + "/out", &error);
  run.files = files.size();
  for (const auto& f : files) EXPECT_TRUE(ReadDlprofFile(f, &run.profile, &error)) << error;
  return run;
}

std::map<std::string, double> CpuShareByStage(const Profile& p, const std::vector<std::string>& of) {
  std::map<std::string, int64_t> counts;
  int64_t total = 0;
  for (const Sample& s : p.samples) {
    if (s.kind != SampleKind::kCpu) continue;
    const auto& path = p.stage_paths[s.stage_path];
    const std::string stage = path.empty() ? "" : p.stages[path.back()];
    for (const auto& name : of) {
      if (stage == name) {
        counts[stage] += s.count;
        total += s.count;
      }
    }
  }
  std::map<std::string, double> share;
  for (const auto& name : of) share[name] = total ? 100.0 * counts[name] / total : 0;
  share["total"] = static_cast<double>(total);
  return share;
}

// "mixjitter 3000": 10/30/60% of 3 s of CPU in stages a/b/c, by the
// program's own thread CPU clock, in cycles of random length (the sources
// here are checked on the scheduler tick and would alias with a fixed
// cycle), plus a thread made after start.
void ExpectMixSharesHold(const WorkloadRun& run, const char* timer) {
  ASSERT_EQ(run.term_signal, 0) << "killed by signal " << run.term_signal << "\n" << run.err;
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(run.files, 1u) << run.err;
  ASSERT_EQ(run.profile.processes.size(), 1u);
  const auto& fields = run.profile.processes[0].fields;
  EXPECT_EQ(fields.count("timer") ? fields.at("timer") : "", timer);
  EXPECT_EQ(fields.count("end") ? fields.at("end") : "", "exit");
  auto share = CpuShareByStage(run.profile, {"a", "b", "c"});
  // 3 s at 250 Hz: ~750 samples in a/b/c (the scheduler tick caps these
  // sources at 250 Hz; POSIX timers count the rest as overruns).
  ASSERT_GT(share["total"], 450) << "too few samples to judge";
  // Within 3.5 standard deviations of a share measured by n samples (and
  // never less than 4 points): with 500 samples and a flat 4 points, 30%
  // is 2 deviations, and 34.06 failed a fresh-clone run.
  const double n = share["total"];
  for (const auto& [stage, want] : {std::pair<const char*, double>{"a", 10.0}, {"b", 30.0}, {"c", 60.0}}) {
    const double sd = 100.0 * std::sqrt(want / 100 * (1 - want / 100) / n);
    EXPECT_NEAR(share[stage], want, std::max(4.0, 3.5 * sd)) << stage << " of " << n << " samples";
  }
}

TEST(TimerFallback, PerfRefusedBySeccompFallsBackToPosixTimersAndTheProgramLives) {
  WorkloadRun run = RunWorkload({"mixjitter", "3000"}, {{"DLPROF_SAMPLE", "1"}, {"DLPROF_HZ", "250"}}, true);
  ExpectMixSharesHold(run, "posix");
  // The fallback is said once in the profile, not on the program's stderr.
  const auto& fields = run.profile.processes[0].fields;
  EXPECT_NE(fields.count("timer_note") ? fields.at("timer_note") : "", "");
}

TEST(TimerFallback, PerfRefusedAt1000HzStillEndsCleanly) {
  // 1000 Hz asks for more than the tick gives: overruns carry the rest.
  WorkloadRun run = RunWorkload({"mixjitter", "1000"}, {{"DLPROF_SAMPLE", "1"}, {"DLPROF_HZ", "1000"}}, true);
  ASSERT_EQ(run.term_signal, 0) << "killed by signal " << run.term_signal << "\n" << run.err;
  EXPECT_EQ(run.exit_code, 0) << run.err;
  auto share = CpuShareByStage(run.profile, {"a", "b", "c"});
  EXPECT_GT(share["total"], 400) << "overruns should weigh samples to ~1000 Hz of CPU time";
}

TEST(TimerFallback, PosixTimersChosenByNameSampleTheWholeRun) {
  WorkloadRun run = RunWorkload({"mixjitter", "3000"},
                        {{"DLPROF_SAMPLE", "1"}, {"DLPROF_HZ", "250"}, {"DLPROF_TIMER", "posix"}}, false);
  ExpectMixSharesHold(run, "posix");
}

TEST(TimerFallback, ItimerChosenByNameSamplesTheWholeRun) {
  WorkloadRun run = RunWorkload({"mixjitter", "3000"},
                        {{"DLPROF_SAMPLE", "1"}, {"DLPROF_HZ", "250"}, {"DLPROF_TIMER", "itimer"}}, false);
  ExpectMixSharesHold(run, "itimer");
}

TEST(TimerFallback, ProgramOutputIsTheSameWithPerfRefused) {
  WorkloadRun plain = RunWorkload({"mixjitter", "500"}, {{"DLPROF_SAMPLE", "0"}}, true);
  WorkloadRun profiled = RunWorkload({"mixjitter", "500"}, {{"DLPROF_SAMPLE", "1"}, {"DLPROF_HZ", "1000"}}, true);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(profiled.exit_code, plain.exit_code) << profiled.err;
  EXPECT_EQ(profiled.term_signal, 0);
  EXPECT_EQ(profiled.out, plain.out);
  EXPECT_EQ(profiled.err, plain.err);
}

}  // namespace
}  // namespace dlprof
