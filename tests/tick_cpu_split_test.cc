// SplitTickCpuBySamples on hand-built profiles: one thread whose wall ticks
// found it in stage "read" while its CPU samples were in "decode".
#include "readers/tick_cpu_split.h"

#include <gtest/gtest.h>

#include <map>

namespace dlprof {
namespace {

constexpr int64_t kMs = 1000000;

struct Built {
  Profile p;
  uint32_t read = 0, decode = 0, running = 0;
};

Built Make() {
  Built m;
  m.p.processes.emplace_back();
  m.read = m.p.InternStagePath({m.p.InternStage("read")});
  m.decode = m.p.InternStagePath({m.p.InternStage("decode")});
  Location loc;
  loc.pseudo = true;
  loc.frames.push_back({"[running]", "", 0});
  m.running = m.p.InternStack({m.p.InternLocation(loc)});
  return m;
}

// A wall record ending at `end_ms`: `wall_ms` long, of which `cpu_ms` on a CPU.
void AddWall(Built* m, int64_t end_ms, uint32_t path, int64_t wall_ms, int64_t cpu_ms, bool on_cpu,
             uint32_t tid = 7) {
  Sample s;
  s.tid = tid;
  s.kind = SampleKind::kWall;
  s.on_cpu = on_cpu;
  s.stage_path = path;
  s.time_ns = end_ms * kMs;
  s.count = 0;
  s.wall_ns = wall_ms * kMs;
  s.cpu_ns = cpu_ms * kMs;
  m->p.samples.push_back(s);
}

void AddCpu(Built* m, int64_t t_ms, uint32_t path, int64_t periods = 1, uint32_t tid = 7) {
  Sample s;
  s.tid = tid;
  s.stage_path = path;
  s.time_ns = t_ms * kMs;
  s.count = periods;
  s.cpu_ns = periods * 10 * kMs;  // 100 Hz
  m->p.samples.push_back(s);
}

struct Row {
  int64_t cpu = 0, wall = 0, wait = 0;
};

std::map<uint32_t, Row> WallByPath(const Profile& p, uint32_t tid = 7) {
  std::map<uint32_t, Row> out;
  for (const Sample& s : p.samples) {
    if (s.kind != SampleKind::kWall || s.tid != tid) continue;
    out[s.stage_path].cpu += s.cpu_ns;
    out[s.stage_path].wall += s.wall_ns;
    out[s.stage_path].wait += s.wait_ns;
  }
  return out;
}

// 40 ticks of 10 ms blocked in read, each with 2.5 ms of CPU (100 ms in
// all); 10 samples of decode, one every 4 ticks (100 ms of CPU): the CPU is
// decode's, and read keeps its blocked wall time.
TEST(TickCpuSplit, CpuTheTicksGaveTheWaitingStageGoesWhereTheSamplesWere) {
  Built m = Make();
  for (int i = 1; i <= 40; ++i) {
    AddWall(&m, 10 * i, m.read, 10, 0, false);
    m.p.samples.back().cpu_ns = 5 * kMs / 2;
  }
  for (int i = 1; i <= 10; ++i) AddCpu(&m, 40 * i - 3, m.decode);
  const auto before = WallByPath(m.p);
  const int64_t moved = SplitTickCpuBySamples(&m.p, 0, m.running);
  EXPECT_EQ(moved, 100 * kMs);
  const auto after = WallByPath(m.p);
  EXPECT_EQ(after.at(m.read).cpu, 0);
  EXPECT_EQ(after.at(m.decode).cpu, 100 * kMs);
  // On-CPU wall time moves with the CPU; the blocked time stays with read.
  EXPECT_EQ(after.at(m.decode).wall, 100 * kMs);
  EXPECT_EQ(after.at(m.read).wall, before.at(m.read).wall - 100 * kMs);
  EXPECT_EQ(after.at(m.read).wall - after.at(m.read).cpu, before.at(m.read).wall - before.at(m.read).cpu);
  for (const Sample& s : m.p.samples) {
    if (s.kind == SampleKind::kWall && s.stage_path == m.decode) {
      EXPECT_TRUE(s.on_cpu);
      EXPECT_EQ(s.stack, m.running);
    }
  }
}

// The samples see user time only: the clocks' CPU they do not account for
// (the read's system calls) stays where the ticks put it.
TEST(TickCpuSplit, CpuTheSamplesDidNotSeeStaysWithTheTicks) {
  Built m = Make();
  for (int i = 1; i <= 20; ++i) AddWall(&m, 10 * i, m.read, 10, 5, false);  // 100 ms of CPU
  for (int i = 1; i <= 4; ++i) AddCpu(&m, 50 * i - 1, m.decode, 2);          // 80 ms of it
  EXPECT_EQ(SplitTickCpuBySamples(&m.p, 0, m.running), 80 * kMs);
  const auto after = WallByPath(m.p);
  EXPECT_EQ(after.at(m.decode).cpu, 80 * kMs);
  EXPECT_EQ(after.at(m.read).cpu, 20 * kMs);
}

// Samples that stand for more CPU than the clocks counted share the clocks'
// time by their periods, and nothing is made up.
TEST(TickCpuSplit, SamplesStandingForMoreThanTheClocksShareTheClocksTime) {
  Built m = Make();
  for (int i = 1; i <= 20; ++i) AddWall(&m, 10 * i, m.read, 10, 3, false);  // 60 ms of CPU
  for (int i = 1; i <= 6; ++i) AddCpu(&m, 30 * i, m.decode);                 // 60 ms
  for (int i = 1; i <= 6; ++i) AddCpu(&m, 30 * i + 5, m.read);               // 60 ms
  SplitTickCpuBySamples(&m.p, 0, m.running);
  const auto after = WallByPath(m.p);
  EXPECT_NEAR(static_cast<double>(after.at(m.decode).cpu), 30.0 * kMs, 1000);
  EXPECT_NEAR(static_cast<double>(after.at(m.read).cpu), 30.0 * kMs, 1000);
  EXPECT_NEAR(static_cast<double>(after.at(m.decode).cpu + after.at(m.read).cpu), 60.0 * kMs, 1000);
}

// Samples in the ticks' own stage, of another thread, or outside every
// record move nothing; a wait for a core is never more than a record leaves.
TEST(TickCpuSplit, OnlyTheThreadsOwnSamplesInItsRecordsCount) {
  Built m = Make();
  for (int i = 1; i <= 20; ++i) AddWall(&m, 100 + 10 * i, m.read, 10, 8, true);
  m.p.samples.back().wait_ns = 2 * kMs;
  for (int i = 1; i <= 16; ++i) AddCpu(&m, 100 + 10 * i, m.read);
  AddCpu(&m, 50, m.decode);                    // before the first record
  AddCpu(&m, 150, m.decode, 1, /*tid=*/8);     // another thread
  AddCpu(&m, 400, m.decode);                   // after the last
  EXPECT_EQ(SplitTickCpuBySamples(&m.p, 0, m.running), 0);
  const auto after = WallByPath(m.p);
  EXPECT_EQ(after.size(), 1u);
  EXPECT_EQ(after.at(m.read).cpu, 160 * kMs);
}

// A thread whose stages change halfway: each stretch of records is shared
// by its own samples, not by the run's.
TEST(TickCpuSplit, EachStretchIsSharedByItsOwnSamples) {
  Built m = Make();
  // 0-400 ms: ticks in read, samples in decode; 400-800 ms: ticks and
  // samples in read. 10 ms of CPU per 10 ms tick in both halves.
  for (int i = 1; i <= 80; ++i) AddWall(&m, 10 * i, m.read, 10, 10, true);
  for (int i = 1; i <= 40; ++i) AddCpu(&m, 10 * i, m.decode);
  for (int i = 41; i <= 80; ++i) AddCpu(&m, 10 * i, m.read);
  SplitTickCpuBySamples(&m.p, 0, m.running);
  const auto after = WallByPath(m.p);
  EXPECT_EQ(after.at(m.decode).cpu, 400 * kMs);
  EXPECT_EQ(after.at(m.read).cpu, 400 * kMs);
  for (const Sample& s : m.p.samples) {
    if (s.kind == SampleKind::kWall && s.stage_path == m.decode) {
      EXPECT_LE(s.time_ns, 400 * kMs);
    }
  }
}

}  // namespace
}  // namespace dlprof
