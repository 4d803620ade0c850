// The threads' /proc files as the wall ticks read them (core/thread_proc.h):
// the parsers on real and odd texts, and the descriptors the collector
// process keeps, against a thread blocked in a known call and one that
// exits while its files are held.
#include "core/thread_proc.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <dlprof/format.h>
#include <gtest/gtest.h>

namespace dlprof {
namespace {

int OpenFdCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

pid_t Tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

TEST(ThreadProc, ParsesSchedstatFields) {
  int64_t cpu = -1;
  uint64_t slices = 0;
  EXPECT_EQ(ParseSchedstat("2416903134 1533395604 1936\n", &cpu, &slices), 1533395604);
  EXPECT_EQ(cpu, 2416903134);
  EXPECT_EQ(slices, 1936u);
  EXPECT_EQ(ParseSchedstat("12 34", nullptr, nullptr), 34);
  cpu = 7;
  EXPECT_EQ(ParseSchedstat("", &cpu, nullptr), -1);
  EXPECT_EQ(ParseSchedstat("12", &cpu, nullptr), -1);  // no delay: nothing taken
  EXPECT_EQ(cpu, 7);
}

TEST(ThreadProc, ParsesSyscallLines) {
  SyscallRead r = ParseSyscall("running\n");
  EXPECT_EQ(r.state, 0u);
  EXPECT_FALSE(r.regs);
  r = ParseSyscall("-1 0x7ffc 0x1\n");  // in the kernel, no call
  EXPECT_EQ(r.state, 0u);
  r = ParseSyscall("202 0x1b1bce50 0x189 0x0 0x0 0x0 0x0 0x7f5b777e8848 0x7f5b9a0d3f5e\n");
  EXPECT_EQ(r.state, 203u);
  ASSERT_TRUE(r.regs);
  EXPECT_EQ(r.sp, 0x7f5b777e8848u);
  EXPECT_EQ(r.pc, 0x7f5b9a0d3f5eu);
  r = ParseSyscall("7 0x1 0x2");  // cut short: the call, no registers
  EXPECT_EQ(r.state, 8u);
  EXPECT_FALSE(r.regs);
}

// A thread blocked in read(2) on an empty pipe, read in place and, as the
// collector process reads the program, through /proc/<pid>.
TEST(ThreadProc, SeesAThreadBlockedInReadBothWays) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::atomic<pid_t> tid{0};
  std::thread reader([&] {
    tid = Tid();
    char c;
    (void)!read(fds[0], &c, 1);
  });
  while (tid.load() == 0) std::this_thread::yield();
  ThreadProcFiles inside;
  ThreadProcFiles outside(getpid());
  SyscallRead in, out;
  for (int i = 0; i < 2000; ++i) {  // until it is in the call
    in = inside.Syscall(tid);
    if (in.state == SYS_read + 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  out = outside.Syscall(tid);
  EXPECT_EQ(in.state, static_cast<uint64_t>(SYS_read) + 1);
  EXPECT_EQ(out.state, static_cast<uint64_t>(SYS_read) + 1);
  EXPECT_TRUE(out.regs);
  EXPECT_EQ(out.sp, in.sp);
  EXPECT_EQ(out.pc, in.pc);
  int64_t cpu = -1;
  EXPECT_GE(outside.Schedstat(tid, &cpu), 0);
  EXPECT_GT(cpu, 0);
  EXPECT_EQ(inside.open_files(), 0u);  // in place: nothing kept among the program's
  EXPECT_EQ(outside.open_files(), 2u);
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  reader.join();
  close(fds[0]);
  close(fds[1]);
}

// The descriptors of a thread that exited read nothing and are closed at
// that read, and a thread's number taken again is read afresh.
TEST(ThreadProc, ClosesTheFilesOfAThreadThatExited) {
  ThreadProcFiles outside(getpid());
  const int before = OpenFdCount();
  std::atomic<pid_t> tid{0};
  std::atomic<bool> go{false};
  std::thread t([&] {
    tid = Tid();
    while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (tid.load() == 0) std::this_thread::yield();
  EXPECT_GE(outside.Schedstat(tid), 0);
  (void)outside.Syscall(tid);
  EXPECT_EQ(OpenFdCount(), before + 2);
  go = true;
  t.join();
  EXPECT_EQ(outside.Schedstat(tid), -1);
  EXPECT_EQ(outside.open_files(), 0u);
  EXPECT_EQ(OpenFdCount(), before);
  // Read again, anew: this thread's own files work, and Forget closes them.
  EXPECT_GE(outside.Schedstat(Tid()), 0);
  EXPECT_EQ(OpenFdCount(), before + 1);
  outside.Forget(Tid());
  EXPECT_EQ(OpenFdCount(), before);
}

// Under a low RLIMIT_NOFILE (a container's 1024, here 140) the files of
// only so many threads are kept; the others are still read, opened for the
// read.
TEST(ThreadProc, KeepsNoMoreFilesThanTheDescriptorLimitLeavesRoomFor) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 140;  // room for (140 - 128) / 2 = 6 threads
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  constexpr int kThreads = 10;
  std::atomic<int> started{0};
  std::atomic<bool> go{false};
  std::vector<pid_t> tids(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      tids[i] = Tid();
      ++started;
      while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  while (started.load() < kThreads) std::this_thread::yield();
  {
    ThreadProcFiles outside(getpid());
    const int before = OpenFdCount();
    for (int round = 0; round < 2; ++round) {
      for (pid_t tid : tids) {
        int64_t cpu = -1;
        EXPECT_GE(outside.Schedstat(tid, &cpu), 0) << tid;
        (void)outside.Syscall(tid);
      }
    }
    EXPECT_EQ(outside.open_files(), 12u);
    EXPECT_EQ(OpenFdCount(), before + 12);
  }
  go = true;
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

TEST(ThreadProc, NamesAThread) {
  ThreadProcFiles outside(getpid());
  std::thread t([&] {
    pthread_setname_np(pthread_self(), "dlprof-test-x");
    EXPECT_EQ(outside.Name(Tid()), "dlprof-test-x");
    EXPECT_EQ(ThreadProcFiles().Name(Tid()), "dlprof-test-x");
  });
  t.join();
  EXPECT_EQ(outside.Name(999999999), "");
}

}  // namespace
}  // namespace dlprof
