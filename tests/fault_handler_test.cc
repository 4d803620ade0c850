// SafeLoad and the fault handler behind it (core/safe_load.h,
// core/fault_handler.h): a read of memory that is not there returns
// "faulted"; every other SIGSEGV and SIGBUS reaches the program's own action
// exactly as without dlprof: its handler (with its flags), the default action
// (death by that signal), SIG_IGN for a sent signal. The program's
// sigaction() sees its own view, never dlprof's handler.
//
// The test binary links the runtime (its sigaction interposer included), as
// a program linked with -ldlprof does. Deaths run in gtest's forked children.
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "core/fault_handler.h"
#include "core/safe_load.h"
#include "tests/support/sanitizer.h"

namespace dlprof {
namespace {

// A page that faults on every access, and the mapped page before it.
struct Pages {
  char* base = nullptr;
  Pages() {
    void* p = mmap(nullptr, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = static_cast<char*>(p);
    mprotect(base + 4096, 4096, PROT_NONE);
  }
  ~Pages() { munmap(base, 2 * 4096); }
  char* readable() const { return base; }
  char* unreadable() const { return base + 4096; }
};

// The kernel's own sigaction, as rt_sigaction takes it (below any interposer).
struct KernelSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};

void* KernelHandler(int signo) {
  KernelSigaction k{};
  syscall(SYS_rt_sigaction, signo, nullptr, &k, sizeof(uint64_t));
  return k.handler;
}

TEST(FaultHandler, SafeLoadReadsWhatIsThereAndReportsWhatIsNot) {
  ASSERT_TRUE(InstallFaultHandler());
  ASSERT_TRUE(SafeLoadsAllowed());
  Pages pages;
  const uint64_t value = 0x1122334455667788ull;
  std::memcpy(pages.readable(), &value, 8);
  SafeWord w = SafeLoad(pages.readable());
  EXPECT_EQ(w.faulted, 0u);
  EXPECT_EQ(w.value, value);
  w = SafeLoad(pages.unreadable());
  EXPECT_EQ(w.faulted, 1u);
  EXPECT_EQ(w.value, 0u);
  // An unaligned word across into the unreadable page faults as a whole.
  w = SafeLoad(pages.unreadable() - 4);
  EXPECT_EQ(w.faulted, 1u);
  uint32_t u32 = 0;
  EXPECT_TRUE(SafeLoadU32(reinterpret_cast<uintptr_t>(pages.readable()) + 4, &u32));
  EXPECT_EQ(u32, 0x11223344u);
  uint8_t u8 = 0;
  EXPECT_TRUE(SafeLoadU8(reinterpret_cast<uintptr_t>(pages.readable()) + 7, &u8));
  EXPECT_EQ(u8, 0x11u);
  EXPECT_FALSE(SafeLoadU8(reinterpret_cast<uintptr_t>(pages.unreadable()), &u8));
  // A copy that ends inside the readable page reads only it; one that runs
  // into the next page fails.
  char text[] = "the readable end";
  std::memcpy(pages.unreadable() - sizeof(text), text, sizeof(text));
  char out[sizeof(text)] = {};
  EXPECT_TRUE(SafeCopy(reinterpret_cast<uintptr_t>(pages.unreadable() - sizeof(text)), out,
                       sizeof(text)));
  EXPECT_STREQ(out, text);
  EXPECT_FALSE(SafeCopy(reinterpret_cast<uintptr_t>(pages.unreadable() - 3), out, 8));
  // Address 0 and a kernel address fault too.
  EXPECT_EQ(SafeLoad(nullptr).faulted, 1u);
  EXPECT_EQ(SafeLoad(reinterpret_cast<void*>(0xffff800000000000ull)).faulted, 1u);
}

TEST(FaultHandler, ProgramSeesItsOwnViewAndTheKernelKeepsOurs) {
  ASSERT_TRUE(InstallFaultHandler());
  void* ours = KernelHandler(SIGSEGV);
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &old), 0);
  if (!testing::kUnderSanitizer) {
    EXPECT_EQ(old.sa_handler, SIG_DFL);  // ASan's own is there otherwise
  }
  struct sigaction mine {};
  mine.sa_handler = [](int) {};
  mine.sa_flags = SA_RESTART;
  sigemptyset(&mine.sa_mask);
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGSEGV, &mine, &before), 0);
  EXPECT_EQ(before.sa_handler, old.sa_handler);
  struct sigaction now {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, mine.sa_handler);
  EXPECT_EQ(now.sa_flags, mine.sa_flags);
  EXPECT_EQ(KernelHandler(SIGSEGV), ours);
  // signal() gives the previous view back.
  EXPECT_EQ(signal(SIGSEGV, old.sa_handler), mine.sa_handler);
  ASSERT_EQ(sigaction(SIGSEGV, &old, nullptr), 0);
  EXPECT_TRUE(SafeLoadsAllowed());
}

void* volatile g_fault_address = nullptr;  // read by the handler

void ExitWithAddressCheck(int signo, siginfo_t* info, void*) {
  _exit(signo == SIGSEGV && info->si_addr == g_fault_address && info->si_code == SEGV_ACCERR
            ? 42
            : 43);
}

TEST(FaultHandlerDeathTest, ProgramHandlerGetsARealFaultWithItsSiginfo) {
  EXPECT_EXIT(
      {
        InstallFaultHandler();
        Pages pages;
        (void)SafeLoad(pages.unreadable());  // one of ours first: nothing left behind
        struct sigaction sa {};
        sa.sa_sigaction = ExitWithAddressCheck;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, nullptr);
        g_fault_address = pages.unreadable() + 8;
        *static_cast<volatile char*>(g_fault_address) = 1;
        _exit(44);
      },
      ::testing::ExitedWithCode(42), "");
}

TEST(FaultHandlerDeathTest, DefaultActionStillEndsTheProcessWithTheSignal) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "the sanitizer's own SEGV report comes first";
  EXPECT_EXIT(
      {
        InstallFaultHandler();
        Pages pages;
        (void)SafeLoad(pages.unreadable());
        *static_cast<volatile char*>(pages.unreadable()) = 1;
        _exit(44);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT(
      {
        InstallFaultHandler();
        kill(getpid(), SIGBUS);
        _exit(44);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

TEST(FaultHandlerDeathTest, IgnoredSentSignalIsIgnoredButAFaultStillKills) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "the sanitizer's own SEGV report comes first";
  EXPECT_EXIT(
      {
        InstallFaultHandler();
        signal(SIGSEGV, SIG_IGN);
        raise(SIGSEGV);
        kill(getpid(), SIGSEGV);
        _exit(7);
      },
      ::testing::ExitedWithCode(7), "");
  EXPECT_EXIT(
      {
        InstallFaultHandler();
        signal(SIGSEGV, SIG_IGN);
        Pages pages;
        *static_cast<volatile char*>(pages.unreadable()) = 1;
        _exit(7);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

char* g_fix_page = nullptr;
int g_handler_calls = 0;

void MakeWritable(int) {
  ++g_handler_calls;
  mprotect(g_fix_page, 4096, PROT_READ | PROT_WRITE);
}

TEST(FaultHandler, HandlerThatFixesTheMemoryResumesTheFaultingInstruction) {
  // As a garbage collector or a userfault-style pager does.
  ASSERT_TRUE(InstallFaultHandler());
  Pages pages;
  g_fix_page = pages.unreadable();
  g_handler_calls = 0;
  struct sigaction sa {}, old{};
  sa.sa_handler = MakeWritable;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGSEGV, &sa, &old), 0);
  *static_cast<volatile char*>(pages.unreadable()) = 5;
  EXPECT_EQ(g_handler_calls, 1);
  EXPECT_EQ(pages.unreadable()[0], 5);
  sigaction(SIGSEGV, &old, nullptr);
}

sigjmp_buf g_jump;
sigset_t g_mask_in_handler;

void JumpOut(int) {
  pthread_sigmask(SIG_BLOCK, nullptr, &g_mask_in_handler);
  siglongjmp(g_jump, 1);
}

TEST(FaultHandler, HandlerMaskAndResetHandAreTheKernels) {
  ASSERT_TRUE(InstallFaultHandler());
  Pages pages;
  struct sigaction sa {}, old{};
  sa.sa_handler = JumpOut;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR2);
  ASSERT_EQ(sigaction(SIGSEGV, &sa, &old), 0);
  if (sigsetjmp(g_jump, 1) == 0) {
    *static_cast<volatile char*>(pages.unreadable()) = 1;
    FAIL() << "no fault";
  }
  // In the handler: its sa_mask and the signal itself were blocked.
  EXPECT_EQ(sigismember(&g_mask_in_handler, SIGUSR2), 1);
  EXPECT_EQ(sigismember(&g_mask_in_handler, SIGSEGV), 1);
  // SA_RESETHAND: the program now sees SIG_DFL.
  struct sigaction now {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  sigaction(SIGSEGV, &old, nullptr);
  EXPECT_EQ(SafeLoad(pages.unreadable()).faulted, 1u);
}

TEST(FaultHandler, ReplacedBehindOurBackStopsSafeLoads) {
  EXPECT_EXIT(
      {
        InstallFaultHandler();
        // A raw rt_sigaction, which the interposer does not see.
        KernelSigaction k{};
        syscall(SYS_rt_sigaction, SIGSEGV, nullptr, &k, sizeof(uint64_t));
        k.handler = reinterpret_cast<void*>(SIG_DFL);
        syscall(SYS_rt_sigaction, SIGSEGV, &k, nullptr, sizeof(uint64_t));
        const bool lost = FaultHandlerLost();
        _exit(lost && !SafeLoadsAllowed() && !FaultHandlerLost() ? 3 : 4);
      },
      ::testing::ExitedWithCode(3), "");
}

// A SIGSEGV or SIGBUS sent while dlprof's fault-safe reads are under way
// reaches the program's handler after them, with its siginfo as sent. A
// SIGUSR2 handler that blocks them, as the profiling one does, stands in for
// it; `window` false is the control: opened without the window, the
// program's handler runs inside.
// Atomics: the helper thread's test writes g_in_sample, and the handler
// reads it on the main thread (lock-free, so signal-safe).
std::atomic<int> g_in_sample{0}, g_inside{0}, g_after{0}, g_window{0};
std::atomic<int> g_segv_code{0}, g_segv_pid{0}, g_segv_value{0}, g_bus_code{0};
std::atomic<pid_t> g_handled_tid{0};

void RecordSent(int signo, siginfo_t* info, void*) {
  if (g_in_sample) {
    ++g_inside;
  } else {
    ++g_after;
  }
  g_handled_tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (signo == SIGSEGV) {
    g_segv_code = info->si_code;
    g_segv_pid = info->si_pid;
    g_segv_value = info->si_value.sival_int;
  } else {
    g_bus_code = info->si_code;
  }
}

void SendBoth() {
  union sigval v;
  v.sival_int = 77;
  sigqueue(getpid(), SIGSEGV, v);
  syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGBUS);
}

void FakeSample(int) {
  if (g_window) {
    OpenFaultsForSafeLoads();
  } else {
    sigset_t faults;
    sigemptyset(&faults);
    sigaddset(&faults, SIGSEGV);
    sigaddset(&faults, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &faults, nullptr);
  }
  g_in_sample = 1;
  SendBoth();
  g_in_sample = 0;
  if (g_window) CloseFaultsForSafeLoads(FaultsReturnTo::kThisThread);
}

void InstallRecorders() {
  InstallFaultHandler();
  struct sigaction sa {};
  sa.sa_sigaction = RecordSent;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

int SendDuringAFakeSample(bool window) {
  InstallRecorders();
  struct sigaction fake {};
  fake.sa_handler = FakeSample;
  sigemptyset(&fake.sa_mask);
  sigaddset(&fake.sa_mask, SIGSEGV);
  sigaddset(&fake.sa_mask, SIGBUS);
  sigaction(SIGUSR2, &fake, nullptr);
  g_window = window;
  raise(SIGUSR2);
  return 10 * g_inside + g_after;
}

TEST(FaultHandlerDeathTest, SentFaultsWaitForTheSamplesEndWithTheirSiginfo) {
  EXPECT_EXIT(
      {
        const int where = SendDuringAFakeSample(true);
        _exit(where == 2 && g_segv_code == SI_QUEUE && g_segv_pid == getpid() &&
                      g_segv_value == 77 && g_bus_code == SI_TKILL
                  ? 42
                  : 43);
      },
      ::testing::ExitedWithCode(42), "");
  // The control: opened without the window, both run inside.
  EXPECT_EXIT(_exit(SendDuringAFakeSample(false)), ::testing::ExitedWithCode(20), "");
}

// On a thread of dlprof's, which blocks every signal (the collector), the
// copies kept go to the process: a program thread takes them, with their
// code and value where the kernel allows (sigqueue's), else as kill() from
// this process (tgkill's code names one thread).
TEST(FaultHandlerDeathTest, SentFaultsKeptOnADlprofThreadGoToTheProcess) {
  EXPECT_EXIT(
      {
        InstallRecorders();
        // Blocked here while the helper runs: sigqueue(getpid()) goes to
        // the process, and the kernel may pick any thread that takes it.
        sigset_t faults;
        sigemptyset(&faults);
        sigaddset(&faults, SIGSEGV);
        sigaddset(&faults, SIGBUS);
        pthread_sigmask(SIG_BLOCK, &faults, nullptr);
        std::thread helper([] {
          sigset_t all;
          sigfillset(&all);
          pthread_sigmask(SIG_BLOCK, &all, nullptr);
          OpenFaultsForSafeLoads();
          g_in_sample = 1;
          SendBoth();  // both to this thread, the only one open to them
          g_in_sample = 0;
          CloseFaultsForSafeLoads(FaultsReturnTo::kProcess);
        });
        helper.join();
        // Delivered to this (main) thread once it blocks neither.
        pthread_sigmask(SIG_UNBLOCK, &faults, nullptr);
        for (int i = 0; i < 100 && g_after < 2; ++i) usleep(1000);
        _exit(g_inside == 0 && g_after == 2 && g_handled_tid == getpid() &&
                      g_segv_code == SI_QUEUE && g_segv_value == 77 && g_bus_code == SI_USER
                  ? 42
                  : 43);
      },
      ::testing::ExitedWithCode(42), "");
}

}  // namespace
}  // namespace dlprof
