// The collector's walk of a blocked thread taken again (Collector::
// NativeWalk, core/collector.cc): a thread blocked again at the same pc and
// sp gets the frames of its last walk only while every word that walk read
// is unchanged. Here a real thread blocks in read() alternately through two
// chains with the same frame sizes (the same sp and pc in read()), and each
// tick's stack must be the chain it is in. Built without frame pointers
// (tests/CMakeLists.txt), as the walk of a copied stack needs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "backends/cfi_tables.h"
#include "core/collector.h"
#include "core/fault_handler.h"
#include "core/thread_registry.h"

namespace dlprof {
namespace {

int g_pipe[2];
std::atomic<int> g_chain{0};  // which chain the thread blocks through next (0 = A)

__attribute__((noipa)) int Block(int fd) {
  char c;
  const ssize_t n = read(fd, &c, 1);
  asm volatile("" ::: "memory");
  return n == 1 ? c : -1;
}
__attribute__((noipa)) int ChainA(int fd) {
  const int r = Block(fd);
  asm volatile("" ::: "memory");
  return r + 1;
}
__attribute__((noipa)) int ChainB(int fd) {
  const int r = Block(fd);
  asm volatile("" ::: "memory");
  return r + 2;
}

bool BlockedInRead(pid_t tid) {
  char path[64], buf[64] = {};
  snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  return n > 2 && buf[0] == '0' && buf[1] == ' ';
}

void ExpectEachTickGetsTheChainTheThreadIsBlockedIn() {
  g_chain.store(0);  // a test before this one left it at "leave"
  ASSERT_EQ(pipe(g_pipe), 0);
  std::atomic<ThreadSlot*> slot{nullptr};
  std::atomic<int> blocked_in{-1};  // the chain of the read under way
  std::thread t([&] {
    ThreadSlot* s = ClaimSlot(CurrentTid());
    if (s != nullptr) PublishSlot(s);
    slot.store(s);
    for (;;) {
      const int chain = g_chain.load();
      blocked_in.store(chain);
      if ((chain == 0 ? ChainA(g_pipe[0]) : ChainB(g_pipe[0])) < 0) break;
      if (chain == 2) break;
    }
    if (s != nullptr) s->state.store(kSlotExited);
  });
  // However the test ends, the thread reads its way out.
  struct Joiner {
    std::thread* t;
    ~Joiner() {
      g_chain.store(2);
      for (int i = 0; i < 2; ++i) (void)!write(g_pipe[1], "x", 1);
      t->join();
    }
  } joiner{&t};
  while (slot.load() == nullptr) usleep(1000);
  ThreadSlot* s = slot.load();
  ASSERT_NE(s, nullptr);
  const pid_t tid = s->tid.load();
  // Wakes the thread into `chain` and waits until it is blocked there.
  auto block_in = [&](int chain) {
    g_chain.store(chain);
    blocked_in.store(-1);
    if (write(g_pipe[1], "x", 1) != 1) return false;
    for (int i = 0; i < 5000; ++i) {
      if (blocked_in.load() == chain && BlockedInRead(tid)) return true;
      usleep(200);
    }
    return false;
  };
  CfiDecodeAllLoaded();
  CfiMaintain();  // every loaded object's rows, before the first walk
  Collector c;
  int64_t now = 1000000000;
  // The chain's stack at one tick: the words of its native frames.
  auto tick = [&] {
    s->blocked_rewalk = true;  // walk even if it used no CPU (a block just begun)
    c.SnapshotTick(now += 10000000);
    std::vector<uint64_t> words;
    if (s->blocked_state != 1 || !c.StackWords(s->blocked_stack, &words)) words.clear();
    return words;
  };
  for (int i = 0; i < 50 && !BlockedInRead(tid); ++i) usleep(1000);
  ASSERT_TRUE(BlockedInRead(tid));
  c.SnapshotTick(now);  // the baseline
  const std::vector<uint64_t> a = tick();
  ASSERT_TRUE(block_in(1));
  const std::vector<uint64_t> b = tick();
  ASSERT_GE(a.size(), 3u);
  ASSERT_EQ(a.size(), b.size()) << "the same frame sizes, the same depth";
  ASSERT_NE(a, b);
  EXPECT_EQ(c.blocked_walks_reused(), 0u) << "B's pc and sp are A's; its words are not";
  // A sequence of blocks: each tick's stack is its chain's, and a chain
  // blocked in twice in a row is walked once.
  const int order[] = {1, 0, 0, 1, 1, 1, 0, 1, 0, 0};
  uint64_t repeats = 0;
  int last = 1;
  for (int chain : order) {
    SCOPED_TRACE("chain " + std::string(chain == 0 ? "A" : "B"));
    ASSERT_TRUE(block_in(chain));
    EXPECT_EQ(tick(), chain == 0 ? a : b);
    repeats += chain == last;
    last = chain;
  }
  EXPECT_EQ(c.blocked_walks_reused(), repeats);
  // Forgotten, a walk copies and walks the stack again: the same frames.
  c.ForgetWalks();
  ASSERT_TRUE(block_in(0));
  EXPECT_EQ(tick(), a);
  EXPECT_EQ(c.blocked_walks_reused(), repeats);
}

// The words checked in one process_vm_readv (a process without the fault
// handler: not Python).
TEST(NativeWalkReuse, EachTickGetsTheChainTheThreadIsBlockedIn) {
  ASSERT_FALSE(SafeLoadsAllowed());
  ExpectEachTickGetsTheChainTheThreadIsBlockedIn();
}

// The words checked in place, by SafeLoads (a Python process's way).
TEST(NativeWalkReuse, EachTickGetsTheChainTheThreadIsBlockedInCheckedInPlace) {
  ASSERT_TRUE(InstallFaultHandler());
  ASSERT_TRUE(SafeLoadsAllowed());
  ExpectEachTickGetsTheChainTheThreadIsBlockedIn();
}

}  // namespace
}  // namespace dlprof
