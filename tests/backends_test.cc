// Tests of the unwinder and timer-source backends, on real signals.
//
// Unwinders: a worker thread descends a known chain of noipa functions and
// spins in the innermost one; the test thread sends it SIGUSR2 and the handler
// unwinds from the signal context. Each level records its own return address
// (__builtin_return_address), so the expected stack is known exactly.
//
// Timer sources: a SIGPROF handler counts signals (and POSIX timer overruns)
// per receiving thread id. Counts are compared with the CPU time the thread
// itself measured (CLOCK_THREAD_CPUTIME_ID), never with wall time, so a loaded
// machine slows the tests down but does not fail them. The measured ratios are
// printed with a "[ fidelity ]" prefix.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend_factories.h"
#include "backends/timer_source.h"
#include "backends/cfi_tables.h"
#include "backends/stack_bounds.h"
#include "backends/unwinder.h"
#include "tests/support/sanitizer.h"

#if defined(__clang__)
#define DLPROF_TEST_NOINLINE __attribute__((noinline))
// Clang has no per-function optimize attribute: this level keeps its frame
// pointer there, and the fp expectations below still hold.
#define DLPROF_TEST_NO_FRAME_POINTER __attribute__((noinline))
#else
#define DLPROF_TEST_NOINLINE __attribute__((noipa))
#define DLPROF_TEST_NO_FRAME_POINTER __attribute__((noipa, optimize("omit-frame-pointer")))
#endif

namespace dlprof {
namespace {

// ---------------------------------------------------------------------------
// Helpers shared by both halves.

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

std::atomic<uint64_t> g_burn_sink{0};

// Spins until this thread has used `seconds` more CPU time (or 20 s of wall
// time have passed, so a starved machine cannot hang the test).
void BurnCpu(double seconds) {
  const double end = ThreadCpuSeconds() + seconds;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  uint64_t x = g_burn_sink.load(std::memory_order_relaxed) | 1;
  while (ThreadCpuSeconds() < end && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  }
  g_burn_sink.store(x, std::memory_order_relaxed);
}

template <typename Pred>
bool WaitFor(Pred pred, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// ---------------------------------------------------------------------------
// Unwinders.

constexpr int kDepth = 8;  // Levels 0..kDepth of Step, plus the leaf.
constexpr int kMaxPcs = 256;

// kSpin: spin until SIGUSR2 arrives; kGarbageFramePointer: the same with a
// garbage %rbp; kSaveContext: no signal, unwind a getcontext() context.
enum class LeafKind { kSpin, kGarbageFramePointer, kSaveContext };

// Written by the chain before the signal, read by the test after the join.
uintptr_t g_ret[kDepth + 1];    // g_ret[L]: return address into level L + 1.
uintptr_t g_frame[kDepth + 1];  // Frame address of level L (frame-pointer levels).
uintptr_t g_leaf_ret;           // Return address into level 0.
int g_no_fp_level = -1;         // Level built without frame pointer, or -1.
LeafKind g_leaf_kind = LeafKind::kSpin;
uintptr_t g_garbage_fp = 0;
std::atomic<bool> g_leaf_spinning{false};
std::atomic<bool> g_leaf_release{false};

using BoundsTransform = StackBounds (*)(StackBounds real);
StackBounds RealBounds(StackBounds real) { return real; }

// What the SIGUSR2 handler saw.
struct UnwindRequest {
  Unwinder* unwinder = nullptr;
  BoundsTransform transform = RealBounds;
  StackBounds bounds;  // Set by the leaf, once the chain is built.
  int max = kMaxPcs;
  uintptr_t pcs[kMaxPcs];
  int n = -1;
  uintptr_t context_pc = 0;
};
UnwindRequest g_request;

void UnwindHandler(int, siginfo_t*, void* context) {
  const int saved_errno = errno;
  auto* uc = static_cast<ucontext_t*>(context);
  g_request.context_pc = ContextPc(uc);
  g_request.n = g_request.unwinder->Unwind(uc, g_request.bounds, g_request.pcs, g_request.max);
  g_leaf_release.store(true);
  errno = saved_errno;
}

DLPROF_TEST_NOINLINE void PrepareBounds() {
  g_request.bounds = g_request.transform(CurrentStackBounds());
}

DLPROF_TEST_NOINLINE void SpinLeaf() {
  g_leaf_ret = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  PrepareBounds();
  g_leaf_spinning.store(true);
  while (!g_leaf_release.load(std::memory_order_acquire)) {
  }
}

// Unwinds a context saved by getcontext() right here, outside any handler.
DLPROF_TEST_NOINLINE void SaveContextLeaf() {
  g_leaf_ret = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  PrepareBounds();
  ucontext_t uc;
  getcontext(&uc);
  g_request.context_pc = ContextPc(&uc);
  g_request.n = g_request.unwinder->Unwind(&uc, g_request.bounds, g_request.pcs, g_request.max);
  g_leaf_spinning.store(true);
  g_leaf_release.store(true);
}

#if defined(__x86_64__)
// Spins with %rbp holding `garbage`, the way code built without frame pointers
// may use it, with correct CFI so that DWARF unwinders still find the caller.
DLPROF_TEST_NO_FRAME_POINTER void SpinWithGarbageFramePointer(uintptr_t garbage) {
  g_leaf_ret = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  PrepareBounds();
  g_leaf_spinning.store(true);
  static_assert(sizeof(std::atomic<bool>) == 1, "the loop below compares one byte");
  asm volatile(
      "sub $128, %%rsp\n\t"  // Leave the red zone alone.
      ".cfi_adjust_cfa_offset 128\n\t"
      "push %%rbp\n\t"
      ".cfi_adjust_cfa_offset 8\n\t"
      ".cfi_rel_offset %%rbp, 0\n\t"
      "mov %%rsi, %%rbp\n\t"
      "1: cmpb $0, (%%rdi)\n\t"
      "je 1b\n\t"
      "pop %%rbp\n\t"
      ".cfi_adjust_cfa_offset -8\n\t"
      ".cfi_restore %%rbp\n\t"
      "add $128, %%rsp\n\t"
      ".cfi_adjust_cfa_offset -128\n\t"
      :
      : "D"(&g_leaf_release), "S"(garbage)
      : "memory", "cc");
}
#endif

DLPROF_TEST_NOINLINE void Step(int level);
DLPROF_TEST_NO_FRAME_POINTER void StepWithoutFramePointer(int level);

__attribute__((always_inline)) inline void CallNext(int level) {
  if (level == 0) {
#if defined(__x86_64__)
    if (g_leaf_kind == LeafKind::kGarbageFramePointer) {
      SpinWithGarbageFramePointer(g_garbage_fp);
      return;
    }
#endif
    if (g_leaf_kind == LeafKind::kSaveContext) {
      SaveContextLeaf();
      return;
    }
    SpinLeaf();
  } else if (level - 1 == g_no_fp_level) {
    StepWithoutFramePointer(level - 1);
  } else {
    Step(level - 1);
  }
}

DLPROF_TEST_NOINLINE void Step(int level) {
  g_ret[level] = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  g_frame[level] = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  CallNext(level);
  asm volatile("" ::: "memory");  // No tail call: the frame must stay.
}

DLPROF_TEST_NO_FRAME_POINTER void StepWithoutFramePointer(int level) {
  g_ret[level] = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  CallNext(level);
  asm volatile("" ::: "memory");
}

// The return addresses the chain must produce, innermost first.
std::vector<uintptr_t> ExpectedReturnAddresses() {
  std::vector<uintptr_t> v{g_leaf_ret};
  for (int level = 0; level <= kDepth; ++level) v.push_back(g_ret[level]);
  return v;
}

void InstallUnwindHandler() {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = UnwindHandler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &sa, nullptr), 0);
}

struct UnwindResult {
  std::vector<uintptr_t> pcs;
  uintptr_t context_pc = 0;
  bool signalled = false;
};

// Runs the chain on a fresh thread, interrupts it in its leaf and returns what
// `unwinder` made of the signal context.
UnwindResult UnwindChain(Unwinder* unwinder, BoundsTransform bounds, int no_fp_level, LeafKind leaf,
                         uintptr_t garbage_fp = 0, int max = kMaxPcs) {
  InstallUnwindHandler();
  g_no_fp_level = no_fp_level;
  g_leaf_kind = leaf;
  g_garbage_fp = garbage_fp;
  g_leaf_spinning = false;
  g_leaf_release = false;
  g_request = UnwindRequest();
  g_request.unwinder = unwinder;
  g_request.transform = bounds;
  g_request.max = max;
  std::thread worker([&] {
    unwinder->PrepareThread();
    Step(kDepth);
  });
  UnwindResult result;
  if (WaitFor([] { return g_leaf_spinning.load(); }, 10)) {
    if (leaf != LeafKind::kSaveContext) pthread_kill(worker.native_handle(), SIGUSR2);
    result.signalled = WaitFor([] { return g_leaf_release.load(); }, 10);
  }
  g_leaf_release = true;  // Never leave the worker spinning.
  worker.join();
  if (g_request.n > 0) result.pcs.assign(g_request.pcs, g_request.pcs + g_request.n);
  result.context_pc = g_request.context_pc;
  return result;
}

// Index of `want` in `pcs` at or after `from`, or -1.
int Find(const std::vector<uintptr_t>& pcs, uintptr_t want, size_t from = 0) {
  for (size_t i = from; i < pcs.size(); ++i) {
    if (pcs[i] == want) return static_cast<int>(i);
  }
  return -1;
}

std::string Describe(const std::vector<uintptr_t>& pcs, const std::vector<uintptr_t>& expected) {
  std::string s = "got:";
  char buf[32];
  for (uintptr_t pc : pcs) {
    snprintf(buf, sizeof(buf), " %#lx", static_cast<unsigned long>(pc));
    s += buf;
  }
  s += "\nwant (in order):";
  for (uintptr_t pc : expected) {
    snprintf(buf, sizeof(buf), " %#lx", static_cast<unsigned long>(pc));
    s += buf;
  }
  return s;
}

class UnwinderTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string error;
    unwinder_ = MakeUnwinder(GetParam(), &error);
    if (unwinder_ == nullptr) GTEST_SKIP() << GetParam() << " unavailable: " << error;
    ASSERT_STREQ(unwinder_->name(), GetParam().c_str());
    CfiDecodeAllLoaded();  // warm tables, as after the first samples
    unwinder_->Maintain();  // as the collector does: the cfi tables of what is loaded
  }
  // Walks that read the stack only inside the bounds (no bounds, no walk).
  bool ReadsOnlyInBounds() const { return GetParam() == "fp" || GetParam() == "cfi"; }
  std::unique_ptr<Unwinder> unwinder_;
};

TEST_P(UnwinderTest, ReturnsEveryFrameOfAFramePointerChainInOrder) {
  const UnwindResult r = UnwindChain(unwinder_.get(), RealBounds, -1, LeafKind::kSpin);
  ASSERT_TRUE(r.signalled);
  const std::vector<uintptr_t> expected = ExpectedReturnAddresses();
  ASSERT_FALSE(r.pcs.empty());
  EXPECT_EQ(r.pcs[0], r.context_pc) << "pcs[0] must be the interrupted pc";
  EXPECT_GE(r.pcs[0], reinterpret_cast<uintptr_t>(&SpinLeaf));
  EXPECT_LT(r.pcs[0], reinterpret_cast<uintptr_t>(&SpinLeaf) + 256) << "pc not in SpinLeaf";
  // pcs[1..] are exactly the return addresses into level 0, 1, ..., kDepth and
  // the test body: nothing skipped, nothing inserted.
  ASSERT_GE(r.pcs.size(), expected.size() + 1) << Describe(r.pcs, expected);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(r.pcs[i + 1], expected[i]) << "frame " << i << "\n" << Describe(r.pcs, expected);
  }
}

TEST_P(UnwinderTest, WalksThroughAFunctionBuiltWithoutFramePointer) {
  constexpr int kNoFpLevel = 4;
  const UnwindResult r = UnwindChain(unwinder_.get(), RealBounds, kNoFpLevel, LeafKind::kSpin);
  ASSERT_TRUE(r.signalled);
  ASSERT_FALSE(r.pcs.empty());
  EXPECT_EQ(r.pcs[0], r.context_pc);
  const std::vector<uintptr_t> expected = ExpectedReturnAddresses();
  // The return address into level kNoFpLevel + 1 sits in the frame of the
  // function without a frame pointer. DWARF unwinders find it; a frame-pointer
  // walk cannot, but must find all the others, in order, and not crash.
  const uintptr_t hidden = g_ret[kNoFpLevel];
  const bool is_fp = GetParam() == "fp";
  int at = 0;
  int found = 0;
  bool hidden_found = false;
  for (uintptr_t want : expected) {
    const int i = Find(r.pcs, want, at);
    if (want == hidden) {
      hidden_found = i >= 0;
      if (i >= 0) at = i + 1;
      continue;
    }
    EXPECT_GE(i, 0) << "missing " << std::hex << want << "\n" << Describe(r.pcs, expected);
    if (i >= 0) {
      at = i + 1;
      ++found;
    }
  }
  EXPECT_EQ(found, static_cast<int>(expected.size()) - 1);
  if (is_fp) {
    std::printf("[ unwinder ] fp %s the caller of the frame-pointer-less function\n",
                hidden_found ? "found" : "skipped");
  } else {
    EXPECT_TRUE(hidden_found) << "a DWARF unwinder must see frames without frame pointers\n"
                              << Describe(r.pcs, expected);
  }
}

StackBounds EmptyBounds(StackBounds) { return StackBounds{}; }
StackBounds ReversedBounds(StackBounds real) { return StackBounds{real.hi, real.lo}; }
StackBounds TinyBounds(StackBounds real) { return StackBounds{real.lo, real.lo + 8}; }
StackBounds NearNullBounds(StackBounds) { return StackBounds{8, 4096}; }
StackBounds TopOfAddressSpaceBounds(StackBounds) {
  return StackBounds{~uintptr_t{0} - 64, ~uintptr_t{0}};
}
std::vector<uintptr_t>* g_heap_block = nullptr;
StackBounds HeapBounds(StackBounds) {
  return StackBounds{reinterpret_cast<uintptr_t>(g_heap_block->data()),
                     reinterpret_cast<uintptr_t>(g_heap_block->data() + g_heap_block->size())};
}
StackBounds MisalignedBounds(StackBounds real) { return StackBounds{real.lo + 3, real.hi - 5}; }
// Ends between level 4 and level 5 of the chain.
StackBounds EndsMidChainBounds(StackBounds real) { return StackBounds{real.lo, g_frame[5]}; }

// True if every address of `expected` appears in `pcs`, in order.
bool ContainsInOrder(const std::vector<uintptr_t>& pcs, const std::vector<uintptr_t>& expected) {
  int at = 0;
  for (uintptr_t want : expected) {
    const int i = Find(pcs, want, at);
    if (i < 0) return false;
    at = i + 1;
  }
  return true;
}

TEST_P(UnwinderTest, CorruptBoundsReturnThePcWithoutFaulting) {
  std::vector<uintptr_t> heap(512, 0x1);
  g_heap_block = &heap;
  // None of these holds the interrupted stack pointer.
  const struct {
    const char* name;
    BoundsTransform bounds;
  } cases[] = {
      {"empty", EmptyBounds},
      {"reversed", ReversedBounds},
      {"tiny", TinyBounds},
      {"near-null", NearNullBounds},
      {"top-of-address-space", TopOfAddressSpaceBounds},
      {"heap-block", HeapBounds},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const UnwindResult r = UnwindChain(unwinder_.get(), c.bounds, -1, LeafKind::kSpin);
    ASSERT_TRUE(r.signalled);
    ASSERT_GE(r.pcs.size(), 1u);
    EXPECT_EQ(r.pcs[0], r.context_pc);
    if (ReadsOnlyInBounds()) {
      // fp and cfi read nothing but the pc when the bounds do not hold the stack.
      EXPECT_EQ(r.pcs.size(), 1u) << Describe(r.pcs, {});
    } else {
      // DWARF unwinders ignore bounds that do not describe the interrupted
      // stack (they follow the CFI, not stack contents), so nothing is lost.
      EXPECT_TRUE(ContainsInOrder(r.pcs, ExpectedReturnAddresses()))
          << Describe(r.pcs, ExpectedReturnAddresses());
    }
  }
  g_heap_block = nullptr;
}

TEST_P(UnwinderTest, MisalignedBoundsStillGiveTheWholeChain) {
  const UnwindResult r = UnwindChain(unwinder_.get(), MisalignedBounds, -1, LeafKind::kSpin);
  ASSERT_TRUE(r.signalled);
  EXPECT_TRUE(ContainsInOrder(r.pcs, ExpectedReturnAddresses()))
      << Describe(r.pcs, ExpectedReturnAddresses());
}

TEST_P(UnwinderTest, UnwindsASavedContextOutsideAnyHandler) {
  if (GetParam() == "gperftools") {
    GTEST_SKIP() << "gperftools unwinds from its own call site, so only a live signal frame works";
  }
  const UnwindResult r = UnwindChain(unwinder_.get(), RealBounds, -1, LeafKind::kSaveContext);
  ASSERT_TRUE(r.signalled);
  const std::vector<uintptr_t> expected = ExpectedReturnAddresses();
  ASSERT_GE(r.pcs.size(), expected.size() + 1) << Describe(r.pcs, expected);
  EXPECT_EQ(r.pcs[0], r.context_pc);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(r.pcs[i + 1], expected[i]) << "frame " << i << "\n" << Describe(r.pcs, expected);
  }
}

TEST_P(UnwinderTest, ReportsNoFrameBeyondTheTopOfTheBounds) {
  // fp reads only inside the bounds. libunwind honours them where it steps
  // frame by frame (a saved context); from a live signal frame it follows the
  // CFI and ignores them, as gperftools always does.
  if (GetParam() == "gperftools") GTEST_SKIP() << "gperftools takes no bounds";
  const LeafKind leaf = ReadsOnlyInBounds() ? LeafKind::kSpin : LeafKind::kSaveContext;
  const UnwindResult r = UnwindChain(unwinder_.get(), EndsMidChainBounds, -1, leaf);
  ASSERT_TRUE(r.signalled);
  // The bounds end at level 5's frame: the walk gives the pc and a prefix of
  // the chain that reaches level 3 but stops before level 6. (The recursive
  // levels share one return address, so count rather than search.)
  const std::vector<uintptr_t> expected = ExpectedReturnAddresses();
  ASSERT_GE(r.pcs.size(), 1u + 4) << Describe(r.pcs, expected);
  ASSERT_LE(r.pcs.size(), 1u + 6) << Describe(r.pcs, expected);
  for (size_t i = 1; i < r.pcs.size(); ++i) {
    EXPECT_EQ(r.pcs[i], expected[i - 1]) << "frame " << i << "\n" << Describe(r.pcs, expected);
  }
}

#if defined(__x86_64__)
TEST_P(UnwinderTest, GarbageFramePointerEndsTheWalkWithoutFaulting) {
  // %rbp unmapped, null, misaligned, at the top of the address space, in the
  // kernel half.
  const uintptr_t garbage[] = {0x1234567, 0, 0x7, ~uintptr_t{0} - 15, 0xffff800000000000ull};
  for (uintptr_t g : garbage) {
    SCOPED_TRACE(g);
    const UnwindResult r =
        UnwindChain(unwinder_.get(), RealBounds, -1, LeafKind::kGarbageFramePointer, g);
    ASSERT_TRUE(r.signalled);
    ASSERT_GE(r.pcs.size(), 1u);
    EXPECT_EQ(r.pcs[0], r.context_pc);
    if (GetParam() == "fp") {
      // Only the pc, and the return address found at %rsp if the pc is a ret.
      EXPECT_LE(r.pcs.size(), 2u) << Describe(r.pcs, {});
    } else {
      // DWARF unwinders do not need %rbp here: the whole chain is still found.
      EXPECT_TRUE(ContainsInOrder(r.pcs, ExpectedReturnAddresses()))
          << Describe(r.pcs, ExpectedReturnAddresses());
    }
  }
}
#endif

TEST_P(UnwinderTest, WritesAtMostMaxPcs) {
  const UnwindResult r = UnwindChain(unwinder_.get(), RealBounds, -1, LeafKind::kSpin, 0, 3);
  ASSERT_TRUE(r.signalled);
  ASSERT_EQ(r.pcs.size(), 3u);
  EXPECT_EQ(r.pcs[0], r.context_pc);
  EXPECT_EQ(r.pcs[1], g_leaf_ret);
  EXPECT_EQ(r.pcs[2], g_ret[0]);
  uintptr_t pcs[1];
  ucontext_t uc;
  ASSERT_EQ(getcontext(&uc), 0);
  EXPECT_EQ(unwinder_->Unwind(&uc, CurrentStackBounds(), pcs, 0), 0);
  EXPECT_EQ(unwinder_->Unwind(nullptr, CurrentStackBounds(), pcs, 1), 0);
}

INSTANTIATE_TEST_SUITE_P(AllUnwinders, UnwinderTest,
                         ::testing::Values("libunwind", "cfi", "gperftools", "fp"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// The frame-pointer walk's safety rules, on hand-made stacks.
class FpRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    fp_ = MakeUnwinder("fp", &error);
    ASSERT_NE(fp_, nullptr) << error;
    // Registers are all set by hand; the pc points at known bytes, so that
    // the entry/exit rule below is exercised only where a test means to.
    memset(&uc_, 0, sizeof(uc_));
    SetPc(kNops);
    stack_.assign(64, 0);
  }
  // Instruction bytes for the pc: neither a function entry nor a ret.
  static constexpr unsigned char kNops[4] = {0x90, 0x90, 0x90, 0x90};
  void SetPc(const unsigned char* code) {
#if defined(__x86_64__)
    uc_.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(reinterpret_cast<uintptr_t>(code));
#elif defined(__aarch64__)
    uc_.uc_mcontext.pc = reinterpret_cast<uintptr_t>(code);
#endif
  }
  uintptr_t At(size_t i) const { return reinterpret_cast<uintptr_t>(&stack_[i]); }
  void SetRegs(uintptr_t sp, uintptr_t fp) {
#if defined(__x86_64__)
    uc_.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(sp);
    uc_.uc_mcontext.gregs[REG_RBP] = static_cast<greg_t>(fp);
#elif defined(__aarch64__)
    uc_.uc_mcontext.sp = sp;
    uc_.uc_mcontext.regs[29] = fp;
#endif
  }
  std::vector<uintptr_t> Walk(StackBounds b) {
    uintptr_t pcs[32];
    const int n = fp_->Unwind(&uc_, b, pcs, 32);
    return std::vector<uintptr_t>(pcs, pcs + n);
  }
  StackBounds All() const { return StackBounds{At(0), At(0) + stack_.size() * sizeof(uintptr_t)}; }

  std::unique_ptr<Unwinder> fp_;
  ucontext_t uc_;
  std::vector<uintptr_t> stack_;
};

TEST_F(FpRulesTest, FollowsAnIncreasingChainToItsZeroReturnAddress) {
  // Records at 4, 10, 20; the last one's return address is 0 (outermost).
  stack_[4] = At(10), stack_[5] = 0x1004;
  stack_[10] = At(20), stack_[11] = 0x1010;
  stack_[20] = At(30), stack_[21] = 0;
  SetRegs(At(2), At(4));
  const std::vector<uintptr_t> pcs = Walk(All());
#if defined(__x86_64__) || defined(__aarch64__)
  ASSERT_EQ(pcs.size(), 3u);
  EXPECT_EQ(pcs[1], 0x1004u);
  EXPECT_EQ(pcs[2], 0x1010u);
#endif
}

// A frame-pointer record whose return address is no user-space address
// (data, when the frame register holds something else) ends the walk: kept,
// such a word came out of the reader as a Python frame ("records refer to
// definitions lost"). The cfi walk falls back to the same records where it
// has no rows (none here: its tables are not started).
TEST_F(FpRulesTest, AReturnAddressOutsideUserSpaceEndsTheWalk) {
  std::string error;
  std::unique_ptr<Unwinder> cfi = MakeUnwinder("cfi", &error);
  for (uintptr_t bad : {uintptr_t{0xffff800000001000}, uintptr_t{1} << 63, uintptr_t{1} << 60}) {
    SCOPED_TRACE(bad);
    stack_[4] = At(10), stack_[5] = 0x1004;
    stack_[10] = At(20), stack_[11] = bad;
    stack_[20] = At(30), stack_[21] = 0x1010;
    SetRegs(At(2), At(4));
    const std::vector<uintptr_t> pcs = Walk(All());
    ASSERT_EQ(pcs.size(), 2u);
    EXPECT_EQ(pcs[1], 0x1004u);
#if defined(__x86_64__)
    ASSERT_NE(cfi, nullptr) << error;
    uintptr_t out[32];
    const int n = cfi->Unwind(&uc_, All(), out, 32);
    ASSERT_EQ(n, 2);
    EXPECT_EQ(out[1], 0x1004u);
#endif
  }
}

TEST_F(FpRulesTest, StopsOnCyclesDecreasingMisalignedAndOutOfBoundsRecords) {
  struct Case {
    const char* name;
    size_t record;
    uintptr_t next;
  } cases[] = {
      {"self-loop", 4, At(4)}, {"points-down", 10, At(4)},  {"misaligned", 4, At(10) + 3},
      {"past-hi", 4, At(64)},  {"straddles-hi", 4, At(63)}, {"below-lo", 4, At(0) - 64},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::fill(stack_.begin(), stack_.end(), 0x2222);
    stack_[c.record] = c.next;
    stack_[c.record + 1] = 0x1004;
    SetRegs(At(2), At(c.record));
    const std::vector<uintptr_t> pcs = Walk(All());
    // The record itself is valid (its return address counts); what it points
    // to is not followed.
    ASSERT_LE(pcs.size(), 2u);
  }
}

#if defined(__x86_64__)
TEST_F(FpRulesTest, FindsTheCallerOfAFunctionInterruptedAtItsEntryOrExit) {
  // While the pc is at `push %rbp`, `mov %rsp,%rbp`, `ret` or `endbr64`, %rbp
  // still (or again) holds the caller's frame, so the caller's return address
  // is read from the stack pointer instead of being skipped.
  static const unsigned char kPush[] = {0x55, 0x90, 0x90, 0x90};
  static const unsigned char kMov[] = {0x48, 0x89, 0xe5, 0x90};
  static const unsigned char kRet[] = {0xc3, 0x90, 0x90, 0x90};
  static const unsigned char kEndbr[] = {0xf3, 0x0f, 0x1e, 0xfa};
  const struct {
    const char* name;
    const unsigned char* code;
    size_t return_slot;  // Where the return address sits, in words above sp.
  } cases[] = {{"push", kPush, 2}, {"mov", kMov, 3}, {"ret", kRet, 2}, {"endbr64", kEndbr, 2}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::fill(stack_.begin(), stack_.end(), 0);
    stack_[2] = 0x2000;
    stack_[3] = 0x3000;
    stack_[10] = At(20), stack_[11] = 0x1010;  // The caller's frame record.
    SetPc(c.code);
    SetRegs(At(2), At(10));
    const std::vector<uintptr_t> pcs = Walk(All());
    ASSERT_EQ(pcs.size(), 3u);
    EXPECT_EQ(pcs[1], stack_[c.return_slot]);
    EXPECT_EQ(pcs[2], 0x1010u);
  }
  // Anywhere else the frame record alone counts.
  SetPc(kNops);
  EXPECT_EQ(Walk(All()).size(), 2u);
}
#endif

TEST_F(FpRulesTest, RejectsAFramePointerBelowTheStackPointer) {
  stack_[4] = At(10), stack_[5] = 0x1004;
  SetRegs(At(6), At(4));
  EXPECT_EQ(Walk(All()).size(), 1u);
}

TEST_F(FpRulesTest, EmptyBoundsGiveOnlyThePc) {
  stack_[4] = At(10), stack_[5] = 0x1004;
  SetRegs(At(2), At(4));
  const std::vector<uintptr_t> pcs = Walk(StackBounds{});
  ASSERT_EQ(pcs.size(), 1u);
  EXPECT_EQ(pcs[0], ContextPc(&uc_));
}

// ---------------------------------------------------------------------------
// Registries.

TEST(UnwinderRegistryTest, ListsTheUnwindersBestFirstAndAutoPicksTheDefault) {
  const std::vector<BackendInfo> list = ListUnwinders();
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0].name, "cfi");
  EXPECT_EQ(list[1].name, "libunwind");
  EXPECT_EQ(list[2].name, "gperftools");
  EXPECT_EQ(list[3].name, "fp");
  for (const BackendInfo& info : list) {
    EXPECT_EQ(info.kind, "unwinder");
    EXPECT_FALSE(info.note.empty()) << info.name;
    std::printf("[ backends ] unwinder %-10s %s  %s\n", info.name.c_str(),
                info.available ? "yes" : "no ", info.note.c_str());
  }
  EXPECT_TRUE(list[0].available);
  EXPECT_TRUE(list[3].available);
  std::string error;
  for (const char* name : {"auto", ""}) {
    std::unique_ptr<Unwinder> u = MakeUnwinder(name, &error);
    ASSERT_NE(u, nullptr) << error;
    EXPECT_STREQ(u->name(), "cfi");
  }
  EXPECT_EQ(MakeUnwinder("dwarf-magic", &error), nullptr);
  EXPECT_NE(error.find("dwarf-magic"), std::string::npos) << error;
}

TEST(TimerRegistryTest, ListsTheThreeSourcesAndRejectsUnknownNames) {
  const std::vector<BackendInfo> list = ListTimerSources();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "perf");
  EXPECT_EQ(list[1].name, "posix");
  EXPECT_EQ(list[2].name, "itimer");
  for (const BackendInfo& info : list) {
    EXPECT_EQ(info.kind, "timer");
    EXPECT_FALSE(info.note.empty()) << info.name;
    std::printf("[ backends ] timer    %-10s %s  %s\n", info.name.c_str(),
                info.available ? "yes" : "no ", info.note.c_str());
  }
  EXPECT_TRUE(list[1].available);
  EXPECT_TRUE(list[2].available);
  std::string error;
  EXPECT_EQ(MakeTimerSource("hpet", &error), nullptr);
  EXPECT_NE(error.find("hpet"), std::string::npos) << error;
  std::unique_ptr<TimerSource> a = MakeTimerSource("auto", &error);
  ASSERT_NE(a, nullptr);
  EXPECT_STREQ(a->name(), "auto");
  ASSERT_TRUE(a->Start(SIGPROF, 100, &error)) << error;
  EXPECT_STREQ(a->name(), list[0].available ? "perf" : "posix");
  a->Stop();
}

TEST(TimerRegistryTest, ItimerRefusesSignalsOtherThanSigprof) {
  std::string error;
  std::unique_ptr<TimerSource> t = MakeTimerSource("itimer", &error);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->Start(SIGUSR1, 100, &error));
  EXPECT_NE(error.find("SIGPROF"), std::string::npos) << error;
}

// ---------------------------------------------------------------------------
// Timer sources.

struct TidCount {
  std::atomic<pid_t> tid{0};
  std::atomic<long> signals{0};
  std::atomic<long> overruns{0};
  // As core/signal_handler.cc weighs samples of a CpuTimeWeighted() source:
  // periods of thread CPU time since the previous signal (1 for the first).
  std::atomic<long> weighted{0};
  int64_t last_cpu_ns = 0;  // Only the owning thread's handler touches it.
};
constexpr int kTidSlots = 64;
TidCount g_counts[kTidSlots];
std::atomic<TimerSource*> g_timer{nullptr};
int64_t g_period_ns = 1;

// This function is safe to call from asynchronous signals.
TidCount* SlotFor(pid_t tid) {
  for (TidCount& c : g_counts) {
    pid_t seen = c.tid.load();
    if (seen == tid) return &c;
    if (seen == 0 && c.tid.compare_exchange_strong(seen, tid)) return &c;
    if (seen == tid) return &c;
  }
  return nullptr;
}

void CountingHandler(int, siginfo_t* info, void*) {
  const int saved_errno = errno;
  TidCount* c = SlotFor(CurrentTid());
  if (c != nullptr) {
    c->signals.fetch_add(1);
    TimerSource* t = g_timer.load();
    if (t != nullptr) c->overruns.fetch_add(t->Overrun(info));
    timespec cpu;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    const int64_t now = static_cast<int64_t>(cpu.tv_sec) * 1000000000 + cpu.tv_nsec;
    long periods = 1;
    if (c->last_cpu_ns > 0) {
      periods = static_cast<long>((now - c->last_cpu_ns + g_period_ns / 2) / g_period_ns);
      if (periods < 1) periods = 1;
    }
    c->last_cpu_ns = now;
    c->weighted.fetch_add(periods);
  }
  errno = saved_errno;
}

long SignalsOf(pid_t tid) {
  for (TidCount& c : g_counts) {
    if (c.tid.load() == tid) return c.signals.load();
  }
  return 0;
}
long OverrunsOf(pid_t tid) {
  for (TidCount& c : g_counts) {
    if (c.tid.load() == tid) return c.overruns.load();
  }
  return 0;
}
long WeightedOf(pid_t tid) {
  for (TidCount& c : g_counts) {
    if (c.tid.load() == tid) return c.weighted.load();
  }
  return 0;
}
long SignalsExcept(const std::vector<pid_t>& tids) {
  long n = 0;
  for (TidCount& c : g_counts) {
    bool listed = false;
    for (pid_t t : tids) listed |= c.tid.load() == t;
    if (!listed) n += c.signals.load();
  }
  return n;
}

// Installs the counting handler for SIGPROF for the rest of the process (no
// SA_RESTART, so an interrupted sleep would show up as EINTR), and clears the
// counters.
void ResetCounting(TimerSource* source, int hz) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = CountingHandler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  g_timer = source;
  g_period_ns = 1000000000LL / hz;
  for (TidCount& c : g_counts) {
    c.tid = 0;
    c.signals = 0;
    c.overruns = 0;
    c.weighted = 0;
    c.last_cpu_ns = 0;
  }
}

class TimerSourceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void StartAt(int hz) {
    std::string error;
    source_ = MakeTimerSource(GetParam(), &error);
    ASSERT_NE(source_, nullptr) << error;
    ASSERT_TRUE(source_->PerThread());
    if (!source_->Start(SIGPROF, hz, &error)) GTEST_SKIP() << GetParam() << ": " << error;
    ResetCounting(source_.get(), hz);
  }
  void TearDown() override {
    if (source_) source_->Stop();
    g_timer = nullptr;
  }
  std::unique_ptr<TimerSource> source_;
};

struct Burned {
  pid_t tid = 0;
  double cpu = 0;
  bool armed = false;
  std::string error;
};

// Arms the calling thread, burns `cpu` seconds of CPU, disarms.
Burned ArmSelfAndBurn(TimerSource* source, double cpu) {
  Burned b;
  b.tid = CurrentTid();
  ThreadTimer t;
  b.armed = source->ArmThread(b.tid, &t, &b.error);
  if (!b.armed) return b;
  const double start = ThreadCpuSeconds();
  BurnCpu(cpu);
  b.cpu = ThreadCpuSeconds() - start;
  source->DisarmThread(&t);
  return b;
}

// One busy thread: signals (plus overruns, which stand for samples too) per
// second of its own CPU time, against hz.
void CheckFidelity(const std::string& name, int hz) {
  std::string error;
  std::unique_ptr<TimerSource> source = MakeTimerSource(name, &error);
  ASSERT_NE(source, nullptr) << error;
  if (!source->Start(SIGPROF, hz, &error)) GTEST_SKIP() << name << ": " << error;
  ResetCounting(source.get(), hz);
  const double budget = hz >= 1000 ? 0.3 : 0.5;
  Burned b;
  std::thread([&] { b = ArmSelfAndBurn(source.get(), budget); }).join();
  source->Stop();
  g_timer = nullptr;
  ASSERT_TRUE(b.armed) << b.error;
  const double expected = b.cpu * hz;
  const long signals = SignalsOf(b.tid);
  const long overruns = OverrunsOf(b.tid);
  const double ratio = signals / expected;
  const double ratio_with_overruns = (signals + overruns) / expected;
  const double weighted_ratio = WeightedOf(b.tid) / expected;
  std::printf(
      "[ fidelity ] %-6s %4d Hz: cpu %.3f s, expected %.0f, signals %ld (ratio %.3f), "
      "+overruns %ld (ratio %.3f), CPU-time weighted %.3f; %s\n",
      name.c_str(), hz, b.cpu, expected, signals, ratio, overruns, ratio_with_overruns,
      weighted_ratio, source->note().c_str());
  ::testing::Test::RecordProperty("ratio", std::to_string(ratio));
  ::testing::Test::RecordProperty("ratio_with_overruns", std::to_string(ratio_with_overruns));
  // perf gives 0.98-1.0 here even with other jobs running; POSIX timers
  // 0.96-1.0 alone but occasionally less on a contended machine (see below).
  EXPECT_GE(ratio_with_overruns, name == "perf" ? 0.85 : 0.7);
  EXPECT_LE(ratio_with_overruns, 1.1);
  if (name == "perf") {
    EXPECT_EQ(overruns, 0);  // One signal per period, nothing folded.
  }
  if (name == "posix" && hz >= 1000) {
    // The 250 Hz tick: one signal stands for several periods.
    EXPECT_LT(ratio, 0.6);
  }
}

TEST(TimerFidelityTest, PerfGivesOneSignalPerPeriodAt100Hz) { CheckFidelity("perf", 100); }
TEST(TimerFidelityTest, PerfGivesOneSignalPerPeriodAt1000Hz) { CheckFidelity("perf", 1000); }
TEST(TimerFidelityTest, PosixGivesOneSignalPerPeriodAt100Hz) { CheckFidelity("posix", 100); }
TEST(TimerFidelityTest, PosixCountsTheTicksItCannotDeliverAsOverrunsAt1000Hz) {
  CheckFidelity("posix", 1000);
}

// A thread that spends much of its CPU time in the kernel (copying from
// /dev/zero): perf raises no signal for ticks that land there, and the
// CPU-time weight of the next sample carries them, as the core's handler
// counts when CpuTimeWeighted() is true.
TEST(TimerFidelityTest, PerfWeightsCarryKernelTimeToTheNextSample) {
  constexpr int kHz = 1000;
  std::string error;
  std::unique_ptr<TimerSource> perf = MakeTimerSource("perf", &error);
  if (!perf->Start(SIGPROF, kHz, &error)) GTEST_SKIP() << error;
  EXPECT_TRUE(perf->CpuTimeWeighted());
  ResetCounting(perf.get(), kHz);
  Burned b;
  double system_share = 0;
  std::thread([&] {
    b.tid = CurrentTid();
    const int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    // 16 MiB a read: most of the thread's time is in the kernel, so the
    // signals fall well below the CPU time. (With 4 MiB they were 0.53-0.78
    // of it beside other tests, and getrusage's user/system split, sampled
    // by the kernel's ticks, varied from 36% to 53% system for the same
    // work: the margin against that noise was too thin.)
    std::vector<char> buffer(16 << 20);
    ThreadTimer t;
    b.armed = perf->ArmThread(b.tid, &t, &b.error);
    if (b.armed) {
      rusage before;
      getrusage(RUSAGE_THREAD, &before);
      const double start = ThreadCpuSeconds();
      while (ThreadCpuSeconds() - start < 0.3) {
        if (read(fd, buffer.data(), buffer.size()) < 0) break;
        BurnCpu(0.0001);
      }
      // Kernel time reaches the weights only through a later user-mode
      // sample: 30 ms in user mode at the end give the last reads theirs.
      BurnCpu(0.03);
      b.cpu = ThreadCpuSeconds() - start;
      perf->DisarmThread(&t);
      rusage after;
      getrusage(RUSAGE_THREAD, &after);
      const double sys = (after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
                         (after.ru_stime.tv_usec - before.ru_stime.tv_usec) * 1e-6;
      system_share = sys / b.cpu;
    }
    close(fd);
  }).join();
  perf->Stop();
  g_timer = nullptr;
  ASSERT_TRUE(b.armed) << b.error;
  const double expected = b.cpu * kHz;
  const double ratio = SignalsOf(b.tid) / expected;
  const double weighted = WeightedOf(b.tid) / expected;
  std::printf(
      "[ fidelity ] perf   %4d Hz, %.0f%% system time: cpu %.3f s, signals ratio %.3f, "
      "CPU-time weighted %.3f\n",
      kHz, system_share * 100, b.cpu, ratio, weighted);
  // Under a sanitizer the share of system time the workload really has
  // drifts from what it measured (0.76 against 0.57 in one CI run); the
  // weights below still must add up.
  if (!testing::kUnderSanitizer) {
    EXPECT_LT(ratio, 1.0 - system_share / 2) << "kernel ticks should raise no signal";
  }
  // Carried, the weights add up to the CPU time; not carried, they would be
  // the signals ratio (0.1-0.25 here). One fresh-clone CI run measured 0.81
  // with 12% of the signals, before the user-mode tail above: sparse
  // signals leave the first and last stretches uncounted.
  EXPECT_GE(weighted, 0.85);
  EXPECT_LE(weighted, 1.1);
}

TEST(TimerRegistryTest, OnlyPerfAsksForCpuTimeWeights) {
  std::string error;
  for (const char* name : {"perf", "posix", "itimer"}) {
    std::unique_ptr<TimerSource> t = MakeTimerSource(name, &error);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->CpuTimeWeighted(), std::string(name) == "perf") << name;
  }
  std::unique_ptr<TimerSource> a = MakeTimerSource("auto", &error);
  EXPECT_FALSE(a->CpuTimeWeighted()) << "nothing chosen yet";
  ASSERT_TRUE(a->Start(SIGPROF, 100, &error)) << error;
  EXPECT_EQ(a->CpuTimeWeighted(), std::string(a->name()) == "perf");
  a->Stop();
}

// setitimer is process-wide: compare all signals with the process's CPU time.
void CheckItimer(int hz, double min_ratio, double max_ratio) {
  std::string error;
  std::unique_ptr<TimerSource> source = MakeTimerSource("itimer", &error);
  ASSERT_NE(source, nullptr);
  ASSERT_TRUE(source->Start(SIGPROF, hz, &error)) << error;
  EXPECT_FALSE(source->PerThread());
  ResetCounting(source.get(), hz);
  double cpu = 0;
  std::thread([&] {
    ThreadTimer t;
    std::string err;
    ASSERT_TRUE(source->ArmThread(CurrentTid(), &t, &err)) << err;
    const double start = ProcessCpuSeconds();
    BurnCpu(hz >= 1000 ? 0.3 : 0.5);
    cpu = ProcessCpuSeconds() - start;
    source->Stop();
  }).join();
  const long signals = SignalsExcept({});
  const double ratio = signals / (cpu * hz);
  std::printf(
      "[ fidelity ] itimer %4d Hz: process cpu %.3f s, expected %.0f, signals %ld "
      "(ratio %.3f)\n",
      hz, cpu, cpu * hz, signals, ratio);
  EXPECT_GE(ratio, min_ratio);
  EXPECT_LE(ratio, max_ratio);
}

// setitimer is checked on the scheduler tick and sends at most one signal per
// check, with no overrun count. Alone on this machine it gives 0.98-1.06 of the
// expected signals at 100 Hz and 0.25-0.30 at 1000 Hz (the 250 Hz tick); with
// other jobs competing for the two CPUs, 0.3-1.24 and 0.07-0.30 were seen, so
// only the order of magnitude and the cap are asserted.
TEST(TimerFidelityTest, ItimerSignalsTheProcessAt100Hz) { CheckItimer(100, 0.2, 1.4); }
TEST(TimerFidelityTest, ItimerIsCappedByTheSchedulerTickAt1000Hz) { CheckItimer(1000, 0.02, 0.5); }

TEST_P(TimerSourceTest, EachOfTwoBusyThreadsArmedByTidFromAnotherThreadGetsItsOwnSignals) {
  constexpr int kHz = 1000;
  StartAt(kHz);
  if (IsSkipped()) return;
  // Two workers burn different amounts of CPU; the test thread arms them by
  // tid and then only waits. A misrouted signal would land on the test thread
  // (process-directed signals go to any thread) or skew the two ratios apart.
  struct Worker {
    std::atomic<pid_t> tid{0};
    std::atomic<bool> armed{false};
    double cpu = 0;
    std::thread thread;
  } workers[2];
  const double budgets[2] = {0.3, 0.15};
  for (int i = 0; i < 2; ++i) {
    Worker& w = workers[i];
    const double budget = budgets[i];
    w.thread = std::thread([&w, budget] {
      w.tid = CurrentTid();
      while (!w.armed.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      const double start = ThreadCpuSeconds();
      BurnCpu(budget);
      w.cpu = ThreadCpuSeconds() - start;
    });
  }
  ThreadTimer timers[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(WaitFor([&] { return workers[i].tid.load() != 0; }, 10));
    std::string error;
    ASSERT_TRUE(source_->ArmThread(workers[i].tid, &timers[i], &error)) << error;
    workers[i].armed = true;
  }
  for (Worker& w : workers) w.thread.join();
  for (ThreadTimer& t : timers) source_->DisarmThread(&t);  // The threads have exited.
  for (const Worker& w : workers) {
    const long samples = SignalsOf(w.tid) + OverrunsOf(w.tid);
    const double ratio = samples / (w.cpu * kHz);
    std::printf(
        "[ fidelity ] %-6s two threads, tid %d: cpu %.3f s, signals %ld + overruns "
        "%ld, ratio %.3f\n",
        GetParam().c_str(), static_cast<int>(w.tid.load()), w.cpu, SignalsOf(w.tid),
        OverrunsOf(w.tid), ratio);
    // POSIX timers lose samples now and then when the two workers and other
    // jobs contend for the CPUs (0.63 once in 60 runs for the shorter worker,
    // usually 0.95-1.0); perf stayed at 0.98-1.0.
    EXPECT_GE(ratio, GetParam() == "perf" ? 0.8 : 0.5) << "tid " << w.tid;
    EXPECT_LE(ratio, 1.15) << "tid " << w.tid;
  }
  EXPECT_EQ(SignalsExcept({workers[0].tid, workers[1].tid}), 0)
      << "signals reached a thread that was not armed";
}

struct SleepResult {
  bool armed = false;
  std::string error;
  int calls = 0;
  int eintr = 0;
  long signals = 0;
  double cpu = 0;
};

// Arms the calling thread and blocks in nanosleep and poll, 100 times each,
// about 300 ms of wall time; counts EINTRs and signals received.
SleepResult ArmSelfAndSleep(TimerSource* source) {
  SleepResult r;
  const pid_t tid = CurrentTid();
  ThreadTimer t;
  r.armed = source->ArmThread(tid, &t, &r.error);
  if (!r.armed) return r;
  const long signals_before = SignalsOf(tid);
  const double start = ThreadCpuSeconds();
  for (int i = 0; i < 100; ++i) {
    timespec ts{0, 2 * 1000 * 1000};
    ++r.calls;
    if (nanosleep(&ts, nullptr) != 0 && errno == EINTR) ++r.eintr;
    ++r.calls;
    if (poll(nullptr, 0, 1) < 0 && errno == EINTR) ++r.eintr;
  }
  r.cpu = ThreadCpuSeconds() - start;
  r.signals = SignalsOf(tid) - signals_before;
  source->DisarmThread(&t);
  return r;
}

TEST_P(TimerSourceTest, SleepingThreadIsNotSampledWhileBlocked) {
  constexpr int kHz = 1000;
  StartAt(kHz);
  if (IsSkipped()) return;
  // CPU-time timers stand still while the thread is blocked: ~300 ms asleep
  // (300 periods of wall time, which a wall-clock timer would turn into ~300
  // signals and ~200 EINTRs) brings no more signals than the few milliseconds
  // of CPU the thread used. The handler has no SA_RESTART, and nanosleep and
  // poll are never restarted anyway. perf raises its signal in user mode only,
  // before the thread can block, so it never causes EINTR. A POSIX timer is
  // checked on the tick, which can land while the thread is in the kernel on
  // its way to blocking; the signal then ends that sleep with EINTR (rare: none
  // in our runs, but possible), so there every EINTR must come with a signal.
  // (A perf event counting kernel ticks too did that to 0.2% of the blocking
  // calls at 1000 Hz, which is why perf_timer.cc counts user mode only.)
  SleepResult r;
  std::thread([&] { r = ArmSelfAndSleep(source_.get()); }).join();
  ASSERT_TRUE(r.armed) << r.error;
  std::printf(
      "[ fidelity ] %-6s sleeping thread: cpu %.6f s, signals %ld, EINTR %d of %d "
      "calls\n",
      GetParam().c_str(), r.cpu, r.signals, r.eintr, r.calls);
  EXPECT_LE(r.signals, static_cast<long>(r.cpu * kHz) + 2);
  if (GetParam() == "perf") {
    EXPECT_EQ(r.eintr, 0);
  } else {
    EXPECT_LE(r.eintr, r.signals) << "an EINTR without a signal";
  }
}

TEST_P(TimerSourceTest, DisarmStopsTheSignals) {
  constexpr int kHz = 1000;
  StartAt(kHz);
  if (IsSkipped()) return;
  long before = 0;
  long samples_before = 0;
  long after = 0;
  std::string error;
  bool armed = false;
  std::thread([&] {
    const pid_t tid = CurrentTid();
    ThreadTimer t;
    armed = source_->ArmThread(tid, &t, &error);
    if (!armed) return;
    EXPECT_TRUE(t.armed);
    BurnCpu(0.1);
    source_->DisarmThread(&t);
    EXPECT_FALSE(t.armed);
    EXPECT_EQ(t.fd, -1);
    before = SignalsOf(tid);
    samples_before = before + OverrunsOf(tid);
    BurnCpu(0.2);
    after = SignalsOf(tid);
  }).join();
  ASSERT_TRUE(armed) << error;
  EXPECT_GE(samples_before, 50) << "about 100 expected while armed";
  EXPECT_LE(after - before, 1) << "at most one signal already in flight";
}

INSTANTIATE_TEST_SUITE_P(PerThreadSources, TimerSourceTest, ::testing::Values("perf", "posix"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Runs `child` in a fork()ed child and returns its exit status (0 = passed).
template <typename Fn>
int InChild(Fn child) {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 100;
    try {
      code = child();
    } catch (...) {
      code = 101;
    }
    fflush(stdout);
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(PerfTimerTest, ForkedChildForgetsTheParentsEventWithoutStoppingIt) {
  constexpr int kHz = 1000;
  std::string error;
  std::unique_ptr<TimerSource> perf = MakeTimerSource("perf", &error);
  if (!perf->Start(SIGPROF, kHz, &error)) GTEST_SKIP() << error;
  ResetCounting(perf.get(), kHz);
  const pid_t tid = CurrentTid();
  ThreadTimer t;
  ASSERT_TRUE(perf->ArmThread(tid, &t, &error)) << error;
  BurnCpu(0.05);
  const int status = InChild([&] {
    const int fd = t.fd;
    perf->ForgetInherited(&t);
    if (t.fd != -1 || t.armed) return 1;
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) return 2;  // Closed in the child.
    // The child can arm its own thread, and its signals come to it.
    ThreadTimer mine;
    std::string err;
    if (!perf->ArmThread(CurrentTid(), &mine, &err)) return 3;
    BurnCpu(0.05);
    perf->DisarmThread(&mine);
    return SignalsOf(CurrentTid()) >= 20 ? 0 : 4;
  });
  EXPECT_EQ(status, 0);
  // The parent's event still runs after the child closed its copy and exited.
  const long before = SignalsOf(tid);
  const double start = ThreadCpuSeconds();
  BurnCpu(0.1);
  const double cpu = ThreadCpuSeconds() - start;
  const long after = SignalsOf(tid);
  perf->DisarmThread(&t);
  perf->Stop();
  g_timer = nullptr;
  EXPECT_GE(after - before, static_cast<long>(cpu * kHz * 0.8));
}

TEST(AutoTimerTest, FallsBackToPosixWhenPerfIsRefused) {
  // A seccomp filter makes perf_event_open fail with EACCES, as
  // perf_event_paranoid=3 or a container's profile would.
  const int status = InChild([] {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 10;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return 11;
    std::string error;
    std::unique_ptr<TimerSource> perf = MakeTimerSource("perf", &error);
    if (perf->Start(SIGPROF, 1000, &error)) return 1;
    if (error.find("perf_event_open") == std::string::npos) return 2;
    std::unique_ptr<TimerSource> source = MakeTimerSource("auto", &error);
    if (!source->Start(SIGPROF, 1000, &error)) return 3;
    std::printf("[ backends ] auto under seccomp: %s (%s)\n", source->name(),
                source->note().c_str());
    if (std::string(source->name()) != "posix") return 4;
    if (source->note().find("perf_event_open") == std::string::npos) return 5;
    // And it samples.
    ResetCounting(source.get(), 1000);
    ThreadTimer t;
    if (!source->ArmThread(CurrentTid(), &t, &error)) return 6;
    BurnCpu(0.05);
    source->DisarmThread(&t);
    if (SignalsOf(CurrentTid()) + OverrunsOf(CurrentTid()) < 20) return 7;
    for (const BackendInfo& info : ListTimerSources()) {
      if (info.name == "perf" && info.available) return 8;
    }
    return 0;
  });
  EXPECT_EQ(status, 0);
}

int ReadParanoid() {
  FILE* f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
  if (f == nullptr) return -100;
  int v = -100;
  if (fscanf(f, "%d", &v) != 1) v = -100;
  fclose(f);
  return v;
}

TEST(PerfTimerTest, NeedsNoPrivilege) {
  // User-mode task-clock events on one's own threads are allowed at every
  // perf_event_paranoid below 3 without any capability; this is what a
  // profiled program run by an ordinary user gets.
  if (ReadParanoid() >= 3) GTEST_SKIP() << "perf_event_paranoid >= 3: perf is refused";
  const int status = InChild([] {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &header, data) != 0) return 10;
    std::string error;
    std::unique_ptr<TimerSource> perf = MakeTimerSource("perf", &error);
    if (!perf->Start(SIGPROF, 1000, &error)) return 1;
    ResetCounting(perf.get(), 1000);
    Burned b = ArmSelfAndBurn(perf.get(), 0.1);
    if (!b.armed) return 2;
    const double ratio = SignalsOf(b.tid) / (b.cpu * 1000);
    std::printf("[ fidelity ] perf without capabilities, 1000 Hz: cpu %.3f s, ratio %.3f\n", b.cpu,
                ratio);
    return ratio >= 0.8 && ratio <= 1.1 ? 0 : 3;
  });
  EXPECT_EQ(status, 0);
}


// --- Stack bounds without allocating (backends/stack_bounds.h) ---
//
// Each is checked against glibc's own answer (pthread_getattr_np): never
// outside the stack it gives (an unguarded read there would fault), and short
// of it by less than a page at either end.

uintptr_t TestPage() { return static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)); }

uintptr_t HereSp() { return reinterpret_cast<uintptr_t>(__builtin_frame_address(0)); }

TEST(StackBoundsTest, MainThreadsComeFromTheAuxiliaryVectorAndAgreeWithGlibc) {
  ASSERT_EQ(gettid(), getpid()) << "gtest runs TEST bodies on the main thread";
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_STACK, &rl), 0);
  if (rl.rlim_cur == RLIM_INFINITY) GTEST_SKIP() << "unlimited RLIMIT_STACK: glibc's maps walk is used";
  StackBounds ours;
  ASSERT_TRUE(MainThreadStackBounds(HereSp(), &ours));
  const StackBounds glibc = StackBoundsOf(pthread_self());
  uintptr_t stack_end = 0;
  FILE* maps = fopen("/proc/self/maps", "r");
  ASSERT_NE(maps, nullptr);
  char line[512];
  while (fgets(line, sizeof line, maps) != nullptr) {
    unsigned long from = 0, to = 0;
    if (strstr(line, "[stack]") != nullptr && sscanf(line, "%lx-%lx", &from, &to) == 2) stack_end = to;
  }
  fclose(maps);
  EXPECT_EQ(ours.hi, stack_end) << "the end of the [stack] mapping";
  // glibc ends at the page above __libc_stack_end, below the argument and
  // environment strings, and stops at the mapping below when it is nearer
  // than the limit.
  EXPECT_GE(ours.hi, glibc.hi);
  EXPECT_LE(ours.lo, glibc.lo);
  EXPECT_EQ(ours.hi - ours.lo, rl.rlim_cur & ~(TestPage() - 1));
  EXPECT_LT(ours.lo, HereSp());
  // CurrentStackBounds takes this path, with or without a hint.
  const StackBounds current = CurrentStackBounds();
  EXPECT_EQ(current.hi, ours.hi);
  EXPECT_EQ(current.lo, ours.lo);
}

TEST(StackBoundsTest, ANonMainThreadIsNotTakenForTheMainOne) {
  bool claimed = true;
  std::thread([&] {
    StackBounds b;
    claimed = MainThreadStackBounds(HereSp(), &b);
  }).join();
  EXPECT_FALSE(claimed);
}

struct HintedCase {
  const char* name;
  size_t stack_size;  // 0: the default attr (pthread_create with a null attr)
  size_t guard;       // SIZE_MAX: the attr's default
  bool own_stack;     // the program maps the stack itself (pthread_attr_setstack)
};

struct HintedRun {
  StackHint hint;
  bool ok = false;
  StackBounds ours, glibc;
  uintptr_t sp = 0;
  bool lo_readable = false;
};

void* HintedThread(void* p) {
  auto* run = static_cast<HintedRun*>(p);
  run->sp = HereSp();
  run->ok = HintedStackBounds(run->hint, run->sp, &run->ours);
  run->glibc = StackBoundsOf(pthread_self());
  if (run->ok) {
    // Inside the usable stack: readable (a guard page here would kill the test).
    const uintptr_t word = *reinterpret_cast<volatile const uintptr_t*>(run->ours.lo);
    (void)word;
    run->lo_readable = true;
  }
  return nullptr;
}

TEST(StackBoundsTest, ThreadsFromTheirCreatorsHintAgreeWithGlibc) {
  const uintptr_t page = TestPage();
  const HintedCase cases[] = {
      {"default attr", 0, SIZE_MAX, false},
      {"PTHREAD_STACK_MIN", static_cast<size_t>(PTHREAD_STACK_MIN), SIZE_MAX, false},
      {"not a page multiple", static_cast<size_t>(PTHREAD_STACK_MIN) + 100, SIZE_MAX, false},
      {"256 KiB, 64 KiB guard", 256 << 10, 64 << 10, false},
      {"1 MiB, no guard", 1 << 20, 0, false},
      // (Under a sanitizer 2 MiB: its pthread_create refuses, EINVAL, a stack
      // of the program's under its own minimum, 128 KiB plus TLS: 900 KiB
      // under TSan in CI, with a warning in the sanitizer log.)
      {"the program's own stack", testing::kUnderSanitizer ? 2 << 20 : 128 << 10, SIZE_MAX, true},
  };
  for (const HintedCase& c : cases) {
    SCOPED_TRACE(c.name);
    pthread_attr_t attr;
    ASSERT_EQ(pthread_attr_init(&attr), 0);
    void* own = nullptr;
    if (c.own_stack) {
      own = mmap(nullptr, c.stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(own, MAP_FAILED);
      ASSERT_EQ(pthread_attr_setstack(&attr, own, c.stack_size), 0);
    } else if (c.stack_size != 0) {
      ASSERT_EQ(pthread_attr_setstacksize(&attr, c.stack_size), 0);
    }
    if (c.guard != SIZE_MAX) {
      ASSERT_EQ(pthread_attr_setguardsize(&attr, c.guard), 0);
    }
    const bool default_attr = c.stack_size == 0;
    HintedRun run;
    run.hint = StackHintFor(default_attr ? nullptr : &attr);
    if (c.own_stack) {
      EXPECT_EQ(run.hint.user_lo, reinterpret_cast<uintptr_t>(own));
    } else {
      EXPECT_EQ(run.hint.user_lo, 0u);
    }
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, default_attr ? nullptr : &attr, HintedThread, &run), 0);
    pthread_join(t, nullptr);
    pthread_attr_destroy(&attr);
    if (own != nullptr) munmap(own, c.stack_size);
    if (!run.ok && testing::kUnderSanitizer) {
      // The sanitizers' pthread_create raises a stack smaller than their own
      // minimum (sanitizer_common's AdjustStackSize, 128 KiB plus TLS): the
      // stack is then not the size the hint says, and refusing the hint is
      // its job (CurrentStackBounds falls back to glibc). Only that refusal
      // is excused: glibc must show the bigger stack.
      ASSERT_NE(run.glibc.hi, 0u);
      EXPECT_GT(run.glibc.hi - run.glibc.lo, run.hint.size + page)
          << "a hint refused on a stack of the size it names, sp " << std::hex << run.sp;
      continue;
    }
    ASSERT_TRUE(run.ok) << "sp " << std::hex << run.sp;
    ASSERT_NE(run.glibc.hi, 0u);
    // Never outside glibc's stack...
    EXPECT_GE(run.ours.lo, run.glibc.lo);
    EXPECT_LE(run.ours.hi, (run.glibc.hi + page - 1) & ~(page - 1));
    EXPECT_TRUE(run.lo_readable);
    // ...and short of it by less than a page at either end (glibc may hand
    // out a bigger cached stack: then only the requested size is known).
    EXPECT_LT(run.glibc.hi - std::min(run.glibc.hi, run.ours.hi), page);
    EXPECT_GE(run.ours.hi - run.ours.lo + page, run.hint.size) << "hint " << run.hint.size;
    EXPECT_LT(run.ours.lo, run.sp);
  }
}

TEST(StackBoundsTest, AHintThatDoesNotHoldTheStackPointerIsRefused) {
  StackBounds b;
  StackHint elsewhere;
  elsewhere.user_lo = 4096;
  elsewhere.size = 4096;
  EXPECT_FALSE(HintedStackBounds(elsewhere, HereSp(), &b));
  EXPECT_FALSE(HintedStackBounds(StackHint{}, HereSp(), &b)) << "no size: unknown";
}

}  // namespace
}  // namespace dlprof
