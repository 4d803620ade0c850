// The pprof writer and reader: a round trip keeps samples, labels and frames;
// the real `go tool pprof` reads what we write and shows the right numbers;
// what Go writes we read; truncated input keeps its complete samples.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "readers/pprof_reader.h"
#include "readers/profile.h"
#include "reports/pprof_wire.h"
#include "reports/pprof_writer.h"
#include "tests/support/files.h"

namespace dlprof {
namespace {

using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;

bool HaveGo() { return RunCommand("command -v go").find("/go") != std::string::npos; }

// A pipeline run: a main process (pid 100) training and waiting, one worker
// (pid 200, worker 0) reading and decoding. Frames are already symbolized;
// decode_jpeg has an inlined helper.
Profile MakePipelineProfile(const std::string& host = "") {
  Profile p;
  Process main_proc;
  main_proc.pid = 100;
  main_proc.role = "main";
  main_proc.hz = 100;
  main_proc.host = host;
  main_proc.start_ns = 1000;
  main_proc.end_ns = 1000 + 2000000000LL;
  main_proc.start_unix_ns = 1700000000000000000LL;
  main_proc.mappings.push_back(Mapping{0x555500000000, 0x555500010000, 0, "/opt/app/train",
                                       "0123456789abcdef0123456789abcdef01234567"});
  main_proc.mappings.push_back(Mapping{0x555500010000, 0x555500080000, 0x10000, "/opt/app/train",
                                       "0123456789abcdef0123456789abcdef01234567"});
  main_proc.mappings.push_back(
      Mapping{0x7f0000000000, 0x7f0000100000, 0x26000, "/usr/lib/libc.so.6", "feedface"});
  Process worker = main_proc;
  worker.pid = 200;
  worker.ppid = 100;
  worker.role = "worker";
  worker.worker = 0;
  main_proc.fields["run_id"] = worker.fields["run_id"] = "run-" + (host.empty() ? "a" : host);
  p.processes = {main_proc, worker};

  auto loc = [&](uint64_t offset, std::vector<Frame> frames,
                 const std::string& module = "/opt/app/train") {
    Location l;
    l.module = module;
    l.build_id =
        module == "/opt/app/train" ? "0123456789abcdef0123456789abcdef01234567" : "feedface";
    l.module_offset = offset;
    l.address = (module == "/opt/app/train" ? 0x555500000000 : 0x7f0000000000 - 0x26000) + offset;
    l.frames = std::move(frames);
    return p.InternLocation(l);
  };
  uint32_t main_fn = loc(0x11000, {{"main", "/src/train.cc", 40}});
  uint32_t train_step = loc(0x12000, {{"TrainStep(Model&)", "/src/train.cc", 20}});
  uint32_t next_batch = loc(0x13000, {{"NextBatch()", "/src/loader.cc", 12}});
  uint32_t worker_loop = loc(0x14000, {{"WorkerLoop(int)", "/src/loader.cc", 80}});
  uint32_t read_file = loc(0x15000, {{"ReadFile(std::string const&)", "/src/io.cc", 7}});
  uint32_t decode = loc(0x16000, {{"ClampPixel(int)", "/src/jpeg.h", 3},
                                  {"DecodeJpeg(char const*)", "/src/jpeg.cc", 55}});
  uint32_t libc_read = loc(0x10b000, {{"read", "", 0}}, "/usr/lib/libc.so.6");
  Location pseudo;
  pseudo.pseudo = true;
  pseudo.frames.push_back(Frame{"[off-cpu: read]", "", 0});
  uint32_t off_cpu = p.InternLocation(pseudo);

  uint32_t read = p.InternStage("read"), dec = p.InternStage("decode");
  uint32_t s_read = p.InternStagePath({read});
  uint32_t s_decode = p.InternStagePath({read, dec});

  auto add = [&](uint32_t process, uint32_t tid, std::vector<uint32_t> stack, uint32_t stage,
                 bool on_cpu, int n) {
    for (int i = 0; i < n; ++i) {
      Sample s;
      s.process = process;
      s.tid = tid;
      s.stack = p.InternStack(stack);
      s.stage_path = stage;
      s.on_cpu = on_cpu;
      s.count = 1;
      s.cpu_ns = on_cpu ? 10000000 : 0;
      s.wall_ns = on_cpu ? 0 : 10000000;
      s.kind = on_cpu ? SampleKind::kCpu : SampleKind::kWall;
      p.samples.push_back(s);
    }
  };
  add(0, 100, {train_step, main_fn}, 0, true, 50);
  add(0, 100, {next_batch, main_fn}, 0, true, 5);
  add(1, 201, {read_file, worker_loop}, s_read, true, 10);
  add(1, 201, {off_cpu, libc_read, read_file, worker_loop}, s_read, false, 20);
  add(1, 201, {decode, worker_loop}, s_decode, true, 30);
  return p;
}

// Per-sample summary used to compare profiles: "pid role worker tid stage cpu stack" -> count.
std::map<std::string, int64_t> Summary(const Profile& p, int64_t Sample::*field) {
  std::map<std::string, int64_t> out;
  for (const Sample& s : p.samples) {
    const Process& proc = p.processes.at(s.process);
    std::string key = std::to_string(proc.pid) + " " + proc.role + " " +
                      std::to_string(proc.worker) + " " + proc.host + " " + std::to_string(s.tid) +
                      " " + StagePathName(p, s.stage_path) + " " + (s.on_cpu ? "on" : "off");
    for (uint32_t id : p.stacks.at(s.stack)) {
      const Location& l = p.locations.at(id);
      key += " |";
      for (const Frame& f : l.frames) {
        key += " " + f.function + "@" + f.file + ":" + std::to_string(f.line);
      }
    }
    out[key] += s.*field;
  }
  return out;
}

TEST(PprofWireTest, EncodesVarintsPackedFieldsAndNestedMessages) {
  ProtoEncoder e;
  e.Varint(1, 300);  // 0x08 0xac 0x02
  e.Int64(2, -1);    // ten bytes of two's complement
  e.Bytes(3, "hi");
  e.PackedVarints(4, {1, 150});
  size_t t = e.BeginMessage(5);
  e.Varint(1, 7);
  e.EndMessage(t);
  const std::string expected(
      "\x08\xac\x02"
      "\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
      "\x1a\x02hi"
      "\x22\x03\x01\x96\x01"
      "\x2a\x02\x08\x07",
      3 + 11 + 4 + 5 + 4);
  EXPECT_EQ(e.data(), expected);
}

// Only the samples of one kind.
Profile OfKind(Profile p, SampleKind kind) {
  p.samples.erase(std::remove_if(p.samples.begin(), p.samples.end(),
                                 [&](const Sample& s) { return s.kind != kind; }),
                  p.samples.end());
  return p;
}

TEST(PprofTest, RoundTripKeepsSamplesLabelsAndFrames) {
  TempDir dir;
  Profile in = MakePipelineProfile();
  WritePprof(in, dir.File("p.pb.gz"));
  WritePprof(in, dir.File("p.wall.pb.gz"), PprofView::kWall);
  std::string gz = ReadFile(dir.File("p.pb.gz"));
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzipped on disk

  // Each view alone holds its own kind of sample, and nothing else.
  for (SampleKind kind : {SampleKind::kCpu, SampleKind::kWall}) {
    Profile one;
    ReadPprof(dir.File(kind == SampleKind::kCpu ? "p.pb.gz" : "p.wall.pb.gz"), &one);
    EXPECT_TRUE(one.warnings.empty()) << one.warnings.at(0);
    EXPECT_EQ(Summary(one, &Sample::count), Summary(OfKind(in, kind), &Sample::count));
    for (const Sample& s : one.samples) EXPECT_EQ(s.kind, kind);
  }

  // Both, read one after the other: the processes of one run, whole again.
  Profile out;
  ReadPprof(dir.File("p.pb.gz"), &out);
  ReadPprof(dir.File("p.wall.pb.gz"), &out);
  EXPECT_TRUE(out.warnings.empty()) << out.warnings.at(0);
  EXPECT_EQ(Summary(out, &Sample::count), Summary(in, &Sample::count));
  EXPECT_EQ(Summary(out, &Sample::cpu_ns), Summary(in, &Sample::cpu_ns));
  EXPECT_EQ(Summary(out, &Sample::wall_ns), Summary(in, &Sample::wall_ns));
  ASSERT_EQ(out.processes.size(), 2u);
  EXPECT_EQ(out.processes[0].fields["run_id"], "run-a");
  EXPECT_EQ(out.processes[0].hz, 100);
  EXPECT_EQ(out.processes[0].samples, 55u);
  EXPECT_EQ(out.processes[1].samples, 40u);  // the 20 off-CPU ones are wall samples
  EXPECT_TRUE(out.processes[1].complete);
  ASSERT_EQ(out.processes[1].mappings.size(), 2u);  // one per module
  EXPECT_EQ(out.processes[1].mappings[0].path, "/opt/app/train");
  EXPECT_EQ(out.processes[1].mappings[0].start, 0x555500000000u);
  EXPECT_EQ(out.processes[1].mappings[0].limit, 0x555500080000u);
  EXPECT_EQ(out.processes[1].mappings[0].build_id, "0123456789abcdef0123456789abcdef01234567");
  // File offsets survive, so the locations could be symbolized again.
  for (const Location& l : out.locations) {
    if (l.pseudo) continue;
    bool found = false;
    for (const Location& orig : in.locations) {
      found |= orig.module == l.module && orig.module_offset == l.module_offset &&
               orig.address == l.address && orig.build_id == l.build_id;
    }
    EXPECT_TRUE(found) << l.module << "+" << l.module_offset;
  }
}

TEST(PprofTest, StageNamesWithSlashesSurviveTheRoundTrip) {
  TempDir dir;
  Profile in = MakePipelineProfile();
  const uint32_t io = in.InternStage("io"), odd = in.InternStage("s3://bucket/shard-0");
  Sample s = in.samples.back();
  s.stage_path = in.InternStagePath({io, odd});
  in.samples.push_back(s);
  WritePprof(in, dir.File("p.pb.gz"));
  Profile out;
  ReadPprof(dir.File("p.pb.gz"), &out);
  int found = 0;
  for (const Sample& o : out.samples) {
    const auto& path = out.stage_paths[o.stage_path];
    if (StagePathName(out, o.stage_path) != "io/s3://bucket/shard-0") continue;
    ++found;
    ASSERT_EQ(path.size(), 2u);  // not io / s3: / / bucket / shard-0
    EXPECT_EQ(out.stages[path[0]], "io");
    EXPECT_EQ(out.stages[path[1]], "s3://bucket/shard-0");
  }
  EXPECT_EQ(found, 1);
  // Paths without such names keep to the one "stage" label and still split.
  for (const Sample& o : out.samples) {
    if (StagePathName(out, o.stage_path) == "read/decode") {
      EXPECT_EQ(out.stage_paths[o.stage_path].size(), 2u);
    }
  }
}

TEST(PprofTest, HostLabelSeparatesRuns) {
  TempDir dir;
  WritePprof(MakePipelineProfile("node-a"), dir.File("a.pb.gz"));
  WritePprof(MakePipelineProfile("node-b"), dir.File("b.pb.gz"));
  Profile merged;
  ReadPprof(dir.File("a.pb.gz"), &merged);
  ReadPprof(dir.File("b.pb.gz"), &merged);
  ASSERT_EQ(merged.processes.size(), 4u);
  EXPECT_EQ(merged.processes[0].host, "node-a");
  EXPECT_EQ(merged.processes[3].host, "node-b");
  int64_t count = 0;
  for (const Sample& s : merged.samples) count += s.count;
  EXPECT_EQ(count, 2 * 95);  // the CPU samples
  // The same code in both runs is one location (6: the libc frame and the
  // off-CPU one are in the wall ticks only).
  EXPECT_EQ(merged.locations.size(), 6u);
}

// The wall profile of one run joins that run's processes only: another run's
// process with the same pid and labels (containers restart at pid 1) stays apart.
TEST(PprofTest, AWallProfileJoinsOnlyItsOwnRunsProcesses) {
  TempDir dir;
  Profile a = MakePipelineProfile(), b = MakePipelineProfile();
  for (Process& p : b.processes) p.fields["run_id"] = "run-b";
  WritePprof(a, dir.File("a.pb.gz"));
  WritePprof(b, dir.File("b.wall.pb.gz"), PprofView::kWall);
  WritePprof(a, dir.File("a.wall.pb.gz"), PprofView::kWall);
  Profile merged;
  for (const char* f : {"a.pb.gz", "b.wall.pb.gz", "a.wall.pb.gz"}) ReadPprof(dir.File(f), &merged);
  ASSERT_EQ(merged.processes.size(), 3u);  // run a's two, and run b's worker (its ticks)
  std::map<std::string, int> wall_ticks;
  for (const Sample& s : merged.samples) {
    const Process& p = merged.processes[s.process];
    if (s.kind == SampleKind::kWall) wall_ticks[p.fields.at("run_id") + " " + p.file] += s.count;
  }
  const std::map<std::string, int> expected = {{"run-a " + dir.File("a.pb.gz"), 20},
                                               {"run-b " + dir.File("b.wall.pb.gz"), 20}};
  EXPECT_EQ(wall_ticks, expected);
}

// A report of two runs (each process with its run's host label) names both
// runs; its two views still give back one set of processes.
TEST(PprofTest, TheViewsOfAReportOfTwoRunsJoinIntoItsProcesses) {
  TempDir dir;
  Profile two = MakePipelineProfile("node-a");
  const Profile b = MakePipelineProfile("node-b");
  const uint32_t first_b = static_cast<uint32_t>(two.processes.size());
  two.processes.insert(two.processes.end(), b.processes.begin(), b.processes.end());
  for (Sample s : b.samples) {  // the same stacks: both were interned in the same order
    s.process += first_b;
    two.samples.push_back(s);
  }
  WritePprof(two, dir.File("p.pb.gz"));
  WritePprof(two, dir.File("p.wall.pb.gz"), PprofView::kWall);
  Profile back;
  ReadPprof(dir.File("p.pb.gz"), &back);
  ReadPprof(dir.File("p.wall.pb.gz"), &back);
  EXPECT_EQ(back.processes.size(), 4u);
  EXPECT_EQ(Summary(back, &Sample::wall_ns), Summary(two, &Sample::wall_ns));
  EXPECT_TRUE(back.warnings.empty()) << back.warnings.at(0);
}

// A copy of one view read beside it is not joined (it would double the
// process's samples unseen): it is counted, and said.
TEST(PprofTest, ACopyOfTheSameViewIsCountedAndSaid) {
  TempDir dir;
  WritePprof(MakePipelineProfile(), dir.File("p.pb.gz"));
  WritePprof(MakePipelineProfile(), dir.File("copy.pb.gz"));
  Profile back;
  ReadPprof(dir.File("p.pb.gz"), &back);
  ReadPprof(dir.File("copy.pb.gz"), &back);
  EXPECT_EQ(back.processes.size(), 4u);
  ASSERT_EQ(back.warnings.size(), 1u);
  EXPECT_EQ(back.warnings[0], dir.File("copy.pb.gz") + ": the same run's CPU samples as " +
                                  dir.File("p.pb.gz") + "; both are counted");
}

// A wall record of no time (a thread's first or last) would be a sample of
// 0 in pprof's -traces: the wall profile leaves it out.
TEST(PprofTest, AWallTickOfNoTimeIsLeftOut) {
  Profile in = MakePipelineProfile();
  Sample empty = in.samples.back();
  empty.kind = SampleKind::kWall;
  empty.on_cpu = true;
  empty.count = 0;
  empty.cpu_ns = empty.wall_ns = empty.wait_ns = 0;
  empty.tid = 999;
  in.samples.push_back(empty);
  Profile back;
  ReadPprofBuffer(EncodePprof(in, PprofView::kWall), "w.pb", &back);
  ASSERT_FALSE(back.samples.empty());
  for (const Sample& s : back.samples) {
    EXPECT_GT(s.wall_ns, 0);
    EXPECT_NE(s.tid, 999u);
  }
}

TEST(PprofTest, TruncatedFileKeepsCompleteSamplesAndNamesTheOffset) {
  TempDir dir;
  std::string data = EncodePprof(MakePipelineProfile());
  WriteFile(dir.File("cut.pb"), data.substr(0, data.size() - 3));
  Profile cut;
  ReadPprof(dir.File("cut.pb"), &cut);
  ASSERT_EQ(cut.warnings.size(), 1u);
  const std::string& w = cut.warnings[0];
  EXPECT_EQ(w.rfind(dir.File("cut.pb") + ": offset ", 0), 0u) << w;
  // The last (4th) summed sample was cut: the other three stay whole.
  EXPECT_EQ(cut.samples.size(), 3u) << w;
  ASSERT_FALSE(cut.processes.empty());
  EXPECT_FALSE(cut.processes[0].complete);
  EXPECT_EQ(cut.processes[0].warnings, cut.warnings);

  // The offset named is where the broken field starts: cut there, the file is clean.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(w, m, std::regex(R"(top-level field at offset (\d+))"))) << w;
  size_t field_start = std::stoul(m[1]);
  EXPECT_LT(field_start, data.size());
  WriteFile(dir.File("clean.pb"), data.substr(0, field_start));
  Profile clean;
  ReadPprof(dir.File("clean.pb"), &clean);
  EXPECT_TRUE(clean.warnings.empty());
  EXPECT_EQ(Summary(clean, &Sample::count), Summary(cut, &Sample::count));
}

TEST(PprofTest, TruncatedGzipKeepsWhatInflated) {
  TempDir dir;
  // Enough distinct samples that half the compressed file holds many of them.
  Profile big = MakePipelineProfile();
  for (uint32_t tid = 1000; tid < 3000; ++tid) {
    Sample s = big.samples[0];
    s.tid = tid;
    big.samples.push_back(s);
  }
  WritePprof(big, dir.File("big.pb.gz"));
  std::string gz = ReadFile(dir.File("big.pb.gz"));
  WriteFile(dir.File("half.pb.gz"), gz.substr(0, gz.size() / 2));
  Profile half;
  ReadPprof(dir.File("half.pb.gz"), &half);
  ASSERT_EQ(half.warnings.size(), 2u);
  EXPECT_NE(half.warnings[0].find("gzip stream truncated at compressed offset"), std::string::npos)
      << half.warnings[0];
  EXPECT_NE(half.warnings[1].find(": offset "), std::string::npos) << half.warnings[1];
  EXPECT_GT(half.samples.size(), 100u);
  EXPECT_LT(half.samples.size(), 2005u);
}

// A real profile followed by 128 MiB of zeros, gzipped: 128 KiB that
// inflated whole before (2.2 GB from 100 KB at deflate's best ratio). The
// inflation stops at 100 times the input plus 64 MiB, with one warning, and
// the samples before the zeros are kept.
TEST(PprofTest, GzipBombIsCutWithAWarningAndKeepsWhatItRead) {
  TempDir dir;
  const Profile in = MakePipelineProfile();
  std::string data = EncodePprof(in) + std::string(128u << 20, '\0');
  uLongf size = compressBound(data.size());
  std::string deflated(size, '\0');
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(data.data());
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(deflated.data());
  z.avail_out = static_cast<uInt>(deflated.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  deflated.resize(z.total_out);
  deflateEnd(&z);
  std::string().swap(data);
  ASSERT_LT(deflated.size(), 300u << 10);
  WriteFile(dir.File("bomb.pb.gz"), deflated);
  Profile out;
  ReadPprof(dir.File("bomb.pb.gz"), &out);
  ASSERT_GE(out.warnings.size(), 1u);
  const uint64_t cap = deflated.size() * 100 + (uint64_t{64} << 20);
  EXPECT_EQ(out.warnings[0], dir.File("bomb.pb.gz") + ": inflates to more than " + ByteSize(cap) +
                                 " (100 times its " + ByteSize(deflated.size()) +
                                 ", plus 64 MiB): not a real profile; the first " + ByteSize(cap) +
                                 " are read");
  Profile plain;  // the same profile without the zeros
  ReadPprofBuffer(EncodePprof(in), "plain.pb", &plain);
  ASSERT_GT(plain.samples.size(), 0u);
  EXPECT_EQ(out.samples.size(), plain.samples.size());
}

TEST(PprofTest, GarbageIsAWarningNotACrash) {
  TempDir dir;
  WriteFile(dir.File("junk"), std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x07", 12));
  Profile p;
  ReadPprof(dir.File("junk"), &p);
  EXPECT_TRUE(p.samples.empty());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("junk: offset 0: varint longer than 10 bytes"), std::string::npos)
      << p.warnings[0];
  EXPECT_THROW(ReadPprof(dir.File("missing"), &p), std::runtime_error);
}

// A DataLoader worker's Python frames, merged with one native leaf (memcpy
// in libc): Dataset.__getitem__ of `source` (first line 40) runs line 42 or
// 44, called by <module> (line 3 of train.py); two lambdas of one file,
// first lines 50 and 51, are two functions.
Profile MakePythonProfile(const std::string& source) {
  Profile p;
  Process proc;
  proc.pid = 300;
  proc.role = "worker";
  proc.worker = 0;
  proc.hz = 100;
  proc.mappings.push_back(
      Mapping{0x7f0000000000, 0x7f0000100000, 0x26000, "/usr/lib/libc.so.6", "feedface"});
  p.processes = {proc};
  Location memcpy_loc;
  memcpy_loc.module = "/usr/lib/libc.so.6";
  memcpy_loc.build_id = "feedface";
  memcpy_loc.module_offset = 0x9a000;
  memcpy_loc.address = 0x7f0000000000 - 0x26000 + 0x9a000;
  memcpy_loc.frames.push_back(Frame{"memcpy", "", 0});
  const uint32_t memcpy_id = p.InternLocation(memcpy_loc);
  auto py = [&](const std::string& qualname, const std::string& file, int line, int first,
                bool entry) {
    Location l;
    l.python = true;
    l.python_entry = entry;
    Frame f{qualname, file, line};
    f.start_line = first;
    f.python = true;
    l.frames.push_back(f);
    return p.InternLocation(l);
  };
  const uint32_t get42 = py("Dataset.__getitem__", source, 42, 40, true);
  const uint32_t get44 = py("Dataset.__getitem__", source, 44, 40, true);
  const uint32_t lambda1 = py("<lambda>", source, 50, 50, true);
  const uint32_t lambda2 = py("<lambda>", source, 51, 51, true);
  const uint32_t module = py("<module>", "/app/train.py", 3, 1, true);
  auto add = [&](std::vector<uint32_t> stack, int n) {
    Sample s;
    s.process = 0;
    s.tid = 301;
    s.stack = p.InternStack(stack);
    s.count = n;
    s.cpu_ns = n * 10000000LL;
    p.samples.push_back(s);
    p.processes[0].samples += n;
  };
  add({memcpy_id, get42, module}, 30);
  add({get44, module}, 10);
  add({lambda1, module}, 2);
  add({lambda2, module}, 3);
  return p;
}

// The source Dataset.__getitem__ lives in: numbered lines, the function at 40-44.
std::string WritePythonSource(const TempDir& dir) {
  std::string src;
  for (int i = 1; i <= 60; ++i) {
    if (i == 40) src += "    def __getitem__(self, i):\n";
    else if (i == 42) src += "        data = self.read(i)\n";
    else if (i == 44) src += "        return decode(data)\n";
    else src += "# line " + std::to_string(i) + "\n";
  }
  const std::string path = dir.File("dataset.py");
  WriteFile(path, src);
  return path;
}

TEST(PprofTest, PythonFramesHaveTheirCodesFunctionAndNoAddress) {
  TempDir dir;
  const std::string source = dir.File("dataset.py");
  WritePprof(MakePythonProfile(source), dir.File("p.pb.gz"));
  Profile out;
  ReadPprof(dir.File("p.pb.gz"), &out);
  EXPECT_TRUE(out.warnings.empty()) << out.warnings.at(0);
  std::map<std::string, int> seen;  // "qualname file:line start" -> locations
  for (const Location& l : out.locations) {
    ASSERT_EQ(l.frames.size(), 1u);
    const Frame& f = l.frames[0];
    if (f.function == "memcpy") {
      EXPECT_FALSE(l.python);
      EXPECT_EQ(l.module, "/usr/lib/libc.so.6");
      continue;
    }
    EXPECT_TRUE(l.python) << f.function;
    EXPECT_TRUE(f.python) << f.function;
    EXPECT_TRUE(l.module.empty()) << f.function;
    EXPECT_EQ(l.address, 0u) << f.function;
    ++seen[f.function + " " + f.file + ":" + std::to_string(f.line) + " " +
           std::to_string(f.start_line)];
  }
  const std::map<std::string, int> expected = {
      {"Dataset.__getitem__ " + source + ":42 40", 1},
      {"Dataset.__getitem__ " + source + ":44 40", 1},
      {"<lambda> " + source + ":50 50", 1},
      {"<lambda> " + source + ":51 51", 1},
      {"<module> /app/train.py:3 1", 1}};
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(Summary(out, &Sample::count), Summary(MakePythonProfile(source), &Sample::count));
}

class GoPprofTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGo()) GTEST_SKIP() << "go is not installed";
    WritePprof(MakePipelineProfile(), dir_.File("p.pb.gz"));
    WritePprof(MakePipelineProfile(), dir_.File("p.wall.pb.gz"), PprofView::kWall);
  }
  std::string Pprof(const std::string& args) {
    int status = 0;
    std::string out = RunCommand("go tool pprof " + args, &status);
    EXPECT_EQ(status, 0) << out;
    return out;
  }
  TempDir dir_;
};

TEST_F(GoPprofTest, TopShowsFlatSamplesPerFunction) {
  std::string out = Pprof("-top -sample_index=samples " + dir_.File("p.pb.gz"));
  // Golden output; pprof lists rows of equal flat value in its own order.
  std::string expected =
      "      flat  flat%   sum%        cum   cum%\n"
      "        50 52.63% 52.63%         50 52.63%  TrainStep\n"
      "        30 31.58% 84.21%         30 31.58%  ClampPixel (inline)\n"
      "        10 10.53% 94.74%         10 10.53%  ReadFile\n"
      "         5  5.26%   100%          5  5.26%  NextBatch\n"
      "         0     0%   100%         30 31.58%  DecodeJpeg\n"
      "         0     0%   100%         40 42.11%  WorkerLoop\n"
      "         0     0%   100%         55 57.89%  main\n";
  size_t table = out.find("      flat");
  ASSERT_NE(table, std::string::npos) << out;
  EXPECT_NE(out.find("Showing nodes accounting for 95, 100% of 95 total"), std::string::npos)
      << out;
  EXPECT_NE(out.find("Build ID: 0123456789abcdef0123456789abcdef01234567"), std::string::npos)
      << out;
  EXPECT_EQ(out.substr(table), expected);
  // The default sample type is cpu: 95 on-CPU samples of 10ms.
  std::string cpu = Pprof("-top " + dir_.File("p.pb.gz"));
  EXPECT_NE(cpu.find("Type: cpu"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("of 950ms total"), std::string::npos) << cpu;
  // The wall profile's default is wall: the worker's 20 blocked ticks of 10ms.
  std::string wall = Pprof("-top " + dir_.File("p.wall.pb.gz"));
  EXPECT_NE(wall.find("Type: wall"), std::string::npos) << wall;
  EXPECT_NE(wall.find("of 200ms total"), std::string::npos) << wall;
  EXPECT_NE(wall.find(" 200ms   100%   100%      200ms   100%  [off-cpu: read]"), std::string::npos)
      << wall;
}

// The point of two profiles: pprof prints every sample of a profile in
// -traces, whatever its value, so each view holds only samples with a value
// of its default type.
TEST_F(GoPprofTest, TracesOfEachProfileHoldOnlyItsOwnSamples) {
  for (const char* file : {"p.pb.gz", "p.wall.pb.gz"}) {
    const std::string out = Pprof("-traces " + dir_.File(file));
    // Each trace's value is on its first frame's line, after the labels.
    std::regex first_frame(R"(-----------\+-+\n(?:\s+\w+:  .*\n)*\s+(\S+) )");
    int traces = 0;
    for (std::sregex_iterator it(out.begin(), out.end(), first_frame), end; it != end; ++it) {
      ++traces;
      EXPECT_NE((*it)[1].str(), "0") << file << ":\n" << out;
    }
    EXPECT_EQ(traces, std::string(file) == "p.pb.gz" ? 4 : 1) << file << ":\n" << out;
    const bool blocked = out.find("[off-cpu: read]") != std::string::npos;
    EXPECT_EQ(blocked, std::string(file) == "p.wall.pb.gz") << file << ":\n" << out;
  }
}

TEST_F(GoPprofTest, TracesShowInlinedFramesAndLines) {
  std::string out = Pprof("-traces -lines " + dir_.File("p.pb.gz"));
  EXPECT_NE(out.find("ClampPixel /src/jpeg.h:3 (inline)"), std::string::npos) << out;
  EXPECT_NE(out.find("DecodeJpeg /src/jpeg.cc:55"), std::string::npos) << out;
  EXPECT_NE(out.find("stage:  read/decode"), std::string::npos) << out;
}

// Collapses runs of blanks and writes "60.0" as "60": pprof versions differ there.
std::string Squeeze(const std::string& s) {
  return std::regex_replace(std::regex_replace(s, std::regex(R"(\b(\d+)\.0\b)"), "$1"),
                            std::regex(" +"), " ");
}

TEST_F(GoPprofTest, TagsCountSamplesPerLabel) {
  std::string out = Pprof("-tags -sample_index=samples " + dir_.File("p.pb.gz"));
  const std::string expected =
      " cpu: Total 95\n"
      " 95 ( 100%): on\n"
      "\n"
      " pid: Total 95\n"
      " 55 (57.89%): 100\n"
      " 40 (42.11%): 200\n"
      "\n"
      " role: Total 95\n"
      " 55 (57.89%): main\n"
      " 40 (42.11%): worker\n"
      "\n"
      " stage: Total 40\n"
      " 30 (75.00%): read/decode\n"
      " 10 (25.00%): read\n"
      "\n"
      " tid: Total 95\n"
      " 55 (57.89%): 100\n"
      " 40 (42.11%): 201\n"
      "\n"
      " worker: Total 40\n"
      " 40 ( 100%): 0\n";
  size_t start = out.find(" cpu: Total");
  ASSERT_NE(start, std::string::npos) << out;
  EXPECT_EQ(Squeeze(out.substr(start)).substr(0, expected.size()), expected) << out;
  // The wall profile's ticks: the worker's 20, all blocked, in "read".
  out = Pprof("-tags -sample_index=samples " + dir_.File("p.wall.pb.gz"));
  const std::string wall = " cpu: Total 20\n 20 ( 100%): off\n";
  start = out.find(" cpu: Total");
  ASSERT_NE(start, std::string::npos) << out;
  EXPECT_EQ(Squeeze(out.substr(start)).substr(0, wall.size()), wall) << out;
  EXPECT_NE(Squeeze(out).find(" stage: Total 20\n 20 ( 100%): read\n"), std::string::npos) << out;
}

TEST_F(GoPprofTest, TagFocusSelectsStageSamples) {
  std::string out =
      Pprof("-top -sample_index=samples -tagfocus=stage=read/decode " + dir_.File("p.pb.gz"));
  EXPECT_NE(out.find("Showing nodes accounting for 30, 31.58% of 95 total"), std::string::npos)
      << out;
  EXPECT_NE(out.find(" 30 31.58% 31.58%         30 31.58%  ClampPixel (inline)"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("TrainStep"), std::string::npos) << out;
  out = Pprof("-top -sample_index=samples -tagfocus=role=main " + dir_.File("p.pb.gz"));
  EXPECT_NE(out.find("Showing nodes accounting for 55, 57.89% of 95 total"), std::string::npos)
      << out;
  // Blocked time is in the wall profile: both of its views, tagged and summed.
  out = Pprof("-top -tagfocus=cpu=off " + dir_.File("p.wall.pb.gz"));
  EXPECT_NE(out.find("accounting for 200ms, 100% of 200ms total"), std::string::npos) << out;
  out = Pprof("-top -tagfocus=cpu=on " + dir_.File("p.wall.pb.gz"));
  EXPECT_NE(out.find("accounting for 0, 0% of 200ms total"), std::string::npos) << out;
}

TEST_F(GoPprofTest, TagRootPutsStagesAtTheRoot) {
  std::string out = Pprof("-traces -sample_index=samples -tagroot=stage " + dir_.File("p.pb.gz"));
  // The stage becomes the outermost frame of each stack.
  std::smatch m;
  EXPECT_TRUE(std::regex_search(
      out, m,
      std::regex(R"(ClampPixel \(inline\)\n\s+DecodeJpeg\n\s+WorkerLoop\n\s+read/decode\n)")))
      << out;
}

TEST_F(GoPprofTest, TwoRunsMergeOnOneCommandLine) {
  WritePprof(MakePipelineProfile("node-b"), dir_.File("b.pb.gz"));
  std::string out =
      Pprof("-top -sample_index=samples " + dir_.File("p.pb.gz") + " " + dir_.File("b.pb.gz"));
  EXPECT_NE(out.find("of 190 total"), std::string::npos) << out;
  out = Pprof("-top -sample_index=samples -tagfocus=host=node-b " + dir_.File("p.pb.gz") + " " +
              dir_.File("b.pb.gz"));
  EXPECT_NE(out.find("accounting for 95, 50.00% of 190 total"), std::string::npos) << out;
}

// go tool pprof on Python frames: their functions, files, first lines and
// lines, and -list reading the .py source through the Function's file name.
class GoPprofPythonTest : public GoPprofTest {
 protected:
  void SetUp() override {
    if (!HaveGo()) GTEST_SKIP() << "go is not installed";
    source_ = WritePythonSource(dir_);
    WritePprof(MakePythonProfile(source_), dir_.File("py.pb.gz"));
  }
  std::string source_;
};

TEST_F(GoPprofPythonTest, RawShowsFunctionFileStartLineAndLine) {
  const std::string out = Pprof("-raw " + dir_.File("py.pb.gz"));
  // "id: address [M=mapping] function file:line s=start_line": Python
  // locations have address 0 and no mapping; each line of a function is
  // its own location.
  for (const std::string& want :
       {"0x0 Dataset.__getitem__ " + source_ + ":42 s=40", "0x0 Dataset.__getitem__ " + source_ + ":44 s=40",
        "0x0 <lambda> " + source_ + ":50 s=50", "0x0 <lambda> " + source_ + ":51 s=51",
        std::string("0x0 <module> /app/train.py:3 s=1")}) {
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  }
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(0x7f0000074000 M=1 memcpy)"))) << out;
  EXPECT_FALSE(std::regex_search(out, std::regex(R"(0x0 M=)"))) << out;
}

TEST_F(GoPprofPythonTest, TracesShowPythonFramesUnderTheNativeLeaf) {
  const std::string out = Pprof("-traces -lines " + dir_.File("py.pb.gz"));
  const std::string q = std::regex_replace(source_, std::regex(R"([.])"), R"(\.)");
  EXPECT_TRUE(std::regex_search(
      out, std::regex("300ms +memcpy\n +Dataset\\.__getitem__ " + q +
                      ":42\n +<module> /app/train\\.py:3\n")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("20ms +<lambda> " + q + ":50\n"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("30ms +<lambda> " + q + ":51\n"))) << out;
}

TEST_F(GoPprofPythonTest, ListReadsThePythonSource) {
  const std::string out =
      Squeeze(Pprof("-list Dataset.__getitem__ -sample_index=samples " + dir_.File("py.pb.gz")));
  EXPECT_NE(out.find("ROUTINE ======================== Dataset.__getitem__ in " + source_),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" 10 40 (flat, cum)"), std::string::npos) << out;  // 30 below it, 10 in it
  EXPECT_NE(out.find(" . . 40: def __getitem__(self, i):"), std::string::npos) << out;
  EXPECT_NE(out.find(" . 30 42: data = self.read(i)"), std::string::npos) << out;
  EXPECT_NE(out.find(" 10 10 44: return decode(data)"), std::string::npos) << out;
}

TEST_F(GoPprofPythonTest, LinesNameTheLineBeingRun) {
  const std::string out = Squeeze(Pprof("-top -lines -sample_index=samples " + dir_.File("py.pb.gz")));
  EXPECT_NE(out.find(" 10 22.22% 88.89% 10 22.22% Dataset.__getitem__ " + source_ + ":44\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" 0 0% 100% 30 66.67% Dataset.__getitem__ " + source_ + ":42\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" 0 0% 100% 45 100% <module> /app/train.py:3\n"), std::string::npos) << out;
}

TEST_F(GoPprofTest, WhatGoWritesWeRead) {
  // pprof re-encodes our profile with its own writer (samples before tables).
  // Its comments keep the run, so the two views still join into one run's
  // processes.
  Pprof("-proto -output " + dir_.File("go.pb.gz") + " " + dir_.File("p.pb.gz"));
  Pprof("-proto -output " + dir_.File("go.wall.pb.gz") + " " + dir_.File("p.wall.pb.gz"));
  Profile go;
  ReadPprof(dir_.File("go.pb.gz"), &go);
  ReadPprof(dir_.File("go.wall.pb.gz"), &go);
  EXPECT_TRUE(go.warnings.empty());
  EXPECT_EQ(go.processes.size(), 2u);
  EXPECT_EQ(Summary(go, &Sample::count), Summary(MakePipelineProfile(), &Sample::count));
  EXPECT_EQ(Summary(go, &Sample::wall_ns), Summary(MakePipelineProfile(), &Sample::wall_ns));
}

}  // namespace
}  // namespace dlprof
