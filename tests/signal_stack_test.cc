// The signal path stays off the program's stack: HandleProfilingSignal takes
// at most 2 KiB below the kernel's signal frame, for every unwinder, and
// threads with PTHREAD_STACK_MIN stacks recursing near their limit survive
// sampling at 1000 Hz. The unwinding itself runs on the slot's unwind stack
// (core/stack_switch.h), and every unwinder must give the same trace there.
//
// Stack use is measured by painting: a thread on a stack of our own fills
// everything below its stack pointer with a pattern and spins in a leaf loop,
// so every signal lands at the same stack pointer; afterwards the deepest word
// that is no longer the pattern tells how deep the signals went. The same
// measure with an empty handler is the kernel's signal frame (with its red
// zone, and the xsave area: ~3.3 KiB with AVX-512), which no handler can avoid.
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/stack_pointer.h"
#include "backends/unwinder.h"
#include "core/signal_handler.h"
#include "core/stack_switch.h"
#include "core/thread_registry.h"
#include "readers/dlprof_reader.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::RunProcess;

constexpr size_t kContract = 2048;
constexpr uint64_t kPattern = 0xA5C3A5C3A5C3A5C3ull;
constexpr size_t kPaintStack = 256 << 10;

bool Available(const std::string& name) {
  for (const BackendInfo& b : ListUnwinders()) {
    if (b.name == name) return b.available;
  }
  return false;
}

using dlprof::testing::StackPointer;

// ---- in-process measure, HandleProfilingSignal driven by our own signals ----

// A timer source that sends nothing: every SIGUSR1 is "its" signal.
class FakeTimer : public TimerSource {
 public:
  const char* name() const override { return "fake"; }
  bool PerThread() const override { return true; }
  bool Start(int, int, std::string*) override { return true; }
  bool ArmThread(pid_t, ThreadTimer*, std::string*) override { return true; }
  void DisarmThread(ThreadTimer*) override {}
  void Stop() override {}
  void ForgetInherited(ThreadTimer*) override {}
  bool CpuTimeWeighted() const override { return true; }
  bool IsOwnSignal(const siginfo_t*) const override { return true; }
};

struct Painted {
  char* stack = nullptr;
  std::atomic<uintptr_t> leaf_sp{0};
  std::atomic<int> stop{0};
  ThreadSlot* slot = nullptr;
  Unwinder* unwinder = nullptr;  // nullptr: no slot (baseline)
};

// Paints [stack, sp - 512) and spins until stop, calling nothing.
__attribute__((noinline, no_sanitize("address"))) void PaintAndSpin(Painted* p) {
  const uintptr_t sp = StackPointer();
  volatile uint64_t* w = reinterpret_cast<volatile uint64_t*>((sp - 512) & ~uintptr_t{7});
  volatile uint64_t* const lo = reinterpret_cast<volatile uint64_t*>(p->stack);
  for (; w >= lo; --w) *w = kPattern;
  p->leaf_sp.store(sp, std::memory_order_release);
  uint64_t x = 1;
  while (p->stop.load(std::memory_order_relaxed) == 0) {
    for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
}

void* PaintedThread(void* arg) {
  auto* p = static_cast<Painted*>(arg);
  if (p->unwinder != nullptr) {
    const pid_t tid = CurrentTid();
    p->slot = ClaimSlot(tid);
    if (p->slot == nullptr) return nullptr;
    RunOnStack(
        p->unwinder, [](void* u) { static_cast<Unwinder*>(u)->PrepareThread(); },
        p->slot->unwind_stack);
    t_tid = tid;
    PublishSlot(p->slot);
    t_slot = p->slot;
  }
  PaintAndSpin(p);
  if (p->slot != nullptr) {
    t_slot = nullptr;
    p->slot->state.store(kSlotFree);
  }
  return nullptr;
}

__attribute__((no_sanitize("address"))) size_t DeepestUse(const char* stack, uintptr_t sp) {
  const auto* w = reinterpret_cast<const volatile uint64_t*>(stack);
  while (reinterpret_cast<uintptr_t>(w) < sp && *w == kPattern) ++w;
  return sp - reinterpret_cast<uintptr_t>(w);
}

void EmptyHandler(int) {}

// The stack below the interrupted stack pointer that `signo` took, sent every
// millisecond for a second to a painted thread (a sampled one when `unwinder`).
size_t MeasureSignalDepth(int signo, Unwinder* unwinder, uint64_t* samples) {
  void* mem = mmap(nullptr, kPaintStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(mem, MAP_FAILED);
  if (mem == MAP_FAILED) return SIZE_MAX;
  Painted p;
  p.stack = static_cast<char*>(mem);
  p.unwinder = unwinder;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, mem, kPaintStack);
  pthread_t t;
  EXPECT_EQ(pthread_create(&t, &attr, PaintedThread, &p), 0);
  pthread_attr_destroy(&attr);
  while (p.leaf_sp.load(std::memory_order_acquire) == 0) sched_yield();
  for (int i = 0; i < 1000; ++i) {
    pthread_kill(t, signo);
    timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
  const size_t depth = DeepestUse(p.stack, p.leaf_sp.load());
  if (samples != nullptr && p.slot != nullptr) *samples = p.slot->samples_taken.load();
  p.stop.store(1);
  pthread_join(t, nullptr);
  munmap(mem, kPaintStack);
  return depth;
}

size_t KernelFrameDepth() {
  struct sigaction sa {}, old {};
  sa.sa_handler = EmptyHandler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, &old);
  const size_t depth = MeasureSignalDepth(SIGUSR2, nullptr, nullptr);
  sigaction(SIGUSR2, &old, nullptr);
  return depth;
}

class SignalStack : public ::testing::TestWithParam<std::string> {};

TEST_P(SignalStack, HandlerTakesAtMost2KiBOfTheProgramsStack) {
  if (!Available(GetParam())) GTEST_SKIP() << GetParam() << " is not available here";
  std::string error;
  std::unique_ptr<Unwinder> unwinder = MakeUnwinder(GetParam(), &error);
  ASSERT_NE(unwinder, nullptr) << error;
  FakeTimer timer;
  g_sampler.unwinder = unwinder.get();
  g_sampler.timer = &timer;
  g_sampler.max_frames = 128;
  g_sampler.weigh_by_cpu_time = true;
  g_sampler.period_ns = 1000000;
  g_sampler.active.store(true);
  struct sigaction sa {}, old {};
  sa.sa_sigaction = HandleProfilingSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, &old);

  const size_t kernel = KernelFrameDepth();
  uint64_t samples = 0;
  const size_t total = MeasureSignalDepth(SIGUSR1, unwinder.get(), &samples);

  sigaction(SIGUSR1, &old, nullptr);
  g_sampler.active.store(false);
  g_sampler.unwinder = nullptr;
  g_sampler.timer = nullptr;

  printf("%s: kernel signal frame %zu bytes, with dlprof's handler %zu bytes (+%zd), %llu samples\n",
         GetParam().c_str(), kernel, total, static_cast<ssize_t>(total - kernel),
         static_cast<unsigned long long>(samples));
  RecordProperty("kernel_frame_bytes", static_cast<int>(kernel));
  RecordProperty("handler_bytes", static_cast<int>(total - kernel));
  EXPECT_GT(samples, 100u);
  // Under ASan the painted stack shows a second kernel-sized frame below the
  // handler's, with a return address into ASan's strcmp interceptor: not
  // dlprof's code (not explained yet); the release build holds the contract.
  if (::dlprof::testing::kUnderSanitizer) GTEST_SKIP() << "stack depth: sanitizer build";
  EXPECT_LE(total, kernel + kContract);
}

// Every unwinder gives the same trace from the unwind stack as from the
// program's: libunwind's fast trace and gperftools walk from their own frame
// and must cross the stack switch.
struct Twice {
  Unwinder* unwinder = nullptr;
  uintptr_t stack_top = 0;
  StackBounds bounds;
  uintptr_t direct[128];
  uintptr_t switched[128];
  int direct_n = 0, switched_n = 0;
  const ucontext_t* uc = nullptr;
};
Twice g_twice;

void UnwindSwitched(void*) {
  g_twice.switched_n = g_twice.unwinder->Unwind(g_twice.uc, g_twice.bounds, g_twice.switched, 128);
}

void TwiceHandler(int, siginfo_t*, void* context) {
  g_twice.uc = static_cast<const ucontext_t*>(context);
  g_twice.direct_n = g_twice.unwinder->Unwind(g_twice.uc, g_twice.bounds, g_twice.direct, 128);
  RunOnStack(nullptr, UnwindSwitched, g_twice.stack_top);
}

__attribute__((noipa)) void DescendAndSignal(int depth) {
  if (depth == 0) {
    syscall(SYS_tgkill, getpid(), CurrentTid(), SIGUSR2);
  } else {
    DescendAndSignal(depth - 1);
  }
  asm volatile("" ::: "memory");
}

TEST_P(SignalStack, UnwindersGiveTheSameTraceOnTheUnwindStack) {
  if (!Available(GetParam())) GTEST_SKIP() << GetParam() << " is not available here";
  if (!StackSwitchSupported()) GTEST_SKIP() << "no stack switch on this architecture";
  std::string error;
  std::unique_ptr<Unwinder> unwinder = MakeUnwinder(GetParam(), &error);
  ASSERT_NE(unwinder, nullptr) << error;
  static const uintptr_t stack = MapStack(kUnwindStackBytes);
  ASSERT_NE(stack, 0u);
  g_twice.unwinder = unwinder.get();
  g_twice.stack_top = stack;
  g_twice.bounds = CurrentStackBounds();
  unwinder->PrepareThread();
  struct sigaction sa {}, old {};
  sa.sa_sigaction = TwiceHandler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, &old);
  for (int round = 0; round < 3; ++round) DescendAndSignal(20);  // warm, then compare
  sigaction(SIGUSR2, &old, nullptr);
  EXPECT_GT(g_twice.direct_n, 20);
  ASSERT_EQ(g_twice.switched_n, g_twice.direct_n);
  for (int i = 0; i < g_twice.direct_n; ++i) {
    EXPECT_EQ(g_twice.switched[i], g_twice.direct[i]) << "frame " << i;
  }
}

// ---- the real runtime (libdlprof linked), one process per backend ----

struct StackUseRun {
  ProcessResult result;
  Profile profile;
  bool sampling_off = false;  // a SIGPROF handler was there first (gperftools' own)
};

StackUseRun RunStackUse(const std::vector<std::string>& args, const std::string& backend) {
  StackUseRun run;
  const std::string out = MakeTempDir("dlprof-stack");
  std::vector<std::string> argv = {ProgramPath("stack_use")};
  argv.insert(argv.end(), args.begin(), args.end());
  run.result = RunProcess(argv, {{"DLPROF_SAMPLE", "1"},
                                 {"DLPROF_HZ", "1000"},
                                 {"DLPROF_BACKEND", backend},
                                 {"DLPROF_OUT", out}});
  run.sampling_off = run.result.err.find("SIGPROF already has a handler") != std::string::npos;
  std::string error;
  for (const auto& f : ListRunFiles(out, &error)) {
    EXPECT_TRUE(ReadDlprofFile(f, &run.profile, &error)) << error;
  }
  return run;
}

int64_t CpuSamples(const Profile& p) {
  int64_t n = 0;
  for (const Sample& s : p.samples) {
    if (s.kind == SampleKind::kCpu) n += s.count;
  }
  return n;
}

size_t DepthOf(const std::string& out) {
  size_t depth = 0;
  return sscanf(out.c_str(), "depth %zu", &depth) == 1 ? depth : SIZE_MAX;
}

TEST_P(SignalStack, ProfiledProgramLosesAtMost2KiBOfItsStack) {
  if (!Available(GetParam())) GTEST_SKIP() << GetParam() << " is not available here";
  ProcessResult base = RunProcess({ProgramPath("stack_use"), "paint", "1", "baseline"},
                                  {{"DLPROF_SAMPLE", testing::kUnset}});
  ASSERT_EQ(base.exit_code, 0) << base.err;
  const size_t kernel = DepthOf(base.out);
  ASSERT_NE(kernel, SIZE_MAX) << base.out;
  StackUseRun run = RunStackUse({"paint", "1"}, GetParam());
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  if (run.sampling_off) GTEST_SKIP() << "CPU sampling was off: " << run.result.err;
  const size_t total = DepthOf(run.result.out);
  ASSERT_NE(total, SIZE_MAX) << run.result.out;
  printf("%s: kernel signal frame %zu bytes, with dlprof %zu bytes\n", GetParam().c_str(), kernel,
         total);
  EXPECT_LE(total, kernel + kContract);
  EXPECT_GT(CpuSamples(run.profile), 0);
}

TEST_P(SignalStack, TinyStackThreadsSurviveSamplingAt1000Hz) {
  if (!Available(GetParam())) GTEST_SKIP() << GetParam() << " is not available here";
  StackUseRun run = RunStackUse({"tiny", "2", "1"}, GetParam());
  EXPECT_EQ(run.result.term_signal, 0) << run.result.err;
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  if (run.sampling_off) GTEST_SKIP() << "CPU sampling was off: " << run.result.err;
  const int64_t samples = CpuSamples(run.profile);
  EXPECT_GT(samples, 0);
  DLPROF_SKIP_TIMING_UNDER_SANITIZER();
  EXPECT_GT(samples, 200);  // 2 threads x 1 s at 1000 Hz, on a shared 2-core machine
}

INSTANTIATE_TEST_SUITE_P(Unwinders, SignalStack,
                         ::testing::Values("fp", "cfi", "libunwind", "gperftools"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace dlprof
