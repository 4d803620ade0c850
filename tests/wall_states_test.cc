// The wall records' three states in the file format (docs/FORMAT.md): a
// version-2 file's WALL_STATES records carry the wait for a core; a
// version-1 file (WALL_RUNS) still reads, with no wait; a version-3 file's
// WALL_STACKS records carry the stack a blocked thread was in; a newer
// version is refused. Files are written here chunk by chunk.
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <utility>
#include <vector>

#include <dlprof/format.h>

#include "core/varint.h"
#include "readers/dlprof_reader.h"
#include "readers/profile.h"
#include "reports/analysis.h"

namespace dlprof {
namespace {

constexpr int64_t kMs = 1000000;

class File {
 public:
  explicit File(uint32_t version) {
    data_ = std::string(DLPROF_FILE_MAGIC, 8);
    PutU32(version);
    PutU32(0);
  }
  void Chunk(uint32_t type, const std::string& payload) {
    PutU32(DLPROF_CHUNK_MAGIC);
    PutU32(type);
    PutU32(static_cast<uint32_t>(payload.size()));
    PutU32(static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size()))));
    data_ += payload;
  }
  // pid 1, one thread (index 0, tid 7), stage "work" as path 1.
  void Preamble() {
    std::string b;
    const std::vector<std::pair<std::string, std::string>> fields = {
        {"pid", "1"}, {"role", "main"}, {"start_ns", "1000000000"}, {"cpus", "2"}};
    PutVarint(&b, fields.size());
    for (const auto& [k, v] : fields) PutBytes(&b, k), PutBytes(&b, v);
    Chunk(DLPROF_CHUNK_PROCESS, b);
    b.clear();
    PutVarint(&b, 1), PutVarint(&b, 0), PutVarint(&b, 7), PutBytes(&b, "t");
    Chunk(DLPROF_CHUNK_THREADS, b);
    b.clear();
    PutVarint(&b, 1), PutVarint(&b, 1), PutBytes(&b, "work");
    Chunk(DLPROF_CHUNK_STAGES, b);
    b.clear();
    PutVarint(&b, 1), PutVarint(&b, 1), PutVarint(&b, 1), PutVarint(&b, 1);
    Chunk(DLPROF_CHUNK_STAGE_PATHS, b);
  }
  // One run of 10 ticks: 100 ms wall, `cpu_ms` running, `wait_ms` waiting
  // for a core (WALL_STATES only), in state `state`.
  void Run(bool states, int64_t cpu_ms, int64_t wait_ms, uint64_t state) {
    std::string b;
    PutVarint(&b, 1100 * kMs), PutVarint(&b, 1);
    PutVarint(&b, ZigZag(0)), PutVarint(&b, 0), PutVarint(&b, 1), PutVarint(&b, 10);
    PutVarint(&b, 100 * kMs), PutVarint(&b, cpu_ms * kMs);
    if (states) PutVarint(&b, wait_ms * kMs);
    PutVarint(&b, state);
    Chunk(states ? DLPROF_CHUNK_WALL_STATES : DLPROF_CHUNK_WALL_RUNS, b);
  }
  // Version 3: the same run with a stack id (WALL_STACKS).
  void RunWithStack(int64_t cpu_ms, int64_t wait_ms, uint64_t state, uint64_t stack) {
    std::string b;
    PutVarint(&b, 1100 * kMs), PutVarint(&b, 1);
    PutVarint(&b, ZigZag(0)), PutVarint(&b, 0), PutVarint(&b, 1), PutVarint(&b, 10);
    PutVarint(&b, 100 * kMs), PutVarint(&b, cpu_ms * kMs), PutVarint(&b, wait_ms * kMs);
    PutVarint(&b, state), PutVarint(&b, stack);
    Chunk(DLPROF_CHUNK_WALL_STACKS, b);
  }
  // Stack `id`: `words`, leaf first (pcs, then Python frame words).
  void Stack(uint64_t id, const std::vector<uint64_t>& words) {
    std::string b;
    PutVarint(&b, id), PutVarint(&b, 1), PutVarint(&b, words.size());
    uint64_t prev = 0;
    for (uint64_t w : words) {
      PutVarint(&b, ZigZag(static_cast<int64_t>(w - prev)));
      prev = w;
    }
    Chunk(DLPROF_CHUNK_STACKS, b);
  }
  // /bin/prog mapped at [0x400000, 0x500000), and Python code 1: f in f.py.
  void MapsAndCode() {
    std::string b;
    PutVarint(&b, 1), PutVarint(&b, 0x400000), PutVarint(&b, 0x500000), PutVarint(&b, 0);
    PutBytes(&b, "/bin/prog"), PutBytes(&b, "");
    Chunk(DLPROF_CHUNK_MAPS, b);
    b.clear();
    PutVarint(&b, 1), PutVarint(&b, 1), PutBytes(&b, "slow_io"), PutBytes(&b, "f.py");
    PutVarint(&b, 3);
    Chunk(DLPROF_CHUNK_PY_CODES, b);
  }
  size_t size() const { return data_.size(); }
  const std::string& data() const { return data_; }

 private:
  void PutU32(uint32_t v) {
    for (int i = 0; i < 4; ++i) data_.push_back(static_cast<char>(v >> (8 * i)));
  }
  std::string data_;
};

const Sample* OnlyWallSample(const Profile& p) {
  const Sample* found = nullptr;
  for (const Sample& s : p.samples) {
    if (s.kind != SampleKind::kWall) continue;
    if (found != nullptr) return nullptr;
    found = &s;
  }
  return found;
}

TEST(ReportWallStates, AVersion2RecordSaysHowLongTheThreadWaitedForACore) {
  File f(2);
  f.Preamble();
  f.Run(/*states=*/true, 40, 55, 0);
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(f.data(), "v2.dlprof", &p, &error)) << error;
  const Sample* s = OnlyWallSample(p);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->wall_ns, 100 * kMs);
  EXPECT_EQ(s->cpu_ns, 40 * kMs);
  EXPECT_EQ(s->wait_ns, 55 * kMs);
  EXPECT_TRUE(s->on_cpu);
  const Analysis a = Analyze(p);
  ASSERT_EQ(a.stages.size(), 1u);
  EXPECT_NEAR(a.stages[0].cpu_wait_fraction, 0.55, 1e-9);
  // The 5 ms it neither ran nor waited for a core it was blocked, though
  // the ticks found it running: the row's parts fill its wall time.
  EXPECT_NEAR(a.stages[0].offcpu_fraction, 0.05, 1e-9);
  EXPECT_NEAR(a.stages[0].self_cpu_s, 0.040, 1e-9);
}

TEST(ReportWallStates, ABlockedRecordsWaitForACoreIsNotBlockedTime) {
  File f(2);
  f.Preamble();
  f.Run(/*states=*/true, 10, 20, 1 + 0 /* read */);
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(f.data(), "v2.dlprof", &p, &error)) << error;
  const Analysis a = Analyze(p);
  ASSERT_EQ(a.stages.size(), 1u);
  EXPECT_NEAR(a.stages[0].cpu_wait_fraction, 0.20, 1e-9);
  // Nor is the 10 ms it ran: blocked is what is left, 70 of 100 ms.
  EXPECT_NEAR(a.stages[0].offcpu_fraction, 0.70, 1e-9);
  EXPECT_EQ(a.stages[0].top_blocking_call, "read");
}

TEST(ReportWallStates, AVersion1FileStillReadsWithNoWait) {
  File f(1);
  f.Preamble();
  f.Run(/*states=*/false, 40, 0, 0);
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(f.data(), "v1.dlprof", &p, &error)) << error;
  const Sample* s = OnlyWallSample(p);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->wall_ns, 100 * kMs);
  EXPECT_EQ(s->cpu_ns, 40 * kMs);
  EXPECT_EQ(s->wait_ns, 0);
  const Analysis a = Analyze(p);
  ASSERT_EQ(a.stages.size(), 1u);
  EXPECT_EQ(a.stages[0].cpu_wait_fraction, 0);
  EXPECT_FALSE(a.contention.measured);
  EXPECT_FALSE(a.verdict.cpu_saturated);
}

TEST(ReportWallStates, AWaitLongerThanTheRecordLeavesIsCut) {
  File f(2);
  f.Preamble();
  f.Run(/*states=*/true, 70, 500, 0);  // damaged or hostile: 70 + 500 > 100
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(f.data(), "bad.dlprof", &p, &error)) << error;
  const Sample* s = OnlyWallSample(p);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->wait_ns, 30 * kMs);
}

TEST(ReportWallStates, AVersion3BlockedRecordCarriesItsStackUnderThePseudoFrame) {
  File f(3);
  f.Preamble();
  const uint64_t py = DLPROF_PY_FRAME_BIT | DLPROF_PY_ENTRY_BIT | (uint64_t{5} << 32) | 1;
  f.Stack(1, {0x401000, 0x402000, py});
  f.RunWithStack(10, 0, 1 + 0 /* read */, 1);
  f.MapsAndCode();  // after the stack and the record, as the runtime's flush writes them
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(f.data(), "v3.dlprof", &p, &error)) << error;
  for (const std::string& w : p.processes[0].warnings) {
    EXPECT_EQ(w.find("stack id"), std::string::npos) << w;
  }
  const Sample* s = OnlyWallSample(p);
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(s->on_cpu);
  const auto& stack = p.stacks[s->stack];
  ASSERT_EQ(stack.size(), 4u);
  const Location& leaf = p.locations[stack[0]];
  EXPECT_TRUE(leaf.pseudo);
  ASSERT_EQ(leaf.frames.size(), 1u);
  EXPECT_EQ(leaf.frames[0].function, "[off-cpu: read]");
  EXPECT_EQ(p.locations[stack[1]].module, "/bin/prog");
  EXPECT_EQ(p.locations[stack[1]].module_offset, 0x1000u);
  EXPECT_EQ(p.locations[stack[2]].module_offset, 0x2000u);
  const Location& python = p.locations[stack[3]];
  EXPECT_TRUE(python.python);
  ASSERT_EQ(python.frames.size(), 1u);
  EXPECT_EQ(python.frames[0].function, "slow_io");
  EXPECT_EQ(python.frames[0].file, "f.py");
  EXPECT_EQ(python.frames[0].line, 5);
  // The analysis still names the call from the leaf.
  const Analysis a = Analyze(p);
  ASSERT_EQ(a.stages.size(), 1u);
  EXPECT_EQ(a.stages[0].top_blocking_call, "read");
}

TEST(ReportWallStates, AStackIdNoChunkDefinedIsRefusedWithAWarning) {
  File f(3);
  f.Preamble();
  f.Stack(1, {0x401000});
  const size_t offset = f.size();
  f.RunWithStack(10, 0, 1 + 0, 7);  // stack 7 was never defined
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(f.data(), "bad.dlprof", &p, &error)) << error;
  const Sample* s = OnlyWallSample(p);
  ASSERT_NE(s, nullptr);
  // The record stays, with the pseudo frame alone.
  EXPECT_EQ(s->wall_ns, 100 * kMs);
  ASSERT_EQ(p.stacks[s->stack].size(), 1u);
  EXPECT_EQ(p.locations[p.stacks[s->stack][0]].frames[0].function, "[off-cpu: read]");
  bool warned = false;
  for (const std::string& w : p.processes[0].warnings) {
    warned = warned || (w.find("bad.dlprof: offset " + std::to_string(offset) + ": 1 wall record "
                               "names a stack id") != std::string::npos);
  }
  EXPECT_TRUE(warned) << ::testing::PrintToString(p.processes[0].warnings);
}

TEST(ReportWallStates, ANewerVersionIsRefused) {
  File f(DLPROF_FORMAT_VERSION + 1);
  f.Preamble();
  Profile p;
  std::string error;
  EXPECT_FALSE(ReadDlprofBuffer(f.data(), "v4.dlprof", &p, &error));
  EXPECT_NE(error.find("unsupported format version"), std::string::npos) << error;
}

}  // namespace
}  // namespace dlprof
