// SpawnInvisibleChild (core/collector_spawn.h) with real processes: the helper
// is tests/programs/spawn_probe, which reports what it sees on its fd 3.
// Tests that kill a helper make this process a subreaper first, to reap it.
// Tests that change process-wide state (rlimits, fd numbers, a process group
// signal) do it in a forked child, whose findings come back as a message.
#include "core/collector_spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

const std::string kProbe = testing::ProgramPath("spawn_probe");

pid_t SpawnProbe(const std::vector<std::string>& args, int pass_fd, std::string* error = nullptr,
                 int pass_fd2 = -1) {
  std::vector<const char*> argv = {kProbe.c_str()};
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  return SpawnInvisibleChild(kProbe.c_str(), argv.data(), nullptr, pass_fd, error, pass_fd2);
}

// A line from fd, without its newline; "" at EOF or after timeout_ms.
std::string ReadLine(int fd, int timeout_ms = 5000) {
  std::string line;
  char c;
  pollfd p = {fd, POLLIN, 0};
  while (poll(&p, 1, timeout_ms) == 1 && read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

std::string ReadAll(int fd) {
  std::string all;
  for (std::string line; !(line = ReadLine(fd)).empty();) all += line + "\n";
  return all;
}

std::string PipeName(int fd) {
  struct stat st;
  fstat(fd, &st);
  return "pipe:[" + std::to_string(st.st_ino) + "]";
}

// The probe's "fd N target" lines.
std::map<int, std::string> Fds(const std::string& report) {
  std::map<int, std::string> fds;
  std::istringstream in(report);
  for (std::string word; in >> word;) {
    if (word != "fd") continue;
    int n;
    std::string target;
    in >> n >> target;
    fds[n] = target;
  }
  return fds;
}

// Waits until `pid` (not a child of ours) has ended.
bool WaitEnded(pid_t pid) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return errno == ESRCH;
  pollfd p = {pidfd, POLLIN, 0};
  const bool ended = poll(&p, 1, 5000) == 1;
  close(pidfd);
  return ended;
}

// No child of any kind left (the intermediates were reaped).
bool NoChildren() {
  errno = 0;
  return waitpid(-1, nullptr, __WALL | WNOHANG) == -1 && errno == ECHILD;
}

// Runs `body` in a forked child; its return value ("" for success) comes back.
std::string InChild(const std::function<std::string()>& body) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return "pipe failed";
  const pid_t child = fork();
  if (child == 0) {
    const std::string message = body();
    if (write(out[1], message.data(), message.size()) < 0) _exit(2);
    _exit(0);
  }
  close(out[1]);
  std::string message;
  char buf[256];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) message.append(buf, n);
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    message += " (child status " + std::to_string(status) + ")";
  return message;
}

// Orphaned helpers come to this process, to be reaped (with exit signal
// SIGCHLD now, by a plain waitpid), instead of to init.
struct SubreaperScope {
  SubreaperScope() { prctl(PR_SET_CHILD_SUBREAPER, 1); }
  ~SubreaperScope() { prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

std::atomic<int> sigchld_count{0};

TEST(CollectorSpawn, HelperIsUnseenByWaitAndEndsWithoutSigchld) {
  struct sigaction counting = {}, old;
  counting.sa_handler = [](int) { sigchld_count++; };
  sigaction(SIGCHLD, &counting, &old);
  std::string error;
  const pid_t pid = SpawnProbe({"exit"}, -1, &error);
  ASSERT_GT(pid, 0) << error;
  ASSERT_TRUE(WaitEnded(pid));
  usleep(20000);
  // wait(-1) (Python's os.wait()), waitpid(-1, ..., 0), even by its pid.
  errno = 0;
  EXPECT_EQ(wait(nullptr), -1);
  EXPECT_EQ(errno, ECHILD);
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_TRUE(NoChildren());
  EXPECT_EQ(sigchld_count.load(), 0);
  EXPECT_FALSE(ReapInvisibleChild(pid, false, nullptr));
  sigaction(SIGCHLD, &old, nullptr);
}

// Where the caller is a subreaper it adopts the helper, an ordinary child.
TEST(CollectorSpawn, SubreaperCallerAdoptsHelper) {
  SubreaperScope subreaper;
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t pid = SpawnProbe({"wait"}, report[1]);
  close(report[1]);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(ReadLine(report[0]).substr(0, 5), "ready");
  EXPECT_FALSE(ReapInvisibleChild(pid, false, nullptr));
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), 0);  // a child, still running
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_TRUE(ReapInvisibleChild(pid, true, &status));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(NoChildren());
  close(report[0]);
}

TEST(CollectorSpawn, FailureBeforeExecIsReportedAndReaped) {
  std::string error;
  const char* argv[] = {"nowhere", nullptr};
  errno = EDOM;  // the program's, kept
  EXPECT_EQ(SpawnInvisibleChild("/nonexistent/helper", argv, nullptr, -1, &error), -1);
  EXPECT_EQ(errno, EDOM);
  EXPECT_NE(error.find("execve: No such file or directory"), std::string::npos) << error;
  EXPECT_EQ(SpawnProbe({"exit"}, 999, &error), -1);
  EXPECT_NE(error.find("placing the passed fds at 3 and 5: Bad file descriptor"), std::string::npos)
      << error;
  EXPECT_TRUE(NoChildren());
}

// The program's process group gets a signal (kill(0, ...) from inside, or a
// terminal's SIGINT from outside); the helper, in its own session, lives on.
void ExpectGroupSignalMissesHelper(bool from_inside) {
  SubreaperScope subreaper;
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t program = fork();
  if (program == 0) {
    setpgid(0, 0);
    const pid_t helper = SpawnProbe({"wait"}, report[1]);
    const std::string line = "helper " + std::to_string(helper) + "\n";
    if (write(report[1], line.data(), line.size()) < 0) _exit(2);
    if (from_inside) kill(0, SIGTERM);
    for (;;) pause();
  }
  close(report[1]);
  pid_t helper = -1, sid = -1;
  for (int i = 0; i < 2; ++i) {
    std::istringstream line(ReadLine(report[0]));
    std::string word;
    line >> word;
    (word == "helper" ? line >> helper : line >> sid);
  }
  ASSERT_GT(helper, 0);
  EXPECT_NE(sid, getsid(0));  // a new session (the intermediate's)
  EXPECT_NE(sid, helper);     // not led by the helper
  if (!from_inside) kill(-program, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(program, &status, 0), program);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == (from_inside ? SIGTERM : SIGINT));
  usleep(20000);
  EXPECT_EQ(kill(helper, 0), 0);
  // Orphaned, it is this subreaper's ordinary child: a plain wait sees it.
  EXPECT_EQ(waitpid(-1, &status, WNOHANG), 0);
  kill(helper, SIGKILL);
  EXPECT_EQ(waitpid(-1, &status, 0), helper);
  close(report[0]);
}

TEST(CollectorSpawn, KillOfOwnGroupMissesHelper) { ExpectGroupSignalMissesHelper(true); }

TEST(CollectorSpawn, TerminalSigintToGroupMissesHelper) { ExpectGroupSignalMissesHelper(false); }

TEST(CollectorSpawn, HoldsOnlyThePassedFd) {
  int other[2], report[2];
  ASSERT_EQ(pipe(other), 0);  // no O_CLOEXEC: a fork+exec would pass it on
  ASSERT_EQ(pipe(report), 0);
  const pid_t pid = SpawnProbe({"report"}, report[1]);
  close(report[1]);
  ASSERT_GT(pid, 0);
  const std::string text = ReadAll(report[0]);
  EXPECT_EQ(text.find(" ppid " + std::to_string(getpid()) + "\n"), std::string::npos) << text;
  const auto fds = Fds(text);
  const std::map<int, std::string> expected = {{0, "/dev/null"},
                                               {1, "/dev/null"},
                                               {2, "/dev/null"},
                                               {3, PipeName(report[0])},
                                               {4, "anon_inode:[pidfd]"}};
  EXPECT_EQ(fds, expected);
  close(report[0]);
  close(other[0]);
  close(other[1]);
}

// A second passed fd arrives as 5 whatever its number, even 3 or 5, and
// next to a first passed fd numbered 5 (the collector process's run lock).
TEST(CollectorSpawn, SecondPassedFdArrivesAsFive) {
  // The pipes are moved above 60 first, so that the numbers tried are free.
  auto high = [](int fd) {
    const int moved = fcntl(fd, F_DUPFD, 60);
    close(fd);
    return moved;
  };
  for (int second_at : {3, 5, 40}) {
    int report[2], lock[2];
    ASSERT_EQ(pipe(report), 0);
    ASSERT_EQ(pipe(lock), 0);
    for (int* fd : {&report[0], &report[1], &lock[0], &lock[1]}) *fd = high(*fd);
    // The first passed fd at 5 when the second is at 3, else out of the way.
    const int first = second_at == 3 ? 5 : 50;
    ASSERT_EQ(dup2(lock[0], second_at), second_at);
    ASSERT_EQ(dup2(report[1], first), first);
    const pid_t pid = SpawnProbe({"report"}, first, nullptr, second_at);
    close(report[1]);
    close(first);
    close(second_at);
    ASSERT_GT(pid, 0) << "second at " << second_at;
    const auto fds = Fds(ReadAll(report[0]));
    const std::map<int, std::string> expected = {{0, "/dev/null"},
                                                 {1, "/dev/null"},
                                                 {2, "/dev/null"},
                                                 {3, PipeName(report[0])},
                                                 {4, "anon_inode:[pidfd]"},
                                                 {5, PipeName(lock[0])}};
    EXPECT_EQ(fds, expected) << "second at " << second_at;
    close(report[0]);
    close(lock[0]);
    close(lock[1]);
  }
}

TEST(CollectorSpawn, ReadingAPipeToEofDoesNotWaitForHelper) {
  SubreaperScope subreaper;
  int other[2], report[2];
  ASSERT_EQ(pipe(other), 0);
  ASSERT_EQ(pipe(report), 0);
  const pid_t pid = SpawnProbe({"wait"}, report[1]);
  close(report[1]);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(ReadLine(report[0]).substr(0, 5), "ready");
  close(other[1]);
  pollfd p = {other[0], POLLIN, 0};
  char c;
  EXPECT_EQ(poll(&p, 1, 2000), 1);
  EXPECT_EQ(read(other[0], &c, 1), 0);
  kill(pid, SIGKILL);
  ASSERT_TRUE(ReapInvisibleChild(pid, true, nullptr));
  close(other[0]);
  close(report[0]);
}

class PassFdNumber : public ::testing::TestWithParam<int> {};

// Any fd number works, stdio's and 3 itself (even with FD_CLOEXEC).
TEST_P(PassFdNumber, ArrivesAsFdThree) {
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const int n = GetParam();
  const std::string message = InChild([&]() -> std::string {
    if (dup2(report[1], n) != n || fcntl(n, F_SETFD, FD_CLOEXEC) != 0) return "dup2 failed";
    std::string error;
    const pid_t pid = SpawnProbe({"report"}, n, &error);
    return pid > 0 ? "" : error;
  });
  close(report[1]);
  EXPECT_EQ(message, "");
  EXPECT_EQ(Fds(ReadAll(report[0]))[3], PipeName(report[0]));
  close(report[0]);
}

INSTANTIATE_TEST_SUITE_P(CollectorSpawn, PassFdNumber, ::testing::Values(0, 1, 2, 3, 10));

// RLIMIT_NOFILE's soft limit (the hard one is 64): the helper takes the
// hard one, to load its libraries and hold the pidfd.
class LowFdLimit : public ::testing::TestWithParam<int> {};

// The caller's fd table is full at RLIMIT_NOFILE; the pass fd is its last.
TEST_P(LowFdLimit, SpawnsWithFullTable) {
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const int limit = GetParam();
  const std::string message = InChild([&]() -> std::string {
    const int last = limit - 1;
    if (dup2(report[1], last) != last) return "dup2 failed";
    const rlimit low = {static_cast<rlim_t>(limit), 64};
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) return "setrlimit failed";
    while (open("/dev/null", O_RDONLY) >= 0) {
    }
    std::string error;
    const pid_t pid = SpawnProbe({"report"}, last, &error);
    return pid > 0 ? "" : error;
  });
  close(report[1]);
  EXPECT_EQ(message, "");
  const auto fds = Fds(ReadAll(report[0]));
  EXPECT_EQ(fds.size(), 5u);
  EXPECT_EQ(fds.at(3), PipeName(report[0]));
  close(report[0]);
}

INSTANTIATE_TEST_SUITE_P(CollectorSpawn, LowFdLimit, ::testing::Values(4, 16));

TEST(CollectorSpawn, CallersSignalMaskAndIgnoredSignalsDoNotLeak) {
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const std::string message = InChild([&]() -> std::string {
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGUSR1);
    sigaddset(&blocked, SIGTERM);
    sigprocmask(SIG_BLOCK, &blocked, nullptr);
    signal(SIGPIPE, SIG_IGN);  // as Python does
    signal(SIGINT, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    signal(SIGHUP, [](int) {});
    std::string error;
    const pid_t pid = SpawnProbe({"report"}, report[1], &error);
    return pid > 0 ? "" : error;
  });
  close(report[1]);
  EXPECT_EQ(message, "");
  const std::string text = ReadAll(report[0]);
  EXPECT_NE(text.find("SigBlk:\t0000000000000000"), std::string::npos) << text;
  EXPECT_NE(text.find("SigIgn:\t0000000000000000"), std::string::npos) << text;
  close(report[0]);
}

TEST(CollectorSpawn, WorksFromMultiThreadedCaller) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int i = 0; i < 3; ++i) {
    busy.emplace_back([&] {
      while (!stop) delete[] new char[1 + rand() % 4096];  // malloc's locks taken throughout
    });
  }
  std::atomic<int> spawned{0};
  std::vector<std::thread> spawners;
  for (int i = 0; i < 2; ++i) {
    spawners.emplace_back([&] {
      for (int j = 0; j < 25; ++j) {
        if (SpawnProbe({"exit"}, -1) > 0) ++spawned;
      }
    });
  }
  for (auto& t : spawners) t.join();
  stop = true;
  for (auto& t : busy) t.join();
  EXPECT_EQ(spawned.load(), 50);
  EXPECT_TRUE(NoChildren());
}

// The kernel auto-reaps only children whose exit signal is SIGCHLD: the
// intermediate (exit signal 0) is not, and is reaped by pid all the same.
TEST(CollectorSpawn, IgnoredSigchldLeavesNoZombie) {
  struct sigaction ignore = {}, old;
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGCHLD, &ignore, &old);
  const pid_t pid = SpawnProbe({"exit"}, -1);
  EXPECT_GT(pid, 0);
  EXPECT_TRUE(WaitEnded(pid));
  EXPECT_TRUE(NoChildren());
  sigaction(SIGCHLD, &old, nullptr);
}

// The helper polls its fd 4, the caller's pidfd: a SIGKILLed program is
// noticed.
TEST(CollectorSpawn, HelperLearnsOfCallersDeathByPidfd) {
  SubreaperScope subreaper;
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t program = fork();
  if (program == 0) {
    const pid_t helper = SpawnProbe({"watch"}, report[1]);
    const std::string line = "helper " + std::to_string(helper) + "\n";
    if (write(report[1], line.data(), line.size()) < 0) _exit(2);
    for (;;) pause();
  }
  close(report[1]);
  std::vector<std::string> lines = {ReadLine(report[0]), ReadLine(report[0])};
  std::sort(lines.begin(), lines.end());
  ASSERT_EQ(lines[0].substr(0, 7), "helper ");
  ASSERT_EQ(lines[1], "watching");
  const pid_t helper = std::stoi(lines[0].substr(7));
  const auto killed = std::chrono::steady_clock::now();
  kill(program, SIGKILL);
  EXPECT_EQ(ReadLine(report[0], 2000), "caller ended");
  const auto noticed = std::chrono::steady_clock::now();
  // At once, not at a poll's next round (a second): 500 ms leaves room for
  // a loaded machine under TSan (159 ms seen in a CI run).
  EXPECT_LT(noticed - killed, std::chrono::milliseconds(500));
  EXPECT_EQ(waitpid(program, nullptr, 0), program);
  int status = -1;
  EXPECT_EQ(waitpid(helper, &status, 0), helper);
  EXPECT_EQ(status, 0);
  close(report[0]);
}

}  // namespace
}  // namespace dlprof
