// verdict.bottleneck_functions on hand-built profiles whose answer is known
// by construction (reports/analysis_functions.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "readers/profile.h"
#include "reports/analysis_functions.h"

namespace dlprof {
namespace {

struct Fn {
  std::string name, file, module;
  bool python = false;
  int start_line = 0, line = 0;
};

const Fn kRotate{"ImagingRotate", "", "/usr/lib/python3/dist-packages/PIL/_imaging.so"};
const Fn kAugment{"augment_image", "/data/dataset.py", "", true, 116, 120};
const Fn kDecode{"decode_image", "/data/dataset.py", "", true, 107, 110};
const Fn kOpen{"Storage.read", "/data/dataset.py", "", true, 99, 101};
const Fn kGetItem{"JpegFolder.__getitem__", "/data/dataset.py", "", true, 160, 165};
const Fn kWorkerLoop{"_worker_loop", "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py",
                     "", true, 250, 300};
const Fn kEval{"_PyEval_EvalFrameDefault", "", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"};
const Fn kLibcStart{"__libc_start_main_impl", "../csu/libc-start.c", "/usr/lib/x86_64-linux-gnu/libc.so.6"};
const Fn kUnknown{"libfoo.so+0x1234", "", "/opt/libfoo.so"};

class Builder {
 public:
  Builder() {
    p_.processes.resize(2);  // 0: the training process, 1: a worker
  }
  // One sample of `ns` of CPU in `stage` of process `process`, stack leaf first.
  void Cpu(uint32_t process, const std::string& stage, const std::vector<Fn>& stack, int64_t ns) {
    Sample s;
    s.process = process;
    s.kind = SampleKind::kCpu;
    s.cpu_ns = ns;
    s.stage_path = stage.empty() ? 0 : p_.InternStagePath({p_.InternStage(stage)});
    s.stack = Stack(stack);
    p_.samples.push_back(s);
  }
  void Blocked(uint32_t process, const std::string& stage, const std::vector<Fn>& stack, int64_t wall_ns,
               int64_t cpu_ns) {
    Sample s;
    s.process = process;
    s.kind = SampleKind::kWall;
    s.on_cpu = false;
    s.wall_ns = wall_ns;
    s.cpu_ns = cpu_ns;
    s.stage_path = p_.InternStagePath({p_.InternStage(stage)});
    s.stack = Stack(stack);
    p_.samples.push_back(s);
  }
  const Profile& profile() const { return p_; }

 private:
  uint32_t Stack(const std::vector<Fn>& stack) {
    std::vector<uint32_t> ids;
    for (const Fn& f : stack) {
      Location l;
      l.module = f.module;
      l.python = f.python;
      l.module_offset = f.python ? 0 : std::hash<std::string>()(f.name) % 100000;
      Frame fr;
      fr.function = f.name;
      fr.file = f.file;
      fr.python = f.python;
      fr.start_line = f.start_line;
      fr.line = f.line;
      l.frames.push_back(fr);
      ids.push_back(p_.InternLocation(l));
    }
    return p_.InternStack(ids);
  }
  Profile p_;
};

const std::vector<std::string> kRoles = {"main", "worker"};

std::vector<std::string> Names(const std::vector<CulpritFunction>& fs) {
  std::vector<std::string> names;
  for (const CulpritFunction& f : fs) names.push_back(f.name);
  return names;
}

TEST(BottleneckFunctions, InnermostTrunkFirstThenByInclusiveShareWithoutTheMachinery) {
  Builder b;
  const std::vector<Fn> base = {kGetItem, kEval, kWorkerLoop, kEval, kLibcStart};
  auto with = [&](std::vector<Fn> top) {
    top.insert(top.end(), base.begin(), base.end());
    return top;
  };
  b.Cpu(1, "fetch", with({kRotate, kAugment}), 600);
  b.Cpu(1, "fetch", with({kDecode}), 300);
  b.Cpu(1, "fetch", with({kOpen}), 100);
  // Not the bottleneck's: another stage, and the training process.
  b.Cpu(1, "collate", with({kDecode}), 5000);
  b.Cpu(0, "fetch", with({kDecode}), 5000);
  const auto fs = BottleneckFunctions(b.profile(), kRoles, "fetch", "worker", "cpu", 5);
  // __getitem__ is on every stack (the worker loop, the interpreter and the
  // start frames are left out); the rotate and augment tie at 60%, the inner
  // one first.
  ASSERT_EQ(Names(fs), (std::vector<std::string>{"JpegFolder.__getitem__", "ImagingRotate",
                                                 "augment_image", "decode_image", "Storage.read"}));
  EXPECT_DOUBLE_EQ(fs[0].share, 1.0);
  EXPECT_DOUBLE_EQ(fs[1].share, 0.6);
  EXPECT_DOUBLE_EQ(fs[3].share, 0.3);
  EXPECT_DOUBLE_EQ(fs[4].share, 0.1);
  EXPECT_EQ(fs[2].file, "/data/dataset.py");
  EXPECT_EQ(fs[2].line, 116);  // the function's first line
  EXPECT_EQ(BottleneckFunctions(b.profile(), kRoles, "fetch", "worker", "cpu", 2).size(), 2u);
}

TEST(BottleneckFunctions, OfTheTrunkOnlyTheInnermostIsKept) {
  Builder b;
  // augment_image under __getitem__ on 95% of the stacks: both are trunk,
  // and __getitem__ only leads to augment_image.
  b.Cpu(1, "fetch", {kRotate, kAugment, kGetItem}, 950);
  b.Cpu(1, "fetch", {kAugment, kGetItem}, 0);  // no CPU: not weighed
  b.Cpu(1, "fetch", {kOpen, kGetItem}, 50);
  const auto fs = BottleneckFunctions(b.profile(), kRoles, "fetch", "worker", "cpu", 5);
  EXPECT_EQ(Names(fs), (std::vector<std::string>{"ImagingRotate", "Storage.read"}));
}

// 10% of the stacks cut short under __getitem__ (their outer frames lost):
// the trunk is what the whole stacks share, found at 90% as at 100%.
TEST(BottleneckFunctions, StacksCutShortDoNotHideTheTrunk) {
  Builder b;
  const Fn train{"train", "/data/train.py", "", true, 149, 150};
  b.Cpu(0, "fetch", {kRotate, kAugment, kGetItem, train}, 500);
  b.Cpu(0, "fetch", {kAugment, kGetItem, train}, 200);
  b.Cpu(0, "fetch", {kDecode, kGetItem, train}, 198);
  b.Cpu(0, "fetch", {kAugment}, 102);  // cut: no __getitem__, no train
  const auto fs = BottleneckFunctions(b.profile(), kRoles, "fetch", "main", "cpu", 5);
  ASSERT_FALSE(fs.empty());
  EXPECT_EQ(fs[0].name, "augment_image") << ::testing::PrintToString(Names(fs));
  for (const CulpritFunction& f : fs) EXPECT_NE(f.name, "train");
}

TEST(BottleneckFunctions, TheTrunkGoesDownIntoACalleeHoldingMostOfItsTimeButNotALibrarysChain) {
  Builder b;
  // __getitem__ on every stack (the trunk); augment_image 83% of it, and
  // under augment_image ImagingRotate 50% (not most of it): augment_image
  // replaces the trunk, ImagingRotate stays beside it.
  b.Cpu(1, "fetch", {kRotate, kAugment, kGetItem}, 500);
  b.Cpu(1, "fetch", {kAugment, kGetItem}, 330);
  b.Cpu(1, "fetch", {kDecode, kGetItem}, 170);
  const auto fs = BottleneckFunctions(b.profile(), kRoles, "fetch", "worker", "cpu", 5);
  EXPECT_EQ(Names(fs), (std::vector<std::string>{"augment_image", "ImagingRotate", "decode_image"}));
  // At 70% the callee does not hold most of the trunk's time: the trunk stays.
  Builder c;
  c.Cpu(1, "fetch", {kAugment, kGetItem}, 700);
  c.Cpu(1, "fetch", {kDecode, kGetItem}, 300);
  EXPECT_EQ(Names(BottleneckFunctions(c.profile(), kRoles, "fetch", "worker", "cpu", 5)),
            (std::vector<std::string>{"JpegFolder.__getitem__", "augment_image", "decode_image"}));
}

TEST(BottleneckFunctions, RecursionCountsOncePerStackAndSmallOnesAndUnsymbolizedAreLeftOut) {
  Builder b;
  b.Cpu(1, "parse", {kUnknown, kAugment, kAugment, kAugment, kGetItem}, 500);
  b.Cpu(1, "parse", {kDecode, kGetItem}, 480);
  b.Cpu(1, "parse", {kOpen, kGetItem}, 20);  // 2%: under the 5% floor
  const auto fs = BottleneckFunctions(b.profile(), kRoles, "parse", "worker", "cpu", 5);
  ASSERT_EQ(Names(fs), (std::vector<std::string>{"JpegFolder.__getitem__", "augment_image", "decode_image"}));
  EXPECT_DOUBLE_EQ(fs[1].share, 0.5);
}

TEST(BottleneckFunctions, AnIoBottleneckWeighsBlockedTimeNotCpu) {
  Builder b;
  // 80 ns blocked under Storage.read, 20 under decode; CPU samples
  // (decode) do not count for an io bottleneck.
  b.Blocked(1, "fetch", {kOpen, kGetItem}, 90, 10);
  b.Blocked(1, "fetch", {kDecode, kGetItem}, 30, 10);
  b.Cpu(1, "fetch", {kDecode, kGetItem}, 10000);
  const auto fs = BottleneckFunctions(b.profile(), kRoles, "fetch", "worker", "io", 5);
  // __getitem__ is the trunk, and 80% of it is in Storage.read: the trunk
  // goes down into it, and __getitem__ is not listed.
  ASSERT_EQ(Names(fs), (std::vector<std::string>{"Storage.read", "decode_image"}));
  EXPECT_DOUBLE_EQ(fs[0].share, 0.8);
  // Nothing of the stage, no stage of that name: nothing.
  EXPECT_TRUE(BottleneckFunctions(b.profile(), kRoles, "fetch", "main", "io", 5).empty());
  EXPECT_TRUE(BottleneckFunctions(b.profile(), kRoles, "nope", "worker", "cpu", 5).empty());
}

TEST(BottleneckFunctions, AnIoBottlenecksBlockingCallWrapperInLibcIsNotNamed) {
  Builder b;
  // Blocked stacks as the collector walks them: "[off-cpu: read]" (a pseudo
  // frame), libc's read, then the program. The wrapper is the call the
  // stage already names; its caller is what to change. For a cpu
  // bottleneck a libc function (memcpy) may be the culprit and stays.
  const Fn pseudo{"[off-cpu: read]", "", ""};
  const Fn libc_read{"__libc_read", "../sysdeps/unix/sysv/linux/read.c",
                     "/usr/lib/x86_64-linux-gnu/libc.so.6"};
  const Fn memcpy_fn{"__memmove_avx_unaligned_erms", "", "/usr/lib/x86_64-linux-gnu/libc.so.6"};
  b.Blocked(1, "fetch", {pseudo, libc_read, kOpen, kGetItem}, 90, 10);
  b.Blocked(1, "fetch", {pseudo, libc_read, kDecode, kGetItem}, 30, 10);
  EXPECT_EQ(Names(BottleneckFunctions(b.profile(), kRoles, "fetch", "worker", "io", 5)),
            (std::vector<std::string>{"Storage.read", "decode_image"}));
  b.Cpu(1, "decode", {memcpy_fn, kDecode, kGetItem}, 100);
  EXPECT_EQ(Names(BottleneckFunctions(b.profile(), kRoles, "decode", "worker", "cpu", 5)),
            (std::vector<std::string>{"__memmove_avx_unaligned_erms"}));
}

TEST(BottleneckFunctions, WithNoStageNamedEverySampleOfTheRoleCounts) {
  Builder b;
  b.Cpu(1, "", {kRotate, kAugment, kGetItem, kWorkerLoop}, 700);
  b.Cpu(1, "fetch", {kDecode, kGetItem, kWorkerLoop}, 300);
  b.Cpu(0, "", {kOpen}, 5000);  // the training process: not a worker
  const auto fs = BottleneckFunctions(b.profile(), kRoles, "", "worker", "cpu", 5);
  ASSERT_EQ(Names(fs), (std::vector<std::string>{"JpegFolder.__getitem__", "ImagingRotate",
                                                 "augment_image", "decode_image"}));
  EXPECT_DOUBLE_EQ(fs[1].share, 0.7);
}

}  // namespace
}  // namespace dlprof
