// dlprof's own walks of the loaded objects (core/proc_maps.h
// TryIterateLoadedObjects) against fork(): glibc's fork does not reset the
// loader's list lock, so a child forked while a dlprof thread was inside
// dl_iterate_phdr() would inherit it held, and the program there would hang
// at its first dlopen. These tests make the window as wide as they like (a
// callback that sleeps) instead of hoping a stress run hits a microsecond.
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include <gtest/gtest.h>

#include "core/proc_maps.h"

namespace dlprof {
namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// What the runtime's fork handlers do for the gate (core/session_fork.cc).
void RegisterGateForkHandlersOnce() {
  static const int once = [] {
    FindLoaderLock();
    return pthread_atfork(LockLoaderCallsForFork, UnlockLoaderCallsAfterFork,
                          ResetLoaderCallsInForkChild);
  }();
  ASSERT_EQ(once, 0);
}

// Forks; the child walks the loaded objects (as dlopen and exception lookups
// do) and exits 0 if that returns within 5 s. Returns the child's status.
// The child ends by the raw system call: under TSan, _exit() in a fork child
// of a threaded parent reports the parent's threads as leaked and fails.
[[noreturn]] void ExitChild(int code) {
  syscall(SYS_exit_group, code);
  __builtin_unreachable();
}

int ForkAndWalkInChild() {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(5);  // a walk that hangs ends the child by SIGALRM
    dl_iterate_phdr([](dl_phdr_info*, size_t, void*) { return 1; }, nullptr);
    ExitChild(0);
  }
  int status = -1;
  if (pid > 0) waitpid(pid, &status, 0);
  return status;
}

std::atomic<int> g_phase{0};

TEST(LoaderGate, ForkWaitsForDlprofsWalkAndTheChildCanUseTheLoader) {
  RegisterGateForkHandlersOnce();
  g_phase = 0;
  constexpr int64_t kWalkNs = 200000000;  // the walk sleeps 200 ms inside
  std::thread walker([] {
    EXPECT_TRUE(TryIterateLoadedObjects(
        [](dl_phdr_info*, size_t, void*) {
          g_phase = 1;
          const timespec pause{0, kWalkNs};
          nanosleep(&pause, nullptr);
          g_phase = 2;
          return 1;
        },
        nullptr));
  });
  while (g_phase.load() == 0) usleep(100);
  const int64_t t0 = NowNs();
  const int status = ForkAndWalkInChild();  // forked while the walk sleeps
  const int64_t waited = NowNs() - t0;
  walker.join();
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung in the loader (status " << status << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The fork came after the walk ended, not in the middle of it.
  EXPECT_GT(waited, kWalkNs / 2);
}

TEST(LoaderGate, WalkNeverWaitsForTheLoadersLockHeldByAnotherThread) {
  RegisterGateForkHandlersOnce();
  g_phase = 0;
  // A program thread parked inside dl_iterate_phdr: it holds the loader's
  // lock until told to go.
  std::thread holder([] {
    dl_iterate_phdr(
        [](dl_phdr_info*, size_t, void*) {
          g_phase = 1;
          while (g_phase.load() != 2) usleep(1000);
          return 1;
        },
        nullptr);
  });
  while (g_phase.load() != 1) usleep(100);
  int calls = 0;
  const int64_t t0 = NowNs();
  const bool walked = TryIterateLoadedObjects(
      [](dl_phdr_info*, size_t, void* data) {
        ++*static_cast<int*>(data);
        return 1;
      },
      &calls);
  const int64_t took = NowNs() - t0;
  // And a fork meanwhile does not wait for the holder (the child inherits
  // the program's own held lock: that hazard is the program's, not ours).
  const pid_t pid = fork();
  if (pid == 0) ExitChild(0);
  int status = -1;
  waitpid(pid, &status, 0);
  g_phase = 2;
  holder.join();
  EXPECT_FALSE(walked) << "walked the list while another thread held the loader's lock";
  EXPECT_EQ(calls, 0);
  EXPECT_LT(took, 1000000000LL) << "the walk waited for the loader's lock";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Once the holder is gone, walks work again.
  EXPECT_TRUE(TryIterateLoadedObjects([](dl_phdr_info*, size_t, void*) { return 1; }, nullptr));
}

}  // namespace
}  // namespace dlprof
