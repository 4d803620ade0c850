// `dlprof run` as a wrapper, on real processes (tests/programs/signal_child.cc):
// its stdout is the program's alone, its exit status or signal is the
// program's, signals sent to it reach the program once, and as PID 1 of a
// PID namespace it forwards signals and reaps orphans.
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/files.h"
#include "tests/support/subprocess.h"

extern char** environ;

namespace dlprof {
namespace {

using testing::ProcessResult;
using testing::ProgramPath;
using testing::ReadFile;
using testing::RunProcess;
using testing::TempDir;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";
const std::string kChild = ProgramPath("signal_child");

// Starts argv in its own process group with stdout and stderr to files;
// `in_child` runs just before the exec.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& out, const std::string& err,
            const std::function<void()>& in_child = [] {}) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(125);
    dup2(o, 1);
    dup2(e, 2);
    in_child();
    execve(args[0], args.data(), environ);
    _exit(125);
  }
  return pid;
}

// The waitpid status of pid, or -1 after killing its group at the deadline.
int WaitStatus(pid_t pid, int timeout_s = 30) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

int Count(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  int n = 0;
  for (std::string l; std::getline(in, l);) n += l == line;
  return n;
}

// Waits until `file` has the line `line`.
bool WaitForLine(const std::string& file, const std::string& line, int timeout_ms = 20000) {
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    if (Count(ReadFile(file), line) > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool ReportWritten(const std::string& dir) {
  const std::string text = ReadFile(dir + "/summary.json");
  if (text.empty()) return false;
  return !nlohmann::json::parse(text)["processes"].empty();
}

std::vector<std::string> RunArgs(const TempDir& dir, const std::vector<std::string>& program) {
  std::vector<std::string> argv = {kDlprof, "run", "-o", dir.File("out"), "-r", dir.File("report"), "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

TEST(RunWrapper, StdoutIsTheProgramsOwnByteForByte) {
  TempDir dir;
  ProcessResult alone = RunProcess({kChild, "print"});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  ASSERT_GT(alone.out.size(), 20u);
  ProcessResult wrapped = RunProcess(RunArgs(dir, {kChild, "print"}));
  EXPECT_EQ(wrapped.exit_code, 0) << wrapped.err;
  EXPECT_EQ(wrapped.out, alone.out);
  // dlprof's own lines went to stderr, and the report was written.
  EXPECT_NE(wrapped.err.find("dlprof: report written to " + dir.File("report")), std::string::npos)
      << wrapped.err;
  EXPECT_TRUE(ReportWritten(dir.File("report")));
}

TEST(RunWrapper, ExitStatusPassesThroughAndA127StillGetsItsReport) {
  for (int code : {3, 127}) {
    TempDir dir;
    ProcessResult r = RunProcess(RunArgs(dir, {kChild, "exit", std::to_string(code)}));
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_EQ(r.out, "exiting with " + std::to_string(code) + "\n");
    EXPECT_TRUE(ReportWritten(dir.File("report"))) << code << ": " << r.err;
  }
}

// Whether the ELF file at `path` has no program interpreter (statically
// linked: LD_PRELOAD cannot reach it).
bool StaticallyLinked(const std::string& path) {
  const std::string elf = ReadFile(path);
  Elf64_Ehdr eh;
  if (elf.size() < sizeof(eh)) return false;
  memcpy(&eh, elf.data(), sizeof(eh));
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return false;
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    const size_t at = eh.e_phoff + i * eh.e_phentsize;
    if (at + sizeof(ph) > elf.size()) return false;
    memcpy(&ph, elf.data() + at, sizeof(ph));
    if (ph.p_type == PT_INTERP) return false;
  }
  return true;
}

// The program's status is dlprof's also when profiling gave nothing: a
// statically linked program writes no profile, and a report folder that
// cannot be made fails the report; each is one line on stderr, not a
// failed job (dlprof exited 1 after a program's 0).
TEST(RunWrapper, NoProfileOrAFailedReportKeepsTheProgramsStatus) {
  const std::string ldconfig = "/sbin/ldconfig";  // static in Debian's libc-bin
  if (!StaticallyLinked(ldconfig)) GTEST_SKIP() << ldconfig << " is not statically linked here";
  TempDir dir;
  ProcessResult alone = RunProcess({ldconfig, "--version"});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  ProcessResult r = RunProcess(RunArgs(dir, {ldconfig, "--version"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, alone.out);
  EXPECT_NE(r.err.find("dlprof: the program wrote no profile"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  testing::WriteFile(dir.File("a-file"), "");
  ProcessResult failed = RunProcess({kDlprof, "run", "-o", dir.File("out"), "-r", dir.File("a-file/report"),
                                     "--", kChild, "exit", "0"});
  EXPECT_EQ(failed.exit_code, 0) << failed.err;
  EXPECT_NE(failed.err.find("dlprof: "), std::string::npos) << "no line saying the report failed";
}

TEST(RunWrapper, ProgramThatCannotStartIs127Or126WithOneLineAndNoReport) {
  TempDir dir;
  ProcessResult missing = RunProcess(RunArgs(dir, {dir.File("no-such-program")}));
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("dlprof: cannot run " + dir.File("no-such-program") +
                             ": No such file or directory"), std::string::npos) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  testing::WriteFile(dir.File("not-executable"), "#!/bin/sh\nexit 0\n");
  ProcessResult denied = RunProcess(RunArgs(dir, {dir.File("not-executable")}));
  EXPECT_EQ(denied.exit_code, 126);
  EXPECT_NE(denied.err.find("Permission denied"), std::string::npos) << denied.err;
  struct stat st;
  EXPECT_NE(stat(dir.File("report").c_str(), &st), 0) << "a report of nothing";
}

// The report says what killed it too: dlprof reaps the program only once
// its collector process has read the cause from the zombie (reaped first,
// the profile said "died (no end record)").
TEST(RunWrapper, ProgramKilledBySignalKillsDlprofByTheSameSignalAfterTheReport) {
  for (int sig : {SIGTERM, SIGUSR1, SIGKILL}) {
    TempDir dir;
    ProcessResult r = RunProcess(RunArgs(dir, {kChild, "raise", std::to_string(sig)}));
    EXPECT_EQ(r.exit_code, -1) << r.err;
    EXPECT_EQ(r.term_signal, sig) << r.err;
    ASSERT_TRUE(ReportWritten(dir.File("report"))) << r.err;
    const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir.File("report") + "/summary.json"));
    const nlohmann::json& main = summary["processes"][0];
    if (main.value("collector", "") != "process") continue;  // the thread: its own handlers
    EXPECT_EQ(main["end"], "signal " + std::to_string(sig)) << main.dump();
    EXPECT_TRUE(main["complete"].get<bool>()) << main.dump();
  }
}

TEST(RunWrapper, DyingOfSigquitLeavesNoCoreDumpOfDlprofs) {
  TempDir dir;
  // Core dumps allowed and written into the folder (where core_pattern is a
  // plain name): dlprof's own dump would show as WCOREDUMP.
  const pid_t pid = Spawn(RunArgs(dir, {kChild, "raise", std::to_string(SIGQUIT)}), dir.File("o"),
                          dir.File("e"), [&] {
                            const rlimit unlimited = {RLIM_INFINITY, RLIM_INFINITY};
                            setrlimit(RLIMIT_CORE, &unlimited);
                            if (chdir(dir.path().c_str()) != 0) _exit(125);
                          });
  const int status = WaitStatus(pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << status << " " << ReadFile(dir.File("e"));
  EXPECT_EQ(WTERMSIG(status), SIGQUIT);
  EXPECT_FALSE(WCOREDUMP(status));
  EXPECT_TRUE(ReportWritten(dir.File("report"))) << ReadFile(dir.File("e"));
}

// Each signal sent to dlprof's pid reaches the program's handler, once; the
// last, SIGTERM, ends the program, and the report is written.
TEST(RunWrapper, SignalsSentToDlprofReachTheProgramOnce) {
  TempDir dir;
  const std::string log = dir.File("log");
  const pid_t pid = Spawn(RunArgs(dir, {kChild, "wait", log}), dir.File("o"), dir.File("e"));
  ASSERT_TRUE(WaitForLine(log, "ready")) << ReadFile(dir.File("e"));
  // The fault signals too, when a process sends them (kill -ABRT, a
  // watchdog's SIGSEGV): dlprof died of them and orphaned the program.
  const std::vector<int> sigs = {SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT,
                                 SIGALRM, SIGABRT, SIGSEGV, SIGBUS,  SIGFPE,  SIGILL,   SIGTRAP,
                                 SIGSYS,  SIGXCPU, SIGXFSZ, SIGPIPE, SIGPROF, SIGTERM};
  for (int sig : sigs) {
    ASSERT_EQ(kill(pid, sig), 0) << sig;
    EXPECT_TRUE(WaitForLine(log, "sig " + std::to_string(sig), 10000)) << sig << "\n" << ReadFile(log);
  }
  const int status = WaitStatus(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << ReadFile(dir.File("e"));
  const std::string text = ReadFile(log);
  for (int sig : sigs) EXPECT_EQ(Count(text, "sig " + std::to_string(sig)), 1) << sig << "\n" << text;
  EXPECT_TRUE(ReportWritten(dir.File("report"))) << ReadFile(dir.File("e"));
  EXPECT_EQ(ReadFile(dir.File("o")), "");
}

// The first child of `parent` (dlprof's: the program; unshare's: dlprof as
// PID 1 inside), 0 if none.
pid_t ChildOf(pid_t parent) {
  const std::string p = std::to_string(parent);
  return static_cast<pid_t>(std::atoi(ReadFile("/proc/" + p + "/task/" + p + "/children").c_str()));
}

// The state letter of /proc/<pid>/stat ('T' stopped, 'Z' zombie), '?' if gone.
char ProcessState(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

// `dlprof run` of a program that burns CPU until killed, once it runs:
// dlprof's pid and the program's.
void SpawnSpinning(const TempDir& dir, pid_t* pid, pid_t* program) {
  *pid = Spawn(RunArgs(dir, {kChild, "spin", dir.File("log")}), dir.File("o"), dir.File("e"));
  ASSERT_TRUE(WaitForLine(dir.File("log"), "ready")) << ReadFile(dir.File("e"));
  *program = ChildOf(*pid);
  ASSERT_GT(*program, 0) << "no child of dlprof " << *pid;
}

// SIGTSTP from another process (kill -TSTP, a supervisor pausing the job):
// the program stops, and dlprof with it by the same signal, as a shell would
// see the job; SIGCONT resumes both. Before, only dlprof stopped.
TEST(RunWrapper, SigtstpToDlprofStopsTheProgramAndDlprof) {
  TempDir dir;
  pid_t pid = 0, program = 0;
  ASSERT_NO_FATAL_FAILURE(SpawnSpinning(dir, &pid, &program));
  auto wait_for = [](pid_t p, bool stopped) {
    for (int i = 0; i < 500; ++i) {
      if ((ProcessState(p) == 'T') == stopped) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  ASSERT_EQ(kill(pid, SIGTSTP), 0);
  EXPECT_TRUE(wait_for(program, true)) << "the program did not stop: " << ProcessState(program);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, WUNTRACED), pid);
  EXPECT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTSTP) << status;
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  EXPECT_TRUE(wait_for(pid, false)) << "dlprof did not resume";
  EXPECT_TRUE(wait_for(program, false)) << "the program did not resume: " << ProcessState(program);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  status = WaitStatus(pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
}

// A program that stops itself (or is stopped by a debugger's SIGSTOP) stops
// dlprof with it, so the shell gets its prompt back as without dlprof (it
// hung before); and one that ignores SIGTSTP stops neither (a Ctrl-Z or a
// kill -TSTP stopped dlprof alone, and the shell saw a job stopped that ran).
TEST(RunWrapper, DlprofStopsWhenTheProgramStopsAndOnlyThen) {
  {
    TempDir dir;
    const pid_t pid = Spawn(RunArgs(dir, {kChild, "selfstop", dir.File("log")}), dir.File("o"), dir.File("e"));
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, WUNTRACED), pid);
    EXPECT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP) << status;
    EXPECT_TRUE(WaitForLine(dir.File("log"), "ready"));
    ASSERT_EQ(kill(pid, SIGCONT), 0);  // forwarded: the program goes on, and ends
    status = WaitStatus(pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << ReadFile(dir.File("e"));
    EXPECT_TRUE(WaitForLine(dir.File("log"), "continued"));
  }
  {
    TempDir dir;
    const pid_t pid = Spawn(RunArgs(dir, {kChild, "ignoretstp", dir.File("log")}), dir.File("o"), dir.File("e"));
    ASSERT_TRUE(WaitForLine(dir.File("log"), "ready")) << ReadFile(dir.File("e"));
    ASSERT_EQ(kill(pid, SIGTSTP), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, WUNTRACED), pid);  // no stop before the end
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << ReadFile(dir.File("e"));
    EXPECT_TRUE(WaitForLine(dir.File("log"), "done"));
  }
}

// SIGKILL cannot be passed on: Popen.kill() or a supervisor's last resort on
// dlprof must still end the program, which ran on alone before.
TEST(RunWrapper, SigkillToDlprofEndsTheProgramToo) {
  TempDir dir;
  pid_t pid = 0, program = 0;
  ASSERT_NO_FATAL_FAILURE(SpawnSpinning(dir, &pid, &program));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  const int status = WaitStatus(pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  // The program is reparented and killed; a zombie of it, not yet reaped by
  // its new parent, counts as ended.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    const char state = ProcessState(program);
    gone = state == '?' || state == 'Z';
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the program (pid " << program << ") still runs after dlprof was killed";
  if (!gone) kill(program, SIGKILL);
}

// docker stop, kill, systemd: SIGTERM to dlprof, the program has no handler
// of its own; it dies of it, and so does dlprof, after writing the report.
TEST(RunWrapper, SigtermToDlprofEndsTheProgramAndTheReportIsWritten) {
  TempDir dir;
  const std::string log = dir.File("log");
  const pid_t pid = Spawn(RunArgs(dir, {kChild, "spin", log}), dir.File("o"), dir.File("e"));
  ASSERT_TRUE(WaitForLine(log, "ready")) << ReadFile(dir.File("e"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  const int status = WaitStatus(pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << status << " " << ReadFile(dir.File("e"));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_TRUE(ReportWritten(dir.File("report"))) << ReadFile(dir.File("e"));
}

// The terminal's Ctrl-C goes to the whole foreground process group, dlprof
// and the program alike: dlprof must not deliver a second SIGINT.
TEST(RunWrapper, CtrlCOnTheTerminalReachesTheProgramOnce) {
  TempDir dir;
  const std::string log = dir.File("log");
  const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const std::string slave = ptsname(master);
  std::vector<std::string> argv = RunArgs(dir, {kChild, "wait", log});
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // a session of its own whose controlling terminal is the pty
    const int tty = open(slave.c_str(), O_RDWR);
    if (tty < 0 || ioctl(tty, TIOCSCTTY, 0) != 0) _exit(125);
    dup2(tty, 0);
    dup2(tty, 1);
    dup2(tty, 2);
    execve(args[0], args.data(), environ);
    _exit(125);
  }
  fcntl(master, F_SETFL, O_NONBLOCK);
  std::string screen;
  auto drain = [&] {
    char buf[4096];
    ssize_t n;
    while ((n = read(master, buf, sizeof(buf))) > 0) screen.append(buf, static_cast<size_t>(n));
  };
  ASSERT_TRUE(WaitForLine(log, "ready")) << screen;
  termios t;
  ASSERT_EQ(tcgetattr(master, &t), 0);
  ASSERT_TRUE(t.c_lflag & ISIG);
  const char ctrl_c = static_cast<char>(t.c_cc[VINTR]);
  ASSERT_EQ(write(master, &ctrl_c, 1), 1);
  EXPECT_TRUE(WaitForLine(log, "sig " + std::to_string(SIGINT))) << ReadFile(log);
  // A forwarded second copy would come within a few ms of the first.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  drain();
  EXPECT_EQ(Count(ReadFile(log), "sig " + std::to_string(SIGINT)), 1) << ReadFile(log);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  for (int i = 0; i < 3000 && waitpid(pid, &status, WNOHANG) == 0; ++i) {
    drain();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  drain();
  close(master);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << screen;
}

// As PID 1 of a PID namespace (a container's entry point), where the kernel
// drops every signal without a handler. unshare is this machine's container.
class Pid1Test : public ::testing::Test {
 protected:
  void SetUp() override {
    ProcessResult probe = RunProcess({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "/bin/true"});
    if (probe.exit_code != 0) GTEST_SKIP() << "unshare --pid refused here: " << probe.err;
  }
  static std::vector<std::string> Unshare(std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc"});
    return argv;
  }
};

TEST_F(Pid1Test, SignalsFromOutsideReachTheProgram) {
  TempDir dir;
  const std::string log = dir.File("log");
  const pid_t unshare = Spawn(Unshare(RunArgs(dir, {kChild, "wait", log})), dir.File("o"), dir.File("e"));
  ASSERT_TRUE(WaitForLine(log, "ready")) << ReadFile(dir.File("e"));
  const pid_t dlprof = ChildOf(unshare);
  ASSERT_GT(dlprof, 0);
  ASSERT_NE(ReadFile("/proc/" + std::to_string(dlprof) + "/status").find("NSpid:\t" + std::to_string(dlprof) + "\t1\n"),
            std::string::npos) << "dlprof is not PID 1 in its namespace";
  for (int sig : {SIGUSR1, SIGTERM}) {
    ASSERT_EQ(kill(dlprof, sig), 0);
    EXPECT_TRUE(WaitForLine(log, "sig " + std::to_string(sig), 10000)) << sig << "\n" << ReadFile(log);
  }
  const int status = WaitStatus(unshare);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << " " << ReadFile(dir.File("e"));
  EXPECT_TRUE(ReportWritten(dir.File("report"))) << ReadFile(dir.File("e"));
}

TEST_F(Pid1Test, OrphansAreReaped) {
  TempDir dir;
  ProcessResult r = RunProcess(Unshare(RunArgs(dir, {kChild, "orphan"})));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "orphan reaped\n") << r.err;
}

TEST_F(Pid1Test, ProgramKilledBySignalIs128PlusN) {
  // PID 1 cannot die of its own signal: the status says it instead.
  TempDir dir;
  ProcessResult r = RunProcess(Unshare(RunArgs(dir, {kChild, "raise", std::to_string(SIGUSR2)})));
  const bool as_status = r.exit_code == 128 + SIGUSR2;
  const bool as_signal = r.term_signal == SIGUSR2;  // unshare re-raises what its child died of
  EXPECT_TRUE(as_status || as_signal) << r.exit_code << " " << r.term_signal << " " << r.err;
  EXPECT_TRUE(ReportWritten(dir.File("report"))) << r.err;
}

}  // namespace
}  // namespace dlprof
