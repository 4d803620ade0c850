// ShareUnsampledTicks on hand-built profiles: one thread, stages "a" and "b",
// 1 ms periods, and samples whose counts carry periods lost in the kernel.
#include "readers/unsampled_ticks.h"

#include <gtest/gtest.h>

#include <map>

namespace dlprof {
namespace {

constexpr int64_t kMs = 1000000;

struct Built {
  Profile p;
  uint32_t a = 0, b = 0, path_a = 0, path_b = 0;
};

Built Make() {
  Built m;
  m.p.processes.emplace_back();
  m.a = m.p.InternStage("a");
  m.b = m.p.InternStage("b");
  m.path_a = m.p.InternStagePath({m.a});
  m.path_b = m.p.InternStagePath({m.b});
  return m;
}

void AddSample(Built* m, int64_t t_ms, uint32_t path, int64_t count) {
  Sample s;
  s.tid = 7;
  s.stack = 0;
  s.stage_path = path;
  s.time_ns = t_ms * kMs;
  s.count = count;
  s.cpu_ns = count * kMs;
  m->p.samples.push_back(s);
}

void AddStage(Built* m, uint32_t stage, int64_t begin_ms, int64_t end_ms) {
  Interval iv;
  iv.tid = 7;
  iv.kind = IntervalKind::kStage;
  iv.stage = stage;
  iv.begin_ns = begin_ms * kMs;
  iv.end_ns = end_ms * kMs;
  m->p.intervals.push_back(iv);
}

std::map<uint32_t, int64_t> CountsByPath(const Profile& p) {
  std::map<uint32_t, int64_t> out;
  for (const Sample& s : p.samples) out[s.stage_path] += s.count;
  return out;
}

// a [0, 10) b [10, 16) a [16, 20): samples in a at 9 ms and 20 ms, the second
// standing for the 11 periods in between (b lived in the kernel).
TEST(UnsampledTicks, PeriodsOfAGapGoToTheStagesItCrossedByTime) {
  Built m = Make();
  AddStage(&m, m.a, 0, 10);
  AddStage(&m, m.b, 10, 16);
  AddStage(&m, m.a, 16, 30);
  AddSample(&m, 9, m.path_a, 1);
  AddSample(&m, 20, m.path_a, 11);
  const int64_t moved = ShareUnsampledTicks(&m.p, 0, kMs);
  EXPECT_EQ(moved, 6);
  auto counts = CountsByPath(m.p);
  EXPECT_EQ(counts[m.path_b], 6);   // 6 of the gap's 11 ms
  EXPECT_EQ(counts[m.path_a], 6);   // 1 + the gap's 1 ms before b and 4 ms after
  // The share is a sample of b with the pseudo stack, in the middle of b.
  bool found = false;
  for (const Sample& s : m.p.samples) {
    if (s.stage_path != m.path_b) continue;
    found = true;
    EXPECT_EQ(s.time_ns, 13 * kMs);
    EXPECT_EQ(s.cpu_ns, 6 * kMs);
    ASSERT_NE(s.stack, 0u);
    const Location& loc = m.p.locations[m.p.stacks[s.stack][0]];
    EXPECT_TRUE(loc.pseudo);
    EXPECT_EQ(loc.frames[0].function, "[in the kernel: stack not sampled]");
  }
  EXPECT_TRUE(found);
}

TEST(UnsampledTicks, AGapTheThreadSpentBlockedKeepsItsPeriods) {
  Built m = Make();
  AddStage(&m, m.a, 0, 10);
  AddStage(&m, m.b, 10, 100);
  AddStage(&m, m.a, 100, 120);
  AddSample(&m, 9, m.path_a, 1);
  // 3 periods of CPU over 92 ms of wall, and the wall ticks saw the thread
  // blocked in b: its wall time there is not CPU time.
  AddSample(&m, 101, m.path_a, 3);
  Sample tick;
  tick.tid = 7;
  tick.kind = SampleKind::kWall;
  tick.on_cpu = false;
  tick.stage_path = m.path_b;
  tick.time_ns = 90 * kMs;
  tick.wall_ns = 70 * kMs;
  m.p.samples.push_back(tick);
  EXPECT_EQ(ShareUnsampledTicks(&m.p, 0, kMs), 0);
  EXPECT_EQ(CountsByPath(m.p)[m.path_a], 4);
}

TEST(UnsampledTicks, AGapSpentWaitingForACoreIsStillShared) {
  Built m = Make();
  AddStage(&m, m.a, 0, 10);
  AddStage(&m, m.b, 10, 50);
  AddStage(&m, m.a, 50, 60);
  AddSample(&m, 9, m.path_a, 1);
  // 20 periods of CPU over 42 ms: preempted half the time, never blocked.
  AddSample(&m, 51, m.path_a, 20);
  EXPECT_GT(ShareUnsampledTicks(&m.p, 0, kMs), 15);
  EXPECT_GT(CountsByPath(m.p)[m.path_b], 15);
}

TEST(UnsampledTicks, AGapWithoutAChangeOfStageIsLeftAlone) {
  Built m = Make();
  AddStage(&m, m.a, 0, 30);
  AddSample(&m, 9, m.path_a, 1);
  AddSample(&m, 20, m.path_a, 11);
  EXPECT_EQ(ShareUnsampledTicks(&m.p, 0, kMs), 0);
  EXPECT_EQ(m.p.samples.size(), 2u);
}

TEST(UnsampledTicks, EventsThatDoNotLeadToTheSamplesStageMoveNothing) {
  Built m = Make();
  // The events say the gap ends in b, the sample says a: events were lost.
  AddStage(&m, m.a, 0, 10);
  AddStage(&m, m.b, 10, 30);
  AddSample(&m, 9, m.path_a, 1);
  AddSample(&m, 20, m.path_a, 11);
  EXPECT_EQ(ShareUnsampledTicks(&m.p, 0, kMs), 0);
  EXPECT_EQ(CountsByPath(m.p)[m.path_a], 12);
}

TEST(UnsampledTicks, ASampleWhoseWholeGapWasAnotherStageIsReplacedByIt) {
  Built m = Make();
  // a until 1 us after the first sample, b until 1 us before the second:
  // its 10 periods are all b's, none is a's.
  constexpr int64_t kUs = 1000;
  auto stage = [&](uint32_t id, int64_t begin_ns, int64_t end_ns) {
    Interval iv;
    iv.tid = 7;
    iv.kind = IntervalKind::kStage;
    iv.stage = id;
    iv.begin_ns = begin_ns;
    iv.end_ns = end_ns;
    m.p.intervals.push_back(iv);
  };
  stage(m.a, 0, 10 * kMs + kUs);
  stage(m.b, 10 * kMs + kUs, 20 * kMs - kUs);
  stage(m.a, 20 * kMs - kUs, 30 * kMs);
  AddSample(&m, 10, m.path_a, 1);
  AddSample(&m, 20, m.path_a, 10);
  EXPECT_EQ(ShareUnsampledTicks(&m.p, 0, kMs), 10);
  auto counts = CountsByPath(m.p);
  EXPECT_EQ(counts[m.path_b], 10);
  EXPECT_EQ(counts[m.path_a], 1);
  // The emptied sample is gone, not kept with a count of 0.
  EXPECT_EQ(m.p.samples.size(), 2u);
  for (const Sample& s : m.p.samples) EXPECT_GT(s.count, 0);
}

}  // namespace
}  // namespace dlprof
