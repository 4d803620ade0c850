// The shared arena (core/shared_arena.h) on its own: its extents are one
// memfd another process could map, a fork child gets a copy of its own
// (what the parent writes after the fork never reaches it, nor the reverse),
// and a child of a fork that ran no atfork handler is told it owns nothing.
#include "core/shared_arena.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/private_fd.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

// The line of /proc/self/maps that holds `p`.
std::string MapsLineOf(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && lo <= at && at < hi) return line;
  }
  return "";
}

// Runs `child` in a fork whose child privatizes its arena as dlprof's
// atfork child handler does, and returns its exit status (0: every check
// in it held).
template <typename F>
int InForkChild(F child) {
  const pid_t pid = fork();
  if (pid == 0) {
    ArenaPrivatizeInForkChild();
    _exit(child());
  }
  int status = -1;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(SharedArena, ExtentsAreOneMemfdKeptAboveTheProgramsNumbers) {
  auto* p = static_cast<uint64_t*>(ArenaMap(10000, AtFork::kCopy));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(p[0], 0u);
  EXPECT_EQ(p[12287 / 8], 0u) << "rounded up to whole pages, zeroed";
  ASSERT_TRUE(ArenaShared()) << "memfd_create or MADV_WIPEONFORK refused here?";
  EXPECT_NE(MapsLineOf(p).find("/memfd:dlprof-arena"), std::string::npos) << MapsLineOf(p);
  EXPECT_NE(MapsLineOf(p).find(" rw-s "), std::string::npos) << MapsLineOf(p);
  // Its descriptor sits at the top of the range, not among the program's.
  int found = -1;
  for (int fd = 0; fd < 4096; ++fd) {
    char path[64], target[256] = {};
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    if (readlink(path, target, sizeof(target) - 1) > 0 && strstr(target, "memfd:dlprof-arena")) {
      found = fd;
    }
  }
  EXPECT_GE(found, PrivateFdFloor());
  EXPECT_TRUE(ArenaOwned());
}

TEST(SharedArena, AForkChildGetsACopyOfItsOwn) {
  auto* table = static_cast<volatile uint64_t*>(ArenaMap(3 * 4096, AtFork::kCopy));
  auto* ring = static_cast<volatile uint64_t*>(ArenaMap(4096, AtFork::kZero));
  ASSERT_NE(table, nullptr);
  ASSERT_NE(ring, nullptr);
  table[0] = 11;
  table[1024] = 13;  // the third page; the second stays a hole
  ring[0] = 14;
  int pipe_to_child[2], pipe_to_parent[2];
  ASSERT_EQ(pipe(pipe_to_child), 0);
  ASSERT_EQ(pipe(pipe_to_parent), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    // No call here: the arena's own atfork handler took the child's copy.
    int bad = 0;
    if (!ArenaOwned()) bad |= 1;
    if (table[0] != 11 || table[1024] != 13) bad |= 2;  // the parent's contents
    if (table[512] != 0 || ring[0] != 0) bad |= 4;      // a hole, and the ring: fresh
    table[0] = 21;  // must not reach the parent
    ring[0] = 24;
    char c = static_cast<char>(bad);
    if (write(pipe_to_parent[1], &c, 1) != 1) _exit(90);
    // The parent writes now; none of it may reach this copy.
    if (read(pipe_to_child[0], &c, 1) != 1) _exit(91);
    if (table[1024] != 13 || ring[0] != 24) _exit(92);
    if (MapsLineOf(const_cast<uint64_t*>(table)).find("memfd:dlprof-arena") == std::string::npos) {
      _exit(93);  // still shared memory, a memfd of its own
    }
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(pipe_to_parent[0], &c, 1), 1);
  EXPECT_EQ(c, 0) << "bits: 1 not owned, 2 contents not copied, 4 not fresh";
  EXPECT_EQ(table[0], 11u) << "the child's write reached the parent";
  EXPECT_EQ(ring[0], 14u) << "the child's ring write reached the parent";
  table[1024] = 33;
  ring[0] = 34;
  ASSERT_EQ(write(pipe_to_child[1], &c, 1), 1);
  int status = -1;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "92: the parent's write reached the child; 93: not a memfd";
  for (int fd : {pipe_to_child[0], pipe_to_child[1], pipe_to_parent[0], pipe_to_parent[1]}) {
    close(fd);
  }
}

// The header is shared until the child has taken its copy, and the
// parent's other threads go on making extents meanwhile: the child must
// take only those that existed at the fork (a worker of the example
// pipeline died of SIGSEGV copying the parent's newer ones, not mapped in
// it), and its header must say so.
TEST(SharedArena, ExtentsTheParentMakesDuringAForkAreNotTheChilds) {
  ASSERT_NE(ArenaMap(4096, AtFork::kCopy), nullptr);
  std::atomic<bool> stop{false};
  // It runs until the forks are done (a thread that ended unjoined before
  // a fork is a leak in each child, to ThreadSanitizer).
  std::thread maker([&] {
    for (int i = 0; !stop.load(); ++i) {
      if (i >= 400) {
        usleep(1000);
        continue;
      }
      auto* p = static_cast<volatile uint64_t*>(ArenaMap(4096, AtFork::kCopy));
      if (p != nullptr) p[0] = 1;  // written: the child copies it
      ArenaSetRoot(ArenaRoot::kExecNotes, const_cast<uint64_t*>(p));
    }
  });
  int bad = 0;
  for (int f = 0; f < 40; ++f) {
    const int before = ArenaUsageNow().extents;
    const pid_t pid = fork();
    if (pid == 0) {
      const ArenaUsage usage = ArenaUsageNow();
      // Its root, if set, is in an extent it has: readable.
      const auto* root = static_cast<const volatile uint64_t*>(ArenaRootOf(ArenaRoot::kExecNotes));
      const bool root_ok = root == nullptr || root[0] == 1;
      _exit(ArenaOwned() && usage.shared && usage.extents >= before && root_ok ? 0 : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++bad;
  }
  stop.store(true);
  maker.join();
  EXPECT_EQ(bad, 0) << "fork children that crashed or did not own their arena";
}

// A child handler of the test's own, registered before any arena exists
// (at load), so that it runs before the arena's: while the child sleeps in
// it, the parent writes the arena.
std::atomic<bool> g_child_sleeps{false};
const int g_sleeper_registered = pthread_atfork(nullptr, nullptr, [] {
  if (g_child_sleeps.load()) usleep(50000);
});

// The child's arena is the parent's as at the fork, as the rest of its
// memory is: copied by the parent's prepare handler, not by the child later
// (a thread that forked and ended had its slot copied as exited, and the
// child lost every sample; a stage name interned after the fork pointed
// into a block mapped in the parent only: SIGSEGV).
TEST(SharedArena, AForkChildsArenaIsAsAtTheFork) {
  ASSERT_EQ(g_sleeper_registered, 0);
  auto* table = static_cast<volatile uint64_t*>(ArenaMap(4096, AtFork::kCopy));
  ASSERT_NE(table, nullptr);
  table[0] = 1;
  g_child_sleeps.store(true);
  const pid_t pid = fork();
  if (pid == 0) _exit(table[0] == 1 ? 0 : 1);
  table[0] = 2;  // while the child sleeps before taking its copy
  g_child_sleeps.store(false);
  int status = -1;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child saw what the parent wrote after the fork";
}

TEST(SharedArena, ChildrenOfForksWithoutAtforkHandlersOwnNothing) {
  ASSERT_NE(ArenaMap(4096, AtFork::kCopy), nullptr);
  ASSERT_TRUE(ArenaOwned());
  // A raw fork system call runs no handler of glibc's or ours.
  const pid_t raw = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
  if (raw == 0) _exit(ArenaOwned() ? 1 : 0);
  int status = -1;
  ASSERT_GT(raw, 0);
  waitpid(raw, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a raw fork child owns the arena";
  // fork() with our handler run: owned again.
  EXPECT_EQ(InForkChild([] { return ArenaOwned() ? 0 : 1; }), 0);
  EXPECT_TRUE(ArenaOwned()) << "the parent lost its arena";
}

TEST(SharedArena, ExtentsMadeInAForkChildAreItsOwnAndGrowItsMemfd) {
  ASSERT_NE(ArenaMap(4096, AtFork::kCopy), nullptr);
  EXPECT_EQ(InForkChild([] {
              auto* p = static_cast<volatile uint64_t*>(ArenaMap(8192, AtFork::kCopy));
              if (p == nullptr) return 1;
              p[1000] = 5;
              if (!ArenaShared()) return 2;
              return InForkChild([p] {  // a grandchild copies it in turn
                return p[1000] == 5 && ArenaOwned() ? 0 : 3;
              });
            }),
            0);
}

TEST(SharedArena, AClosedDescriptorLeavesPrivateMemoryNotAnError) {
  // Checked in a child, which owns a memfd of its own: the program may
  // close every descriptor above 2 (close_range), dlprof's too.
  ASSERT_NE(ArenaMap(4096, AtFork::kCopy), nullptr);
  EXPECT_EQ(InForkChild([] {
              for (int fd = 3; fd < 4096; ++fd) close(fd);
              auto* p = static_cast<volatile uint64_t*>(ArenaMap(4096, AtFork::kCopy));
              if (p == nullptr) return 1;
              p[0] = 1;
              if (ArenaShared()) return 2;  // this extent is private: no collector could map it
              // And the fd the program opens next at that number is left alone by
              // the next fork's privatization.
              int fds[2];
              if (pipe(fds) != 0) return 3;
              return InForkChild([&] { return fcntl(fds[0], F_GETFD) >= 0 && p[0] == 1 ? 0 : 4; });
            }),
            0);
}

// A child process with a pipe to its stdin and one from its stdout.
struct Child {
  pid_t pid = -1;
  int in = -1;   // its stdin
  FILE* out = nullptr;  // its stdout
};

Child Start(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int to[2], from[2];
  Child c;
  if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) return c;
  std::vector<char*> args, envs;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envs.push_back(const_cast<char*>(e.c_str()));
  envs.push_back(nullptr);
  c.pid = fork();
  if (c.pid == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    execve(args[0], args.data(), envs.data());
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  c.in = to[1];
  c.out = fdopen(from[0], "r");
  return c;
}

std::string Line(FILE* f) {
  char buf[512];
  if (fgets(buf, sizeof(buf), f) == nullptr) return "";
  std::string line(buf);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

struct Seen {
  std::map<std::string, uint32_t> stages;  // name -> id
  struct Thread {
    uint32_t depth = 0, stage = 0;
    uint64_t samples = 0, unread = 0;
  };
  std::map<int, Thread> threads;
  std::string text;
};

// One dump of arena_reader's, up to its "end".
Seen Dump(FILE* f) {
  Seen seen;
  for (std::string line = Line(f); !line.empty() && line != "end"; line = Line(f)) {
    seen.text += line + "\n";
    std::istringstream in(line);
    std::string kind, word;
    in >> kind;
    if (kind == "stage") {
      uint32_t id = 0;
      std::string name;
      in >> id >> name;
      seen.stages[name] = id;
    } else if (kind == "thread") {
      int tid = 0;
      Seen::Thread t;
      in >> tid >> word >> t.depth >> word >> t.stage >> word >> t.samples >> word >> t.unread;
      seen.threads[tid] = t;
    }
  }
  return seen;
}

// The number of the program's arena memfd, -1 if it has none.
int ArenaFdOf(pid_t pid) {
  for (int fd = 0; fd < 65536; ++fd) {
    char path[64], target[256] = {};
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    if (readlink(path, target, sizeof(target) - 1) > 0 && strstr(target, "memfd:dlprof-arena")) {
      return fd;
    }
  }
  return -1;
}

// Phase 2's premise, end to end: another process maps a live program's
// arena at the program's addresses and reads its threads, stages and the
// handler's counters from it; and after the program is SIGKILLed, what the
// handler committed is still there (today's collector thread dies with it).
// (The test is that other process: a collector process of the program's own
// would drain the rings before it, so the program keeps the thread.)
TEST(SharedArena, AnotherProcessReadsALiveProgramsSamplesAndKeepsThemPastSigkill) {
  const std::string out = testing::MakeTempDir("dlprof-arena");
  Child subject = Start({testing::ProgramPath("arena_subject")},
                        {"DLPROF_SAMPLE=1", "DLPROF_HZ=1000", "DLPROF_OUT=" + out,
                         "DLPROF_COLLECTOR=thread"});
  ASSERT_GT(subject.pid, 0);
  ASSERT_EQ(Line(subject.out), "ready");
  const int fd = ArenaFdOf(subject.pid);
  ASSERT_GE(fd, 0) << "no memfd:dlprof-arena in /proc/" << subject.pid << "/fd";
  const std::string path = "/proc/" + std::to_string(subject.pid) + "/fd/" + std::to_string(fd);
  Child reader;
  Seen before;
  // An address of the program's may be taken in the reader (exit 75): a
  // new exec has a new layout.
  for (int attempt = 0; attempt < 5 && before.threads.empty(); ++attempt) {
    if (reader.pid > 0) {
      close(reader.in);
      fclose(reader.out);
      int status = 0;
      waitpid(reader.pid, &status, 0);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75) << status;
    }
    reader = Start({testing::ProgramPath("arena_reader"), path}, {});
    ASSERT_GT(reader.pid, 0);
    before = Dump(reader.out);
  }
  ASSERT_EQ(before.stages.count("arena_subject_burn"), 1u) << before.text;
  ASSERT_EQ(before.threads.count(subject.pid), 1u) << before.text;
  const Seen::Thread main_before = before.threads[subject.pid];
  EXPECT_EQ(main_before.depth, 1u) << before.text;
  EXPECT_EQ(main_before.stage, before.stages["arena_subject_burn"]) << before.text;
  // 300 ms of CPU at 1000 Hz before "ready".
  EXPECT_GT(main_before.samples, 100u) << before.text;

  kill(subject.pid, SIGKILL);
  int status = 0;
  waitpid(subject.pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  ASSERT_EQ(write(reader.in, "\n", 1), 1);
  const Seen after = Dump(reader.out);
  ASSERT_EQ(after.threads.count(subject.pid), 1u) << after.text;
  const Seen::Thread main_after = after.threads.at(subject.pid);
  EXPECT_GE(main_after.samples, main_before.samples) << after.text;
  EXPECT_EQ(main_after.stage, main_before.stage) << after.text;
  EXPECT_EQ(after.stages, before.stages) << after.text;
  close(reader.in);
  fclose(reader.out);
  fclose(subject.out);
  close(subject.in);
  waitpid(reader.pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace dlprof
