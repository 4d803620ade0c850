// Golden outputs of every writer `dlprof report` runs, from one deterministic
// in-memory Profile (MakeGoldenProfile) that has the shapes the writers must
// get right: a main process and two workers (worker 0 died without an END
// record, worker 1 carries a host label), nested stage paths, a stage name
// that needs escaping everywhere (quotes, '<', '>', '/', non-ASCII UTF-8),
// on- and off-CPU wall ticks, buffers with and without snapshots, steps and
// data waits, an inlined frame, an unsymbolized frame, C++ names with
// templates and spaces.
//
// Each writer runs through ReportWriter::Write into a temporary folder (what
// `dlprof report` does) and the file is compared with tests/golden/pipeline.*
// after one normalisation: numbers computed from times (decimals, exponents
// and percentages, and the few integer time stamps named below) have their
// digits replaced by '#' ("0.25s" -> "#.#s", "40%" -> "#%"), and the spaces
// that pad them shrink to one. Everything else is exact: names, escaping,
// structure, ordering, counts, ids, pids, addresses.
//
// To regenerate the goldens on purpose (after a deliberate change in a
// writer's output), run
//
//   DLPROF_UPDATE_GOLDEN=1 build/tests/golden_test
//
// which writes every golden into the source tree and then FAILS, naming each
// file written, so that an update is never silent; review `git diff
// tests/golden/` and run again without the variable. tests/golden/README.md
// says the same.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "readers/profile.h"
#include "reports/analysis.h"
#include "reports/report_writer.h"
#include "reports/run_diff.h"
#include "tests/support/files.h"
#include "tests/support/pprof_wire.h"

namespace dlprof {
namespace {

using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;

constexpr int64_t kMs = 1000000;
constexpr int64_t kT0 = 5000 * kMs;  // CLOCK_MONOTONIC of the main process's start

// Quotes, '<' and '>' (JSON and HTML escaping), '/' (pprof's stage label
// joins a path with '/'), spaces (folded frames), non-ASCII UTF-8; 26 bytes,
// so summary.txt's 24-byte column must cut it, and the cut falls inside "読".
const char kOddStage[] = "fetch \"s3://bk/k\" <\xe8\xaa\xad\xe3\x81\xbf>";

// A pipeline run. Main (pid 100): the training loop on tid 100, 4 steps of
// 200 ms (1 warm-up), each starting with an 80 ms data wait blocked in futex;
// a collate thread (tid 105); the "prefetch" buffer. Worker 0 (pid 201) reads,
// fetches and decodes, and died without an END record (a warning says its
// file was cut). Worker 1 (pid 202) does the same in detailed mode (exact
// stage enter/exit intervals) and has a host label, as a process read back
// from a merged pprof has when `dlprof report` is given one alongside a run.
// The data stage with the largest self wall time is kOddStage, blocked in
// read(): the verdict is input-bound, I/O, in the workers, with worker 0
// three times slower (so the evidence and advice quote the odd name too).
// The CPU-bound-in-workers verdict is avoided on purpose: its advice names
// the core count of the machine running the test. The main process records
// its 2 cores (`cpus`), so that the verdict's contention figures are the
// profile's, not those of that machine.
Profile MakeGoldenProfile() {
  Profile p;
  const std::string app_id = "0123456789abcdef0123456789abcdef01234567";
  Process main_proc;
  main_proc.pid = 100;
  main_proc.ppid = 1;
  main_proc.role = "main";
  main_proc.command = "train";
  main_proc.file = "run/main-100.dlprof";
  main_proc.hz = 100;
  main_proc.mode = "light";
  main_proc.unwinder = "fp";
  main_proc.timer = "perf";
  main_proc.start_ns = kT0;
  main_proc.end_ns = kT0 + 1000 * kMs;
  main_proc.start_unix_ns = 1700000000000000000LL;
  main_proc.complete = true;
  main_proc.end_reason = "exit";
  main_proc.fields = {{"warmup_steps", "1"}, {"snapshot_ms", "10"}, {"cpus", "2"}};
  main_proc.counters = {{"handler_ns", 3 * kMs}};
  main_proc.mappings = {
      Mapping{0x555500000000, 0x555500010000, 0, "/opt/app/train", app_id},
      Mapping{0x555500010000, 0x555500080000, 0x10000, "/opt/app/train", app_id},
      Mapping{0x7f0000000000, 0x7f0000100000, 0x26000, "/usr/lib/libc.so.6", "feedface"}};

  Process w0 = main_proc;
  w0.pid = 201;
  w0.ppid = 100;
  w0.role = "worker";
  w0.worker = 0;
  w0.file = "run/worker-201.dlprof";
  w0.start_ns = kT0 + 20 * kMs;
  w0.end_ns = kT0 + 700 * kMs;
  w0.start_unix_ns = main_proc.start_unix_ns + 20 * kMs;
  w0.complete = false;
  w0.end_reason = "";
  w0.dropped = 2;
  w0.fields.clear();
  w0.counters = {{"handler_ns", 1 * kMs}};
  w0.mappings.push_back(
      Mapping{0x7f1000000000, 0x7f1000040000, 0, "/usr/lib/libjpeg.so.62", "beadcafe"});
  w0.warnings = {"run/worker-201.dlprof: offset 8192: chunk cut short (the process died?)"};

  Process w1 = w0;
  w1.pid = 202;
  w1.worker = 1;
  w1.file = "node-b/profile.pb.gz";
  w1.host = "node-b";
  w1.mode = "detailed";
  w1.end_ns = kT0 + 980 * kMs;
  w1.complete = true;
  w1.end_reason = "exit";
  w1.dropped = 0;
  w1.warnings.clear();
  p.processes = {main_proc, w0, w1};

  auto loc = [&](uint64_t offset, std::vector<Frame> frames,
                 const std::string& module = "/opt/app/train") {
    Location l;
    l.module = module;
    if (module == "/opt/app/train") {
      l.build_id = app_id;
      l.address = 0x555500000000 + offset;
    } else if (module == "/usr/lib/libc.so.6") {
      l.build_id = "feedface";
      l.address = 0x7f0000000000 - 0x26000 + offset;
    } else {
      l.build_id = "beadcafe";
      l.address = 0x7f1000000000 + offset;
    }
    l.module_offset = offset;
    l.frames = std::move(frames);
    return p.InternLocation(l);
  };
  auto pseudo = [&](const std::string& name) {
    Location l;
    l.pseudo = true;
    l.frames.push_back(Frame{name, "", 0});
    return p.InternLocation(l);
  };
  const uint32_t main_fn = loc(0x11000, {{"main", "/src/train.cc", 40}});
  const uint32_t train_step = loc(0x12000, {{"TrainStep(Model&)", "/src/train.cc", 20}});
  const uint32_t next_batch = loc(0x13000, {{"Loader::Next() const", "/src/loader.cc", 12}});
  const uint32_t worker_loop = loc(0x14000, {{"WorkerLoop(int)", "/src/loader.cc", 80}});
  const uint32_t read_file = loc(0x15000, {{"ReadFile(std::string const&)", "/src/io.cc", 7}});
  // Inlined: ClampPixel inside Decoder<Rgb>::Run, innermost first.
  const uint32_t decode = loc(0x16000, {{"ClampPixel(int)", "/src/jpeg.h", 3},
                                        {"Decoder<Rgb>::Run(char const*) const", "/src/jpeg.cc", 55}});
  const uint32_t fetch = loc(0x17000, {{"Fetch(Url const&)", "/src/s3.cc", 31}});
  const uint32_t collate = loc(0x18000, {{"Collate(Batch&)", "/src/loader.cc", 150}});
  const uint32_t thread_run = loc(
      0x19000,
      {{"std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (*)(int), int> > >::_M_run()",
        "/usr/include/c++/12/bits/std_thread.h", 211}});
  const uint32_t libc_read = loc(0x10b000, {{"read", "", 0}}, "/usr/lib/libc.so.6");
  const uint32_t jpeg_idct = loc(0x2a3f0, {}, "/usr/lib/libjpeg.so.62");  // not symbolized

  const uint32_t model = p.InternStage("model"), load = p.InternStage("load"),
                 read = p.InternStage("read"), odd = p.InternStage(kOddStage),
                 dec = p.InternStage("decode"), coll = p.InternStage("collate");
  const uint32_t s_model = p.InternStagePath({model});
  const uint32_t s_read = p.InternStagePath({load, read});
  const uint32_t s_fetch = p.InternStagePath({load, read, odd});
  const uint32_t s_decode = p.InternStagePath({load, dec});
  const uint32_t s_collate = p.InternStagePath({coll});

  // `n` CPU samples of 10 ms each, recorded at t_ms.
  auto cpu = [&](uint32_t proc, uint32_t tid, std::vector<uint32_t> stack, uint32_t path,
                 int64_t t_ms, int64_t n) {
    Sample s;
    s.process = proc;
    s.tid = tid;
    s.stack = p.InternStack(stack);
    s.stage_path = path;
    s.kind = SampleKind::kCpu;
    s.on_cpu = true;
    s.time_ns = kT0 + t_ms * kMs;
    s.count = n;
    s.cpu_ns = n * 10 * kMs;
    p.samples.push_back(s);
  };
  // A wall record as the dlprof reader makes them: count 0, a pseudo frame
  // saying running or blocked in `syscall`, over the stack the thread was
  // blocked in when the file has one (`blocked`, leaf first).
  auto wall = [&](uint32_t proc, uint32_t tid, uint32_t path, int64_t t_ms, int64_t wall_ms,
                  int64_t cpu_ms, const std::string& syscall,
                  const std::vector<uint32_t>& blocked = {}) {
    Sample s;
    s.process = proc;
    s.tid = tid;
    s.on_cpu = syscall.empty();
    std::vector<uint32_t> stack = {
        pseudo(syscall.empty() ? "[running]" : "[off-cpu: " + syscall + "]")};
    stack.insert(stack.end(), blocked.begin(), blocked.end());
    s.stack = p.InternStack(stack);
    s.stage_path = path;
    s.kind = SampleKind::kWall;
    s.time_ns = kT0 + t_ms * kMs;
    s.count = 0;
    s.wall_ns = wall_ms * kMs;
    s.cpu_ns = cpu_ms * kMs;
    p.samples.push_back(s);
  };
  auto interval = [&](uint32_t proc, uint32_t tid, IntervalKind kind, uint32_t stage,
                      int64_t begin_ms, int64_t end_ms) {
    p.intervals.push_back(Interval{proc, tid, kind, stage, kT0 + begin_ms * kMs, kT0 + end_ms * kMs});
  };

  // Main: the loop (tid 100) and a collate thread (tid 105).
  cpu(0, 100, {next_batch, main_fn}, 0, 180, 1);  // no stage
  for (int i = 0; i < 4; ++i) {
    const int64_t b = 100 + 200 * i;
    interval(0, 100, IntervalKind::kStep, 0, b, b + 200);
    interval(0, 100, IntervalKind::kWait, 0, b, b + 80);
    wall(0, 100, 0, b + 80, 80, 1, "futex");
    // Recorded before the step ends: a time on the next step's first
    // instant would fall inside its data wait.
    cpu(0, 100, {train_step, main_fn}, s_model, b + 190, 10);
    wall(0, 100, s_model, b + 190, 110, 108, "");
  }
  cpu(0, 105, {collate, thread_run}, s_collate, 330, 3);
  wall(0, 105, s_collate, 330, 30, 30, "");

  // Worker 0 (died at 700 ms).
  cpu(1, 201, {read_file, worker_loop}, s_read, 150, 2);
  wall(1, 201, s_read, 150, 40, 20, "");
  cpu(1, 201, {fetch, read_file, worker_loop}, s_fetch, 160, 1);
  wall(1, 201, s_fetch, 400, 250, 10, "read", {libc_read, fetch, read_file, worker_loop});
  cpu(1, 201, {jpeg_idct, decode, worker_loop}, s_decode, 500, 4);
  wall(1, 201, s_decode, 500, 100, 95, "");
  wall(1, 201, s_read, 600, 50, 5, "pread64");
  cpu(1, 201, {libc_read, read_file, worker_loop}, s_read, 600, 1);

  // Worker 1: detailed mode, so the trace takes its stage spans from these.
  interval(2, 202, IntervalKind::kStage, load, 50, 320);
  interval(2, 202, IntervalKind::kStage, read, 60, 200);
  interval(2, 202, IntervalKind::kStage, odd, 100, 180);
  interval(2, 202, IntervalKind::kStage, dec, 200, 300);
  cpu(2, 202, {fetch, read_file, worker_loop}, s_fetch, 180, 1);
  wall(2, 202, s_fetch, 180, 80, 5, "read");
  cpu(2, 202, {decode, worker_loop}, s_decode, 300, 5);
  wall(2, 202, s_decode, 300, 100, 98, "");

  for (const Sample& s : p.samples) {
    if (s.kind == SampleKind::kCpu) p.processes[s.process].samples += s.count;
  }

  BufferSeries prefetch;
  prefetch.process = 0;
  prefetch.name = "prefetch";
  prefetch.capacity = 4;
  const uint64_t sizes[] = {0, 0, 1, 4, 2, 0, 3, 4};
  for (int i = 0; i < 8; ++i) prefetch.snapshots.push_back({kT0 + (100 + 100 * i) * kMs, sizes[i]});
  BufferSeries shards;
  shards.process = 1;
  shards.name = "shard_queue";
  shards.capacity = 8;
  shards.snapshots = {{kT0 + 400 * kMs, 5}, {kT0 + 200 * kMs, 8}};  // out of order on purpose
  BufferSeries spill;  // never sampled, no capacity
  spill.process = 2;
  spill.name = "spill";
  p.buffers = {prefetch, shards, spill};
  return p;
}

// ---------------------------------------------------------------------------
// Normalisation: numbers computed from times become placeholders.

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Every number token (digits not preceded by a letter, digit, '_' or '.')
// that has a fraction, an exponent or a following '%' gets its digit runs
// replaced by '#', and the spaces before it shrink to one (so a value that
// grows a digit keeps its right-aligned column). Integers stay: counts, ids,
// pids, sizes. Digits inside names survive as long as the names have no
// "1.5", "2e3" or "5%" in them (the golden profile's names do not).
std::string MaskTimes(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  auto digits = [&](size_t j) {
    while (j < in.size() && std::isdigit(static_cast<unsigned char>(in[j]))) ++j;
    return j;
  };
  while (i < in.size()) {
    const char c = in[i];
    const bool starts = std::isdigit(static_cast<unsigned char>(c)) &&
                        (i == 0 || (!IsWordChar(in[i - 1]) && in[i - 1] != '.'));
    if (!starts) {
      out += c;
      ++i;
      continue;
    }
    size_t end = digits(i);
    bool masked = false;
    if (end + 1 < in.size() && in[end] == '.' && std::isdigit(static_cast<unsigned char>(in[end + 1]))) {
      end = digits(end + 1);
      masked = true;
    }
    if (end + 1 < in.size() && (in[end] == 'e' || in[end] == 'E')) {
      size_t k = end + 1;
      if (k < in.size() && (in[k] == '-' || in[k] == '+')) ++k;
      if (k < in.size() && std::isdigit(static_cast<unsigned char>(in[k]))) {
        end = digits(k);
        masked = true;
      }
    }
    if (end < in.size() && in[end] == '%') masked = true;
    if (!masked) {
      out.append(in, i, end - i);
    } else {
      const size_t sign = !out.empty() && (out.back() == '-' || out.back() == '+') ? 1 : 0;
      std::string kept_sign = sign ? std::string(1, out.back()) : "";
      if (sign) out.pop_back();
      if (!out.empty() && out.back() == ' ') {
        while (!out.empty() && out.back() == ' ') out.pop_back();
        out += ' ';
      }
      out += kept_sign;
      for (size_t k = i; k < end; ++k) {
        if (std::isdigit(static_cast<unsigned char>(in[k]))) {
          if (out.empty() || out.back() != '#') out += '#';
        } else {
          out += in[k];
        }
      }
    }
    i = end;
  }
  return out;
}

// `"key":<integer>` -> `"key":#`, for integer time stamps in JSON.
std::string MaskJsonKey(std::string s, const std::string& key) {
  const std::string pat = "\"" + key + "\":";
  for (size_t at = s.find(pat); at != std::string::npos; at = s.find(pat, at + 1)) {
    size_t b = at + pat.size();
    while (b < s.size() && s[b] == ' ') ++b;
    size_t e = b;
    if (e < s.size() && s[e] == '-') ++e;
    while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
    if (e > b) s.replace(b, e - b, "#");
  }
  return s;
}

// ---------------------------------------------------------------------------
// JSON re-layout that keeps every token's bytes (strings stay exactly as
// written, escapes included): one object member per line, arrays of scalars
// on one line, arrays holding objects or arrays one element per line.

class JsonLayout {
 public:
  explicit JsonLayout(std::string_view s) : s_(s) {}
  std::string Run() {
    std::string out;
    Value(0, &out);
    Space();
    if (i_ != s_.size()) throw std::runtime_error("trailing bytes after JSON");
    return out + "\n";
  }

 private:
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  char Peek() {
    Space();
    if (i_ >= s_.size()) throw std::runtime_error("JSON ends early");
    return s_[i_];
  }
  void Expect(char c) {
    if (Peek() != c) throw std::runtime_error(std::string("JSON: expected ") + c + " at " + std::to_string(i_));
    ++i_;
  }
  void String(std::string* out) {
    Expect('"');
    size_t b = i_ - 1;
    while (i_ < s_.size() && s_[i_] != '"') i_ += s_[i_] == '\\' ? 2 : 1;
    if (i_ >= s_.size()) throw std::runtime_error("JSON: unterminated string");
    ++i_;
    out->append(s_.substr(b, i_ - b));
  }
  // Does the array or object starting at i_ hold a nested array or object?
  bool HoldsContainers() {
    for (size_t j = i_ + 1; j < s_.size(); ++j) {
      const char c = s_[j];
      if (c == '"') {
        for (++j; j < s_.size() && s_[j] != '"'; j += s_[j] == '\\' ? 2 : 1) {
        }
      } else if (c == '[' || c == '{') {
        return true;
      } else if (c == ']' || c == '}') {
        return false;
      }
    }
    return false;
  }
  static void Indent(int depth, std::string* out) {
    *out += '\n';
    out->append(static_cast<size_t>(depth), ' ');
  }
  void Value(int depth, std::string* out) {
    const char c = Peek();
    if (c == '"') return String(out);
    if (c == '{') {
      ++i_;
      *out += '{';
      if (Peek() == '}') {
        ++i_;
        *out += '}';
        return;
      }
      for (bool first = true;; first = false) {
        if (!first) *out += ',';
        Indent(depth + 1, out);
        String(out);
        Expect(':');
        *out += ':';
        Value(depth + 1, out);
        if (Peek() == ',') {
          ++i_;
          continue;
        }
        Expect('}');
        break;
      }
      Indent(depth, out);
      *out += '}';
      return;
    }
    if (c == '[') {
      const bool nested = HoldsContainers();
      ++i_;
      *out += '[';
      if (Peek() == ']') {
        ++i_;
        *out += ']';
        return;
      }
      for (bool first = true;; first = false) {
        if (!first) *out += ',';
        if (nested) Indent(depth + 1, out);
        Value(depth + 1, out);
        if (Peek() == ',') {
          ++i_;
          continue;
        }
        Expect(']');
        break;
      }
      if (nested) Indent(depth, out);
      *out += ']';
      return;
    }
    // number, true, false, null: copied as written
    size_t b = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != ']' && s_[i_] != '}' && s_[i_] != ' ' &&
           s_[i_] != '\n') {
      ++i_;
    }
    if (i_ == b) throw std::runtime_error("JSON: empty value at " + std::to_string(b));
    out->append(s_.substr(b, i_ - b));
  }

  std::string_view s_;
  size_t i_ = 0;
};

// ---------------------------------------------------------------------------
// profile.proto as text. The golden of profile.pb.gz is this dump of the
// decompressed bytes, decoded here by field number with the schema below
// rather than by `go tool pprof -raw` or dlprof's own pprof reader:
//  - it shows every field in the order it is on the wire, packed or not, the
//    string table in its order, ids, mapping flags, function name and
//    system_name, label units, period and default sample type: what any
//    pprof consumer (go tool pprof, speedscope, Perfetto, pprof-rs) reads;
//  - `go tool pprof -raw` needs go (the test would skip on machines without
//    it), normalises ids and order, and its text changes with go versions;
//  - dlprof's reader maps the file back into a Profile, dropping exactly the
//    encoding details a golden should pin (it is itself a consumer under test).
// Unknown fields print as "?N" so that a new field shows up as a diff;
// labels print short (label pid=100(pid)) when encoded the usual way.
// PprofParsedByGoToolPprof below checks, where go exists, that the real tool
// accepts the same bytes.

enum class Kind { kUint, kInt, kHex, kBool, kStr, kMsg, kPackedUint, kPackedInt, kMaskedInt };
struct FieldSpec {
  const char* name;
  Kind kind;
  const char* msg = nullptr;  // for kMsg: the message type
};
const std::map<std::string, std::map<uint32_t, FieldSpec>>& Schema() {
  static const auto* schema = new std::map<std::string, std::map<uint32_t, FieldSpec>>{
      {"Profile",
       {{1, {"sample_type", Kind::kMsg, "ValueType"}},
        {2, {"sample", Kind::kMsg, "Sample"}},
        {3, {"mapping", Kind::kMsg, "Mapping"}},
        {4, {"location", Kind::kMsg, "Location"}},
        {5, {"function", Kind::kMsg, "Function"}},
        {6, {"string_table", Kind::kStr}},  // handled apart
        {7, {"drop_frames", Kind::kStr}},
        {8, {"keep_frames", Kind::kStr}},
        {9, {"time_nanos", Kind::kMaskedInt}},      // wall-clock start of the run
        {10, {"duration_nanos", Kind::kMaskedInt}},  // its length
        {11, {"period_type", Kind::kMsg, "ValueType"}},
        {12, {"period", Kind::kInt}},
        {13, {"comment", Kind::kStr}},
        {14, {"default_sample_type", Kind::kStr}},
        {15, {"doc_url", Kind::kStr}}}},
      {"ValueType", {{1, {"type", Kind::kStr}}, {2, {"unit", Kind::kStr}}}},
      {"Sample",
       {{1, {"location_id", Kind::kPackedUint}},
        {2, {"value", Kind::kPackedInt}},
        {3, {"label", Kind::kMsg, "Label"}}}},
      {"Label",
       {{1, {"key", Kind::kStr}},
        {2, {"str", Kind::kStr}},
        {3, {"num", Kind::kInt}},
        {4, {"num_unit", Kind::kStr}}}},
      {"Mapping",
       {{1, {"id", Kind::kUint}},
        {2, {"memory_start", Kind::kHex}},
        {3, {"memory_limit", Kind::kHex}},
        {4, {"file_offset", Kind::kHex}},
        {5, {"filename", Kind::kStr}},
        {6, {"build_id", Kind::kStr}},
        {7, {"has_functions", Kind::kBool}},
        {8, {"has_filenames", Kind::kBool}},
        {9, {"has_line_numbers", Kind::kBool}},
        {10, {"has_inline_frames", Kind::kBool}}}},
      {"Location",
       {{1, {"id", Kind::kUint}},
        {2, {"mapping_id", Kind::kUint}},
        {3, {"address", Kind::kHex}},
        {4, {"line", Kind::kMsg, "Line"}},
        {5, {"is_folded", Kind::kBool}}}},
      {"Line", {{1, {"function_id", Kind::kUint}}, {2, {"line", Kind::kInt}}, {3, {"column", Kind::kInt}}}},
      {"Function",
       {{1, {"id", Kind::kUint}},
        {2, {"name", Kind::kStr}},
        {3, {"system_name", Kind::kStr}},
        {4, {"filename", Kind::kStr}},
        {5, {"start_line", Kind::kInt}}}},
  };
  return *schema;
}

struct WireField {
  uint32_t number;
  int wire_type;
  uint64_t value;          // wire type 0
  std::string_view bytes;  // wire type 2
};

uint64_t ReadVarint(std::string_view s, size_t* i) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*i >= s.size()) throw std::runtime_error("varint runs past the end");
    const uint8_t b = static_cast<uint8_t>(s[(*i)++]);
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return v;
  }
  throw std::runtime_error("varint longer than 10 bytes");
}

std::vector<WireField> ParseMessage(std::string_view s) {
  std::vector<WireField> out;
  size_t i = 0;
  while (i < s.size()) {
    const uint64_t tag = ReadVarint(s, &i);
    WireField f{static_cast<uint32_t>(tag >> 3), static_cast<int>(tag & 7), 0, {}};
    if (f.wire_type == 0) {
      f.value = ReadVarint(s, &i);
    } else if (f.wire_type == 2) {
      const uint64_t n = ReadVarint(s, &i);
      if (n > s.size() - i) throw std::runtime_error("length runs past the end");
      f.bytes = s.substr(i, n);
      i += n;
    } else {
      throw std::runtime_error("unexpected wire type " + std::to_string(f.wire_type));
    }
    out.push_back(f);
  }
  return out;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;  // UTF-8 as is: the golden shows the bytes a viewer renders
    }
  }
  return out + "\"";
}

class PprofDump {
 public:
  explicit PprofDump(std::string_view pb) : top_(ParseMessage(pb)) {
    for (const WireField& f : top_) {
      if (f.number == 6 && f.wire_type == 2) strings_.emplace_back(f.bytes);
    }
  }
  std::string Run() const {
    std::string out;
    size_t string_index = 0;
    for (const WireField& f : top_) {
      if (f.number == 6 && f.wire_type == 2) {
        out += "string_table[" + std::to_string(string_index++) + "]: " + Quote(f.bytes) + "\n";
      } else {
        out += Field("Profile", f) + "\n";
      }
    }
    return out;
  }

 private:
  std::string Str(uint64_t index) const {
    if (index >= strings_.size()) return "<bad string index " + std::to_string(index) + ">";
    return Quote(strings_[index]);
  }
  // A label in its usual encoding (key, then str or num and num_unit) is
  // shown short: key="str" or key=num(unit); any other shape in full.
  std::string ShortLabel(std::string_view bytes) const {
    const std::vector<WireField> f = ParseMessage(bytes);
    for (const WireField& x : f) {
      if (x.wire_type != 0) return "";
    }
    if (f.size() == 2 && f[0].number == 1 && f[1].number == 2) {
      return Str(f[0].value).substr(1, Str(f[0].value).size() - 2) + "=" + Str(f[1].value);
    }
    if (f.size() == 3 && f[0].number == 1 && f[1].number == 3 && f[2].number == 4) {
      const std::string unit = Str(f[2].value);
      return Str(f[0].value).substr(1, Str(f[0].value).size() - 2) + "=" +
             std::to_string(static_cast<int64_t>(f[1].value)) + "(" +
             unit.substr(1, unit.size() - 2) + ")";
    }
    return "";
  }
  std::string Message(const std::string& type, std::string_view bytes) const {
    std::string out = "{";
    if (type == "Sample") {
      // label fields shown as "label key=..." one after another
      for (const WireField& f : ParseMessage(bytes)) {
        std::string short_label;
        if (f.number == 3 && f.wire_type == 2) short_label = ShortLabel(f.bytes);
        out += " " + (short_label.empty() ? Field(type, f) : "label " + short_label);
      }
      return out + " }";
    }
    for (const WireField& f : ParseMessage(bytes)) out += " " + Field(type, f);
    return out + " }";
  }
  static std::string Packed(std::string_view bytes, bool is_signed) {
    std::string out = "[";
    size_t i = 0;
    while (i < bytes.size()) {
      const uint64_t v = ReadVarint(bytes, &i);
      if (out.size() > 1) out += ' ';
      out += is_signed ? std::to_string(static_cast<int64_t>(v)) : std::to_string(v);
    }
    return out + "]";
  }
  std::string Field(const std::string& type, const WireField& f) const {
    const auto& fields = Schema().at(type);
    auto it = fields.find(f.number);
    if (it == fields.end()) {
      return "?" + std::to_string(f.number) + ": " +
             (f.wire_type == 0 ? std::to_string(f.value) : Quote(f.bytes));
    }
    const FieldSpec& spec = it->second;
    std::string name = spec.name;
    const bool packed = spec.kind == Kind::kPackedUint || spec.kind == Kind::kPackedInt;
    if (f.wire_type == 2) {
      if (spec.kind == Kind::kMsg) return name + " " + Message(spec.msg, f.bytes);
      if (packed) return name + ": " + Packed(f.bytes, spec.kind == Kind::kPackedInt);
      return name + " (bytes?): " + Quote(f.bytes);
    }
    switch (spec.kind) {
      case Kind::kStr: return name + ": " + Str(f.value);
      case Kind::kBool: return name + ": " + (f.value ? "true" : f.value == 0 ? "false" : "?");
      case Kind::kHex: {
        char buf[32];
        snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(f.value));
        return name + ": " + buf;
      }
      case Kind::kInt:
      case Kind::kPackedInt: return name + ": " + std::to_string(static_cast<int64_t>(f.value));
      case Kind::kMaskedInt: return name + ": #";
      default: return name + ": " + std::to_string(f.value);  // unpacked repeated shows as such
    }
  }

  std::vector<WireField> top_;
  std::vector<std::string> strings_;
};

// Gunzipped, or the test fails: a stream cut short or followed by other
// bytes is not what a viewer would read whole.
std::string GunzipWhole(const std::string& gz) {
  std::string error;
  std::string out = testing::Gunzip(gz, &error);
  EXPECT_EQ(error, "");
  return out;
}

// ---------------------------------------------------------------------------

// The file `dlprof report` writes for `file_name`: the same writer list, the
// same Write() call, from the golden profile and its analysis.
std::string WrittenFile(const std::string& file_name) {
  const Profile profile = MakeGoldenProfile();
  const Analysis analysis = Analyze(profile);
  for (const auto& writer : AllReportWriters()) {
    if (writer->file_name() != file_name) continue;
    TempDir dir;
    writer->Write(profile, analysis, dir.path());
    return ReadFile(dir.File(file_name));
  }
  ADD_FAILURE() << "no writer writes " << file_name;
  return "";
}

bool UpdateGoldens() {
  const char* v = getenv("DLPROF_UPDATE_GOLDEN");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

void CheckGolden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(DLPROF_SOURCE_DIR) + "/tests/golden/" + name;
  ASSERT_FALSE(actual.empty()) << name << ": the writer wrote nothing";
  if (UpdateGoldens()) {
    WriteFile(path, actual);
    ADD_FAILURE() << "DLPROF_UPDATE_GOLDEN is set: wrote " << path
                  << "; review `git diff tests/golden/` and run again without it";
    return;
  }
  const std::string golden = ReadFile(path);
  ASSERT_FALSE(golden.empty()) << path << " is missing; DLPROF_UPDATE_GOLDEN=1 writes it";
  EXPECT_EQ(golden, actual) << name << " differs from its golden (expected = " << path
                            << "). If the change is intended, regenerate with "
                               "DLPROF_UPDATE_GOLDEN=1 (tests/golden/README.md).";
}

TEST(Golden, ProfilePbGz) {
  const std::string gz = WrittenFile("profile.pb.gz");
  ASSERT_GE(gz.size(), 2u);
  ASSERT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzipped, as pprof expects on disk
  ASSERT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  const std::string pb = GunzipWhole(gz);
  // Render() is the same bytes uncompressed (what tests and pipes use).
  EXPECT_EQ(pb, MakePprofReportWriter()->Render(MakeGoldenProfile(), Analyze(MakeGoldenProfile())));
  CheckGolden("pipeline.profile.pb.txt", PprofDump(pb).Run());
}

TEST(Golden, ProfileWallPbGz) {
  // The wall ticks: their wall, CPU and wait times are the input's sums, exact.
  const std::string pb = GunzipWhole(WrittenFile("profile.wall.pb.gz"));
  EXPECT_EQ(pb,
            MakePprofWallReportWriter()->Render(MakeGoldenProfile(), Analyze(MakeGoldenProfile())));
  CheckGolden("pipeline.profile.wall.pb.txt", PprofDump(pb).Run());
}

TEST(Golden, StacksFolded) {
  // Sample counts are sums of the input's counts, not times: all exact.
  CheckGolden("pipeline.stacks.folded", WrittenFile("stacks.folded"));
}

TEST(Golden, StacksOffCpuFolded) {
  // Blocked microseconds, from the wall records: sums of the input's, exact.
  CheckGolden("pipeline.stacks.offcpu.folded", WrittenFile("stacks.offcpu.folded"));
}

TEST(Golden, SummaryTxt) { CheckGolden("pipeline.summary.txt", MaskTimes(WrittenFile("summary.txt"))); }

TEST(Golden, SummaryJson) {
  CheckGolden("pipeline.summary.json", MaskTimes(WrittenFile("summary.json")));
}

TEST(Golden, TraceJson) {
  // One event per line as written; times are floats in µs except the origin.
  CheckGolden("pipeline.trace.json",
              MaskJsonKey(MaskTimes(WrittenFile("trace.json")), "origin_monotonic_ns"));
}

TEST(Golden, TraceJsonGzIsTraceJsonGzipped) {
  // Written beside trace.json by the same Write() call: the same bytes, gzipped.
  const Profile profile = MakeGoldenProfile();
  TempDir dir;
  MakeTraceWriter()->Write(profile, Analyze(profile), dir.path());
  const std::string json = ReadFile(dir.File("trace.json"));
  const std::string gz = ReadFile(dir.File("trace.json.gz"));
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_FALSE(json.empty());
  EXPECT_TRUE(GunzipWhole(gz) == json) << "trace.json.gz is not trace.json gzipped";
}

TEST(Golden, ReportHtmlData) {
  // The page's template is our own file; what the writer makes of the
  // profile is the JSON document in the data element. Its bytes are kept as
  // written (escapes included) and only laid out one member per line.
  const std::string page = WrittenFile("report.html");
  const std::string open = "<script type=\"application/json\" id=\"dlprof-data\">";
  const size_t b = page.find(open);
  ASSERT_NE(b, std::string::npos) << "no data element in report.html";
  const size_t e = page.find("</script>", b + open.size());
  ASSERT_NE(e, std::string::npos);
  const std::string data = page.substr(b + open.size(), e - b - open.size());
  // Script-safe: the only way to close the element early is impossible.
  EXPECT_EQ(data.find_first_of("<>&"), std::string::npos);
  EXPECT_EQ(page.find(open, e), std::string::npos) << "two data elements";
  CheckGolden("pipeline.report.html.json", MaskTimes(JsonLayout(data).Run()));
}

// A writer added to `dlprof report` needs a golden here too.
TEST(Golden, EveryWriterHasAGolden) {
  const std::set<std::string> covered = {"profile.pb.gz", "profile.wall.pb.gz", "stacks.folded",
                                         "stacks.offcpu.folded", "summary.txt", "summary.json",
                                         "trace.json", "report.html"};
  std::set<std::string> written;
  for (const auto& writer : AllReportWriters()) written.insert(writer->file_name());
  EXPECT_EQ(written, covered);
}

// The same writer object, run twice on equal input, writes the same bytes
// (writers keep caches between calls; nothing may depend on addresses or
// hash order).
TEST(Golden, WritersAreDeterministic) {
  for (const auto& writer : AllReportWriters()) {
    const Profile a = MakeGoldenProfile(), b = MakeGoldenProfile();
    const std::string first = writer->Render(a, Analyze(a));
    const std::string second = writer->Render(b, Analyze(b));
    EXPECT_TRUE(first == second) << writer->file_name() << " differs between two runs";
  }
}

// The bytes the pprof golden pins are a profile the real tool accepts.
TEST(Golden, PprofParsedByGoToolPprof) {
  if (RunCommand("command -v go").find("/go") == std::string::npos) {
    GTEST_SKIP() << "go is not installed: go tool pprof not tried on the golden profile";
  }
  TempDir dir;
  const Profile profile = MakeGoldenProfile();
  MakePprofReportWriter()->Write(profile, Analyze(profile), dir.path());
  int status = 0;
  const std::string raw =
      RunCommand("go tool pprof -raw '" + dir.File("profile.pb.gz") + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << raw;
  EXPECT_NE(raw.find("Decoder::Run"), std::string::npos) << raw;
  EXPECT_NE(raw.find("stage_parts"), std::string::npos) << raw;
  MakePprofWallReportWriter()->Write(profile, Analyze(profile), dir.path());
  const std::string wall =
      RunCommand("go tool pprof -raw '" + dir.File("profile.wall.pb.gz") + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << wall;
  EXPECT_NE(wall.find("samples/count wall/nanoseconds[dflt] cpu/nanoseconds wait/nanoseconds"),
            std::string::npos)
      << wall;
  EXPECT_NE(wall.find("[off-cpu: pread64]"), std::string::npos) << wall;
}

// ---------------------------------------------------------------------------
// `dlprof diff`: the golden run before and after a change whose effects are
// known.

constexpr char kBeforeRunId[] = "20231114-221320-100-0000000a";
constexpr char kAfterRunId[] = "20231114-223000-100-0000000b";

Profile MakeGoldenProfileBefore() {
  Profile p = MakeGoldenProfile();
  for (Process& proc : p.processes) proc.fields["run_id"] = kBeforeRunId;
  return p;
}

// The golden run after a third worker was added (pid 203, worker 2, doing
// what worker 1 does, with its own shard_queue): the loop waits 20 ms a step
// instead of 80, and its steps take 140 ms instead of 200. Besides: the odd
// stage's read blocks 100 ms instead of 250, the collate thread is gone (a
// stage removed), worker 0 shuffles (a stage added), prefetch is fuller,
// spill is gone and a buffer "cache" is new.
Profile MakeGoldenProfileAfter() {
  Profile p = MakeGoldenProfile();
  for (Process& proc : p.processes) proc.fields["run_id"] = kAfterRunId;
  Process w2 = p.processes[2];
  w2.pid = 203;
  w2.worker = 2;
  w2.file = "node-b/worker-203.pb.gz";
  p.processes.push_back(w2);
  const uint32_t model = p.InternStage("model"), load = p.InternStage("load");
  const uint32_t s_model = p.InternStagePath({model});
  const uint32_t s_fetch = p.InternStagePath({load, p.InternStage("read"), p.InternStage(kOddStage)});
  const uint32_t s_collate = p.InternStagePath({p.InternStage("collate")});
  const uint32_t s_shuffle = p.InternStagePath({load, p.InternStage("shuffle")});
  std::vector<Sample> samples;
  uint32_t worker_stack = 0;
  for (Sample s : p.samples) {
    if (s.stage_path == s_collate) continue;
    if (s.process == 0 && s.tid == 100) {
      if (s.stage_path == 0 && s.kind == SampleKind::kWall) s.wall_ns = 20 * kMs;  // the wait
      if (s.stage_path == s_model) s.time_ns -= 60 * kMs;  // inside the shorter step
    }
    if (s.stage_path == s_fetch && s.kind == SampleKind::kWall && s.process == 1) {
      s.wall_ns = 100 * kMs;
    }
    if (s.process == 1 && s.kind == SampleKind::kCpu) worker_stack = s.stack;
    samples.push_back(s);
    if (s.process == 2) {
      s.process = 3;
      s.tid = 203;
      samples.push_back(s);
    }
  }
  Sample shuffle;
  shuffle.process = 1;
  shuffle.tid = 201;
  shuffle.stack = worker_stack;
  shuffle.stage_path = s_shuffle;
  shuffle.time_ns = kT0 + 650 * kMs;
  shuffle.count = 2;
  shuffle.cpu_ns = 20 * kMs;
  samples.push_back(shuffle);
  shuffle.kind = SampleKind::kWall;
  shuffle.count = 0;
  shuffle.wall_ns = 30 * kMs;
  shuffle.cpu_ns = 25 * kMs;
  samples.push_back(shuffle);
  p.samples = samples;
  for (Process& proc : p.processes) proc.samples = 0;
  for (const Sample& s : p.samples) {
    if (s.kind == SampleKind::kCpu) p.processes[s.process].samples += s.count;
  }
  std::vector<Interval> intervals;
  for (Interval iv : p.intervals) {
    if (iv.process == 0 && iv.kind == IntervalKind::kWait) iv.end_ns = iv.begin_ns + 20 * kMs;
    if (iv.process == 0 && iv.kind == IntervalKind::kStep) iv.end_ns = iv.begin_ns + 140 * kMs;
    intervals.push_back(iv);
    if (iv.process == 2) {
      iv.process = 3;
      iv.tid = 203;
      intervals.push_back(iv);
    }
  }
  p.intervals = intervals;
  BufferSeries prefetch = p.buffers[0], shards = p.buffers[1], cache;
  const uint64_t sizes[] = {2, 3, 4, 4, 3, 4, 4, 2};
  for (size_t i = 0; i < prefetch.snapshots.size(); ++i) prefetch.snapshots[i].size = sizes[i];
  BufferSeries shards2 = shards;
  shards2.process = 3;
  shards2.snapshots = {{kT0 + 200 * kMs, 2}, {kT0 + 400 * kMs, 8}};
  cache.process = 0;
  cache.name = "cache";
  cache.capacity = 16;
  cache.snapshots = {{kT0 + 300 * kMs, 4}, {kT0 + 600 * kMs, 8}};
  p.buffers = {prefetch, shards, shards2, cache};
  return p;
}

RunDiff GoldenDiff() {
  const Profile before = MakeGoldenProfileBefore(), after = MakeGoldenProfileAfter();
  RunDiff d = DiffRuns(Analyze(before), Analyze(after));
  d.before.input = "runs/before";
  d.after.input = "runs/after";
  d.before.run_ids = RunIds(before);
  d.after.run_ids = RunIds(after);
  return d;
}

TEST(Golden, DiffTxt) { CheckGolden("pipeline.diff.txt", MaskTimes(DiffText(GoldenDiff()))); }

TEST(Golden, DiffJson) {
  CheckGolden("pipeline.diff.json", MaskTimes(DiffJson(GoldenDiff()).dump(2) + "\n"));
}

// What the goldens above hide behind '#': the direction of every change
// the after-profile was made with.
TEST(Golden, DiffHasTheKnownChanges) {
  const RunDiff d = GoldenDiff();
  EXPECT_EQ(d.before.run_ids, std::vector<std::string>{kBeforeRunId});
  EXPECT_EQ(d.after.run_ids, std::vector<std::string>{kAfterRunId});
  ASSERT_TRUE(d.data_wait_fraction.both());
  EXPECT_NEAR(d.data_wait_fraction.before, 80.0 / 200, 1e-9);
  EXPECT_NEAR(d.data_wait_fraction.after, 20.0 / 140, 1e-9);
  EXPECT_NEAR(d.step_median_s.delta(), -0.060, 1e-9);
  EXPECT_NEAR(d.data_wait_median_s.delta(), -0.060, 1e-9);
  EXPECT_EQ(d.before.verdict.severity, "high");
  EXPECT_EQ(d.after.verdict.severity, "moderate");
  EXPECT_EQ(d.workers_concurrent.before, 2);
  EXPECT_EQ(d.workers_concurrent.after, 3);
  auto stage = [&](const std::string& name) -> const StageDiff* {
    for (const StageDiff& s : d.stages) {
      if (s.name == name) return &s;
    }
    return nullptr;
  };
  ASSERT_NE(stage("collate"), nullptr);
  EXPECT_TRUE(stage("collate")->in_before && !stage("collate")->in_after);
  ASSERT_NE(stage("shuffle"), nullptr);
  EXPECT_TRUE(!stage("shuffle")->in_before && stage("shuffle")->in_after);
  EXPECT_EQ(stage("shuffle")->role_after, "worker");
  // The odd stage: 250 + 80 ms blocked before; 100 + 80 + 80 (the new
  // worker's copy of worker 1's) after.
  const StageDiff* odd = stage(kOddStage);
  ASSERT_NE(odd, nullptr);
  EXPECT_NEAR(odd->self_wall_s.before, 0.330, 1e-9);
  EXPECT_NEAR(odd->self_wall_s.after, 0.260, 1e-9);
  // decode: worker 1's 100 ms once more.
  EXPECT_NEAR(stage("decode")->self_wall_s.delta(), 0.100, 1e-9);
  auto buffer = [&](const std::string& name) -> const BufferDiff* {
    for (const BufferDiff& b : d.buffers) {
      if (b.name == name) return &b;
    }
    return nullptr;
  };
  ASSERT_NE(buffer("prefetch"), nullptr);
  EXPECT_NEAR(buffer("prefetch")->mean_occupancy.before, (0 + 0 + 1 + 4 + 2 + 0 + 3 + 4) / 32.0, 1e-9);
  EXPECT_NEAR(buffer("prefetch")->mean_occupancy.after, (2 + 3 + 4 + 4 + 3 + 4 + 4 + 2) / 32.0, 1e-9);
  // shard_queue pools worker 0's {5, 8} and the new worker's {2, 8} of 8.
  ASSERT_NE(buffer("shard_queue"), nullptr);
  EXPECT_EQ(buffer("shard_queue")->processes.after, 2);
  EXPECT_NEAR(buffer("shard_queue")->mean_occupancy.after, (5 + 8 + 2 + 8) / 32.0, 1e-9);
  EXPECT_NEAR(buffer("shard_queue")->full_fraction.after, 0.5, 1e-9);
  ASSERT_NE(buffer("spill"), nullptr);
  EXPECT_TRUE(buffer("spill")->in_before && !buffer("spill")->in_after);
  ASSERT_NE(buffer("cache"), nullptr);
  EXPECT_TRUE(!buffer("cache")->in_before && buffer("cache")->in_after);
}

}  // namespace
}  // namespace dlprof
