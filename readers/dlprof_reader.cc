#include "readers/dlprof_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

#include <dlprof/dlprof.h>
#include <dlprof/format.h>

#include "core/varint.h"
#include "readers/file_bytes.h"
#include "readers/id_map.h"
#include "readers/tick_cpu_split.h"
#include "readers/unsampled_ticks.h"

namespace dlprof {
namespace {

uint32_t U32At(const uint8_t* d, size_t off) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(d[off + i]) << (8 * i);
  return v;
}

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

// Times are deltas from a base; damaged input must not overflow (undefined
// behaviour) while they add up, so they wrap like the unsigned numbers they
// are, and are clamped where they are kept.
int64_t AddDelta(int64_t t, uint64_t zigzag) {
  return static_cast<int64_t>(static_cast<uint64_t>(t) + static_cast<uint64_t>(UnZigZag(zigzag)));
}

struct RawSample {
  uint32_t thread;
  uint32_t stack;  // file stack id
  uint32_t path;   // file path id
  int64_t time;
  int64_t weight;
};

struct OpenSpan {
  int64_t begin;
  uint32_t stage;
};

// A Python code object (DLPROF_CHUNK_PY_CODES).
struct PyCode {
  std::string qualname, filename;
  int first_line = 0;
};

// Longest qualname or file name a PY_CODES chunk may hold: the runtime
// writes at most 1 KiB of each; a path may be 4 KiB (PATH_MAX). Longer is
// damage, as is a first line past what an int holds.
constexpr uint64_t kMaxPyName = 4096;
constexpr uint64_t kMaxPyLine = 0x7fffffff;

// Longest stage name kept: the runtime cuts names to 1 KiB and marks them
// "..." (core/annotations.h, kMaxStageNameBytes); longer ones are cut here the
// same way, as a path's names are repeated on every line of the outputs.
constexpr size_t kMaxStageName = 1024;

// Decodes one file's chunks; ids are the file's own until Finish() maps them.
class FileDecoder {
 public:
  // `raw`: scratch for the CPU samples until Finish(), reused file after file
  // (its pages stay mapped); `cpu_samples`: how many the file declares.
  FileDecoder(const std::string& path, Profile* profile, std::vector<RawSample>* raw,
              uint64_t cpu_samples)
      : path_(path), p_(profile), raw_(*raw) {
    raw_.clear();
    raw_.reserve(cpu_samples);
    proc_index_ = static_cast<uint32_t>(p_->processes.size());
    p_->processes.emplace_back();
    proc().file = path;
  }

  Process& proc() { return p_->processes[proc_index_]; }

  void Warn(size_t offset, const std::string& what) {
    proc().warnings.push_back(path_ + ": offset " + std::to_string(offset) + ": " + what);
  }

  // Returns false if the payload did not decode completely. `offset`: the
  // chunk's in the file, for warnings.
  bool Chunk(uint32_t type, const uint8_t* b, const uint8_t* e, size_t offset) {
    chunk_offset_ = offset;
    // Complete means the file ends with END: one written before an exec that
    // failed is followed by more chunks, and the process may yet die.
    if (type != DLPROF_CHUNK_END) proc().complete = false;
    switch (type) {
      case DLPROF_CHUNK_PROCESS: return ProcessFields(b, e);
      case DLPROF_CHUNK_THREADS: return Threads(b, e);
      case DLPROF_CHUNK_STAGES: return Stages(b, e);
      case DLPROF_CHUNK_STAGE_PATHS: return Paths(b, e);
      case DLPROF_CHUNK_STACKS: return Stacks(b, e);
      case DLPROF_CHUNK_MAPS: return Maps(b, e);
      case DLPROF_CHUNK_SAMPLES: return Samples(b, e);
      case DLPROF_CHUNK_WALL: return Wall(b, e, /*runs=*/false, /*waits=*/false, false);
      case DLPROF_CHUNK_WALL_RUNS: return Wall(b, e, /*runs=*/true, /*waits=*/false, false);
      case DLPROF_CHUNK_WALL_STATES: return Wall(b, e, /*runs=*/true, /*waits=*/true, false);
      case DLPROF_CHUNK_WALL_STACKS: return Wall(b, e, /*runs=*/true, /*waits=*/true, true);
      case DLPROF_CHUNK_BUFFERS: return Buffers(b, e);
      case DLPROF_CHUNK_SNAPSHOTS: return Snapshots(b, e);
      case DLPROF_CHUNK_EVENTS: return Events(b, e);
      case DLPROF_CHUNK_STATS: return Stats(b, e);
      case DLPROF_CHUNK_PY_CODES: return PyCodes(b, e);
      case DLPROF_CHUNK_END: {
        uint64_t t;
        if (!GetVarint(&b, e, &t)) return false;
        proc().end_ns = ClampTime(static_cast<int64_t>(t));
        proc().complete = true;
        return true;
      }
      default: return true;  // a newer writer's chunk: skip it
    }
  }

  void Finish();

 private:
  bool ProcessFields(const uint8_t* b, const uint8_t* e) {
    uint64_t n;
    if (!GetVarint(&b, e, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      std::string k, v;
      if (!GetBytes(&b, e, &k) || !GetBytes(&b, e, &v)) return false;
      proc().fields[k] = v;
    }
    return true;
  }
  bool Threads(const uint8_t* b, const uint8_t* e) {
    uint64_t n, idx, tid;
    if (!GetVarint(&b, e, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      std::string name;
      if (!GetVarint(&b, e, &idx) || !GetVarint(&b, e, &tid) || !GetBytes(&b, e, &name)) return false;
      threads_.Set(static_cast<uint32_t>(idx), static_cast<uint32_t>(tid));
    }
    return true;
  }
  bool Stages(const uint8_t* b, const uint8_t* e) {
    uint64_t n, id;
    if (!GetVarint(&b, e, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      std::string name;
      if (!GetVarint(&b, e, &id) || !GetBytes(&b, e, &name)) return false;
      if (name.size() > kMaxStageName + 3) {
        if (names_cut_++ == 0) name_cut_at_ = chunk_offset_;
        longest_name_ = std::max<uint64_t>(longest_name_, name.size());
        // As the runtime cuts: not inside a UTF-8 sequence, then "...".
        size_t n = kMaxStageName;
        for (int k = 0; k < 3 && n > 0 && (static_cast<unsigned char>(name[n]) & 0xc0) == 0x80; ++k) --n;
        name.resize(n);
        name += "...";
      }
      stages_.Set(static_cast<uint32_t>(id), p_->InternStage(name.empty() ? "?" : name));
    }
    return true;
  }
  // A path deeper than the runtime records keeps its outermost
  // DLPROF_MAX_STAGE_DEPTH stages: every writer repeats a path's names on
  // each of its lines, so depth multiplies output (docs/ARCHITECTURE.md,
  // "Bounds on what an input multiplies").
  bool Paths(const uint8_t* b, const uint8_t* e) {
    uint64_t first, n, depth, id;
    if (!GetVarint(&b, e, &first) || !GetVarint(&b, e, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      if (!GetVarint(&b, e, &depth) || depth > 1024) return false;
      if (depth > DLPROF_MAX_STAGE_DEPTH) {
        if (paths_cut_++ == 0) path_cut_at_ = chunk_offset_;
        deepest_path_ = std::max(deepest_path_, depth);
      }
      std::vector<uint32_t> path;
      for (uint64_t d = 0; d < depth; ++d) {
        if (!GetVarint(&b, e, &id)) return false;
        if (d >= DLPROF_MAX_STAGE_DEPTH) continue;
        const uint32_t* stage = stages_.Find(static_cast<uint32_t>(id));
        path.push_back(stage ? *stage : p_->InternStage("?"));
      }
      paths_.Set(static_cast<uint32_t>(first + i), p_->InternStagePath(path));
    }
    return true;
  }
  bool Stacks(const uint8_t* b, const uint8_t* e) {
    uint64_t first, n, depth, delta;
    if (!GetVarint(&b, e, &first) || !GetVarint(&b, e, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      if (!GetVarint(&b, e, &depth) || depth > 4096) return false;
      std::vector<uint64_t> pcs;
      uint64_t pc = 0;
      for (uint64_t d = 0; d < depth; ++d) {
        if (!GetVarint(&b, e, &delta)) return false;
        pc += static_cast<uint64_t>(UnZigZag(delta));
        pcs.push_back(pc);
      }
      stacks_.Set(static_cast<uint32_t>(first + i), std::move(pcs));
    }
    return true;
  }
  bool PyCodes(const uint8_t* b, const uint8_t* e) {
    uint64_t n, id, first_line;
    if (!GetVarint(&b, e, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      PyCode code;
      if (!GetVarint(&b, e, &id) || id > DLPROF_PY_CODE_MASK || !GetName(&b, e, &code.qualname) ||
          !GetName(&b, e, &code.filename) || !GetVarint(&b, e, &first_line) ||
          first_line > kMaxPyLine) {
        return false;
      }
      if (code.qualname.empty()) code.qualname = "?";
      code.first_line = static_cast<int>(first_line);
      py_codes_.Set(static_cast<uint32_t>(id), std::move(code));
    }
    return true;
  }
  static bool GetName(const uint8_t** b, const uint8_t* e, std::string* s) {
    const uint8_t* at = *b;
    uint64_t n;
    if (!GetVarint(&at, e, &n) || n > kMaxPyName) return false;
    return GetBytes(b, e, s);
  }
  bool Maps(const uint8_t* b, const uint8_t* e) {
    uint64_t n;
    if (!GetVarint(&b, e, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      Mapping m;
      std::string id;
      if (!GetVarint(&b, e, &m.start) || !GetVarint(&b, e, &m.limit) ||
          !GetVarint(&b, e, &m.offset) || !GetBytes(&b, e, &m.path) || !GetBytes(&b, e, &id)) {
        return false;
      }
      m.build_id = Hex(id);
      auto& maps = proc().mappings;
      bool known = std::any_of(maps.begin(), maps.end(), [&](const Mapping& x) {
        return x.start == m.start && x.limit == m.limit && x.path == m.path;
      });
      if (!known) maps.push_back(std::move(m));
    }
    return true;
  }
  bool Samples(const uint8_t* b, const uint8_t* e) {
    uint64_t base, n, dt, thread, stack, path, extra;
    if (!GetVarint(&b, e, &base) || !GetVarint(&b, e, &n)) return false;
    int64_t t = static_cast<int64_t>(base);
    for (uint64_t i = 0; i < n; ++i) {
      if (!GetVarint(&b, e, &dt) || !GetVarint(&b, e, &thread) || !GetVarint(&b, e, &stack) ||
          !GetVarint(&b, e, &path) || !GetVarint(&b, e, &extra)) {
        return false;
      }
      t = AddDelta(t, dt);
      raw_.push_back({static_cast<uint32_t>(thread), static_cast<uint32_t>(stack),
                      static_cast<uint32_t>(path), ClampTime(t), ClampUnsigned(extra) + 1});
    }
    return true;
  }
  // WALL (one record per tick), WALL_RUNS (one per run of ticks with the
  // same stage path and state, which differs only by its tick count),
  // WALL_STATES (a run that also says how long the thread waited for a core)
  // or WALL_STACKS (and the stack a blocked thread was in).
  // Either way one wall sample per record, standing for the wall time it sums.
  bool Wall(const uint8_t* b, const uint8_t* e, bool runs, bool waits, bool stacks) {
    uint64_t base, n, dt, thread, path, ticks = 1, wall, cpu, wait = 0, state, stack = 0;
    if (!GetVarint(&b, e, &base) || !GetVarint(&b, e, &n)) return false;
    int64_t t = static_cast<int64_t>(base);
    for (uint64_t i = 0; i < n; ++i) {
      if (!GetVarint(&b, e, &dt) || !GetVarint(&b, e, &thread) || !GetVarint(&b, e, &path) ||
          (runs && !GetVarint(&b, e, &ticks)) || !GetVarint(&b, e, &wall) ||
          !GetVarint(&b, e, &cpu) || (waits && !GetVarint(&b, e, &wait)) ||
          !GetVarint(&b, e, &state) || (stacks && !GetVarint(&b, e, &stack))) {
        return false;
      }
      (void)ticks;
      t = AddDelta(t, dt);
      Sample s;
      s.process = proc_index_;
      s.tid = Tid(static_cast<uint32_t>(thread));
      s.stage_path = PathIndex(static_cast<uint32_t>(path));
      s.kind = SampleKind::kWall;
      s.time_ns = ClampTime(t);
      s.count = 0;
      s.wall_ns = ClampUnsigned(wall);
      s.cpu_ns = ClampUnsigned(cpu);
      // Three states: running (cpu_ns), runnable but waiting for a core
      // (wait_ns), blocked (the rest). A damaged or hostile record cannot
      // make the wait more than its wall time leaves.
      s.wait_ns = std::min(ClampUnsigned(wait), std::max<int64_t>(0, s.wall_ns - s.cpu_ns));
      // on_cpu: the state at the ticks, running (or runnable) rather than
      // blocked in a call.
      s.on_cpu = state == 0;
      s.stack = StateStack(state);
      // The blocked thread's stack goes under the state's pseudo frame once
      // the file's mappings are known (Finish). An id no STACKS chunk
      // defined before is refused, the pseudo frame alone kept.
      if (stack != 0 && state != 0) {
        if (stack <= UINT32_MAX && stacks_.Find(static_cast<uint32_t>(stack)) != nullptr) {
          wall_stacks_.push_back({p_->samples.size(), static_cast<uint32_t>(stack)});
        } else {
          if (unknown_wall_stacks_++ == 0) unknown_wall_stack_at_ = chunk_offset_;
        }
      }
      p_->samples.push_back(s);
    }
    return true;
  }
  bool Buffers(const uint8_t* b, const uint8_t* e) {
    uint64_t n, id, cap;
    if (!GetVarint(&b, e, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      std::string name;
      if (!GetVarint(&b, e, &id) || !GetBytes(&b, e, &name) || !GetVarint(&b, e, &cap)) return false;
      BufferSeries series;
      series.process = proc_index_;
      series.name = name;
      series.capacity = cap;
      buffers_.Set(static_cast<uint32_t>(id), p_->buffers.size());
      p_->buffers.push_back(std::move(series));
    }
    return true;
  }
  bool Snapshots(const uint8_t* b, const uint8_t* e) {
    uint64_t base, n, dt, id, size;
    if (!GetVarint(&b, e, &base) || !GetVarint(&b, e, &n)) return false;
    int64_t t = static_cast<int64_t>(base);
    for (uint64_t i = 0; i < n; ++i) {
      if (!GetVarint(&b, e, &dt) || !GetVarint(&b, e, &id) || !GetVarint(&b, e, &size)) return false;
      t = AddDelta(t, dt);
      if (const size_t* buffer = buffers_.Find(static_cast<uint32_t>(id))) {
        p_->buffers[*buffer].snapshots.push_back({ClampTime(t), size});
      }
    }
    return true;
  }
  bool Events(const uint8_t* b, const uint8_t* e) {
    uint64_t base, n, dt, thread, kind, stage;
    if (!GetVarint(&b, e, &base) || !GetVarint(&b, e, &n)) return false;
    int64_t t = static_cast<int64_t>(base);
    for (uint64_t i = 0; i < n; ++i) {
      if (!GetVarint(&b, e, &dt) || !GetVarint(&b, e, &thread) || !GetVarint(&b, e, &kind) ||
          !GetVarint(&b, e, &stage)) {
        return false;
      }
      t = AddDelta(t, dt);
      Event(static_cast<uint32_t>(thread), kind, static_cast<uint32_t>(stage), ClampTime(t));
    }
    return true;
  }
  void Event(uint32_t thread, uint64_t kind, uint32_t stage, int64_t t) {
    uint32_t tid = Tid(thread);
    auto& open = open_[thread];
    auto close_span = [&](IntervalKind k, std::vector<OpenSpan>* spans) {
      if (spans->empty()) return;
      OpenSpan s = spans->back();
      spans->pop_back();
      Interval iv;
      iv.process = proc_index_;
      iv.tid = tid;
      iv.kind = k;
      iv.stage = s.stage;
      iv.begin_ns = s.begin;
      iv.end_ns = t;
      p_->intervals.push_back(iv);
    };
    switch (kind) {
      case DLPROF_EVENT_STEP_BEGIN: open.steps.assign(1, {t, 0}); break;
      case DLPROF_EVENT_STEP_END: close_span(IntervalKind::kStep, &open.steps); break;
      case DLPROF_EVENT_WAIT_BEGIN: open.waits.assign(1, {t, 0}); break;
      case DLPROF_EVENT_WAIT_END: close_span(IntervalKind::kWait, &open.waits); break;
      case DLPROF_EVENT_STAGE_ENTER: {
        const uint32_t* id = stages_.Find(stage);
        open.stages.push_back({t, id ? *id : 0});
        break;
      }
      case DLPROF_EVENT_STAGE_EXIT: {
        // The span this exit closes. A thread's stage events may start in
        // the middle of its run (core/thread_registry.h, stage_events): an
        // exit of a stage entered before then has no open span, and must
        // not close an inner one.
        const uint32_t* id = stages_.Find(stage);
        const uint32_t index = id ? *id : 0;
        auto it = std::find_if(open.stages.rbegin(), open.stages.rend(),
                               [&](const OpenSpan& o) { return o.stage == index; });
        if (it == open.stages.rend()) break;
        open.stages.erase(std::next(it).base() + 1, open.stages.end());
        close_span(IntervalKind::kStage, &open.stages);
        break;
      }
      default: break;
    }
  }
  bool Stats(const uint8_t* b, const uint8_t* e) {
    uint64_t n, v;
    if (!GetVarint(&b, e, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      std::string name;
      if (!GetBytes(&b, e, &name) || !GetVarint(&b, e, &v)) return false;
      proc().counters[name] = v;
    }
    return true;
  }

  uint32_t Tid(uint32_t thread) {
    const uint32_t* tid = threads_.Find(thread);
    return tid ? *tid : 0;
  }
  uint32_t PathIndex(uint32_t path) {
    if (path == 0) return 0;
    if (const uint32_t* index = paths_.Find(path)) return *index;
    ++unknown_ids_;
    return 0;
  }
  uint32_t StackIndex(uint32_t stack);
  Location PythonLocation(uint64_t value);

  const std::string path_;
  Profile* p_;
  uint32_t proc_index_;
  IdMap<uint32_t> threads_, stages_, paths_;
  IdMap<std::vector<uint64_t>> stacks_;
  IdMap<uint32_t> stack_index_;  // file stack id -> profile stack
  IdMap<size_t> buffers_;
  IdMap<PyCode> py_codes_;
  std::vector<RawSample>& raw_;
  struct OpenSpans {
    std::vector<OpenSpan> steps, waits, stages;
  };
  std::unordered_map<uint32_t, OpenSpans> open_;
  uint64_t unknown_ids_ = 0;
  uint64_t paths_cut_ = 0, deepest_path_ = 0;   // stage paths deeper than the runtime's
  uint64_t names_cut_ = 0, longest_name_ = 0;   // stage names longer than the runtime's
  size_t chunk_offset_ = 0;                     // of the chunk being decoded
  size_t path_cut_at_ = 0, name_cut_at_ = 0;    // the first chunk with a cut
  std::unordered_map<uint64_t, uint32_t> state_stacks_;  // wall record state -> stack
  struct WallStack {
    size_t sample;   // index in p_->samples
    uint32_t stack;  // the file's stack id
  };
  std::vector<WallStack> wall_stacks_;  // resolved in Finish, with the mappings
  uint64_t unknown_wall_stacks_ = 0;
  size_t unknown_wall_stack_at_ = 0;  // the first chunk with one
  // (state stack, file stack) -> the pseudo frame over the blocked stack
  std::unordered_map<uint64_t, uint32_t> blocked_stacks_;

  // The one-frame pseudo stack of a wall record's state: "[running]" or
  // "[off-cpu: read]". Built once per state, not once per record.
  uint32_t StateStack(uint64_t state) {
    auto [it, added] = state_stacks_.emplace(state, 0);
    if (added) {
      Location loc;
      loc.pseudo = true;
      loc.frames.push_back({state == 0 ? "[running]" : "[off-cpu: " + SyscallName(state - 1) + "]", "", 0});
      it->second = p_->InternStack({p_->InternLocation(loc)});
    }
    return it->second;
  }
};

uint32_t FileDecoder::StackIndex(uint32_t stack) {
  if (stack == 0) return 0;
  if (const uint32_t* cached = stack_index_.Find(stack)) return *cached;
  const std::vector<uint64_t>* pcs = stacks_.Find(stack);
  if (pcs == nullptr) {
    ++unknown_ids_;
    return 0;
  }
  const auto& maps = proc().mappings;
  std::vector<uint32_t> locs;
  locs.reserve(pcs->size());
  for (uint64_t pc : *pcs) {
    if (pc & DLPROF_PY_FRAME_BIT) {
      locs.push_back(p_->InternLocation(PythonLocation(pc)));
      continue;
    }
    Location loc;
    loc.address = pc;
    // The newest mapping that covers the address wins (a library reloaded).
    for (auto m = maps.rbegin(); m != maps.rend(); ++m) {
      if (pc >= m->start && pc < m->limit) {
        loc.module = m->path;
        loc.build_id = m->build_id;
        loc.module_offset = pc - m->start + m->offset;
        break;
      }
    }
    locs.push_back(p_->InternLocation(loc));
  }
  uint32_t index = p_->InternStack(locs);
  stack_index_.Set(stack, index);
  return index;
}

// A Python frame value of a stack: its code (an id this file's PY_CODES
// define), the line being run, the entry flag. Bits 56-61 are not used yet.
Location FileDecoder::PythonLocation(uint64_t value) {
  const uint32_t id = static_cast<uint32_t>(value & DLPROF_PY_CODE_MASK);
  Location loc;
  loc.python = true;
  loc.python_entry = (value & DLPROF_PY_ENTRY_BIT) != 0;
  Frame f;
  f.python = true;
  f.line = static_cast<int>((value >> DLPROF_PY_LINE_SHIFT) & DLPROF_PY_LINE_MASK);
  if (const PyCode* code = py_codes_.Find(id)) {
    f.function = code->qualname;
    f.file = code->filename;
    f.start_line = code->first_line;
  } else {
    ++unknown_ids_;
    f.function = "[python code " + std::to_string(id) + "]";
  }
  loc.frames.push_back(std::move(f));
  return loc;
}

void FileDecoder::Finish() {
  auto& pr = proc();
  auto field = [&](const char* k) -> std::string {
    auto it = pr.fields.find(k);
    return it != pr.fields.end() ? it->second : std::string();
  };
  auto num = [&](const char* k, long long dflt) {
    std::string v = field(k);
    return v.empty() ? dflt : std::strtoll(v.c_str(), nullptr, 10);  // saturates, unlike atoll
  };
  pr.pid = static_cast<int>(num("pid", 0));
  pr.ppid = static_cast<int>(num("ppid", 0));
  pr.role = field("role").empty() ? "main" : field("role");
  pr.worker = static_cast<int>(num("worker", -1));
  pr.command = field("command");
  long long hz = num("hz", 100);
  pr.hz = hz >= 1 && hz <= 1000000 ? static_cast<int>(hz) : 100;
  pr.mode = field("mode");
  pr.unwinder = field("unwinder");
  pr.timer = field("timer");
  pr.start_ns = ClampTime(num("start_ns", 0));
  pr.start_unix_ns = std::max(0LL, num("start_unix_ns", 0));
  pr.sampling_start_ns = ClampTime(num("sampling_start_ns", pr.start_ns));
  pr.end_reason = pr.complete ? field("end") : "";
  const int64_t period = 1000000000LL / pr.hz;
  int64_t last = pr.start_ns;
  // Blocked wall records: "[off-cpu: read]" as the leaf of the stack the
  // thread was blocked in.
  for (const WallStack& w : wall_stacks_) {
    Sample& s = p_->samples[w.sample];
    const uint64_t key = uint64_t{s.stack} << 32 | w.stack;
    auto [it, added] = blocked_stacks_.emplace(key, s.stack);
    if (added) {
      const uint32_t native = StackIndex(w.stack);
      if (native != 0) {
        std::vector<uint32_t> locs = p_->stacks[s.stack];
        const auto& frames = p_->stacks[native];
        locs.insert(locs.end(), frames.begin(), frames.end());
        it->second = p_->InternStack(locs);
      }
    }
    s.stack = it->second;
  }
  if (unknown_wall_stacks_ > 0) {
    pr.warnings.push_back(path_ + ": offset " + std::to_string(unknown_wall_stack_at_) + ": " +
                          std::to_string(unknown_wall_stacks_) + " wall record" +
                          (unknown_wall_stacks_ > 1 ? "s name a stack id" : " names a stack id") +
                          " no earlier chunk defines; kept without their stack");
  }
  for (const RawSample& r : raw_) {
    Sample s;
    s.process = proc_index_;
    s.tid = Tid(r.thread);
    s.stack = StackIndex(r.stack);
    s.stage_path = PathIndex(r.path);
    s.time_ns = r.time;
    s.count = r.weight;
    s.cpu_ns = ClampedProduct(r.weight, period);
    // Periods, not records: a sample taken after periods in the kernel
    // stands for them too, and the flame graph, stacks.folded and pprof
    // count it so (the pprof and gperftools readers sum counts likewise).
    pr.samples = AddCount(pr.samples, r.weight);
    ++pr.records;
    p_->samples.push_back(s);
    last = std::max(last, r.time);
  }
  ShareUnsampledTicks(p_, proc_index_, period);
  // Then the wall ticks' CPU that the samples place in other stages
  // (readers/tick_cpu_split.h): short stages between a thread's waits.
  SplitTickCpuBySamples(p_, proc_index_, StateStack(0));
  if (pr.mode != "detailed") {
    // Outside detailed mode a thread's stage events start only once it
    // loses periods in the kernel: they served the sharing above, and as
    // stage spans they would show a part of a run as if it were all.
    auto& iv = p_->intervals;
    iv.erase(std::remove_if(iv.begin(), iv.end(),
                            [&](const Interval& i) {
                              return i.process == proc_index_ && i.kind == IntervalKind::kStage;
                            }),
             iv.end());
  }
  auto counter = [&](const char* k) {
    auto it = pr.counters.find(k);
    return it != pr.counters.end() ? it->second : 0;
  };
  pr.dropped = counter("dropped_ring") + counter("dropped_busy") + counter("dropped_nothread");
  if (!pr.complete) {
    // The process vanished (killed) or is still running: end at its last record.
    for (const Sample& s : p_->samples) {
      if (s.process == proc_index_) last = std::max(last, s.time_ns);
    }
    pr.end_ns = last;
    auto interposers = pr.fields.find("interposers");
    if (interposers != pr.fields.end() && interposers->second.rfind("off", 0) == 0) {
      // Loaded by dlopen: an _exit() (os._exit, as workers leave) is not seen.
      pr.warnings.push_back(path_ + ": no end record: libdlprof was loaded after the program "
                            "started (dlopen), so an _exit() is not seen; samples up to its last "
                            "tick are kept");
    } else {
      pr.warnings.push_back(path_ + ": no end record: the process was killed or is still "
                            "running; samples up to its last flush are kept");
    }
  }
  // One warning each for the file, at the offset of the first chunk that
  // had such a path or name.
  if (paths_cut_ > 0) {
    pr.warnings.push_back(path_ + ": offset " + std::to_string(path_cut_at_) + ": " +
                          std::to_string(paths_cut_) + " stage path" +
                          (paths_cut_ > 1 ? "s" : "") + " deeper than the runtime's " +
                          std::to_string(DLPROF_MAX_STAGE_DEPTH) + " (down to depth " +
                          std::to_string(deepest_path_) + ") cut to their outermost " +
                          std::to_string(DLPROF_MAX_STAGE_DEPTH) + " stages");
  }
  if (names_cut_ > 0) {
    pr.warnings.push_back(path_ + ": offset " + std::to_string(name_cut_at_) + ": " +
                          std::to_string(names_cut_) + " stage name" +
                          (names_cut_ > 1 ? "s" : "") + " longer than the runtime's " +
                          std::to_string(kMaxStageName) + " bytes (up to " +
                          std::to_string(longest_name_) + " bytes) cut to it and marked \"...\"");
  }
  if (unknown_ids_ > 0) {
    pr.warnings.push_back(path_ + ": " + std::to_string(unknown_ids_) +
                          " records refer to definitions lost with a damaged chunk");
  }
}

// Records (CPU samples; wall ticks or runs of them, one sample each) a file's
// chunks declare, from their headers and counts alone (no checksums): a
// capacity hint, so that 2 million samples are not copied as their vector
// grows. Damage only makes it low; each record takes at least 5 bytes, so a
// hostile count cannot make it larger than the file allows.
struct RecordCounts {
  uint64_t cpu = 0, wall = 0;
};

RecordCounts CountRecords(const std::string& data) {
  RecordCounts c;
  const auto* base = reinterpret_cast<const uint8_t*>(data.data());
  const size_t size = data.size();
  size_t off = DLPROF_FILE_HEADER_SIZE;
  while (off <= size && size - off >= DLPROF_CHUNK_HEADER_SIZE) {
    const uint32_t type = U32At(base, off + 4), len = U32At(base, off + 8);
    if (U32At(base, off) != DLPROF_CHUNK_MAGIC || size - off - DLPROF_CHUNK_HEADER_SIZE < len) break;
    const uint8_t* b = base + off + DLPROF_CHUNK_HEADER_SIZE;
    const uint8_t* e = b + len;
    uint64_t time, n;
    const bool records = type == DLPROF_CHUNK_SAMPLES || type == DLPROF_CHUNK_WALL ||
                         type == DLPROF_CHUNK_WALL_RUNS || type == DLPROF_CHUNK_WALL_STATES ||
                         type == DLPROF_CHUNK_WALL_STACKS;
    if (records && GetVarint(&b, e, &time) && GetVarint(&b, e, &n)) {
      n = std::min<uint64_t>(n, static_cast<uint64_t>(e - b) / 5);
      (type == DLPROF_CHUNK_SAMPLES ? c.cpu : c.wall) += n;
    }
    off += DLPROF_CHUNK_HEADER_SIZE + len;
  }
  return c;
}

// ReadDlprofBuffer, with the caller's scratch for the raw CPU samples.
bool Decode(const std::string& data, const std::string& path, Profile* profile,
            std::string* error, std::vector<RawSample>* raw) {
  const auto* base = reinterpret_cast<const uint8_t*>(data.data());
  const size_t size = data.size();
  if (size < DLPROF_FILE_HEADER_SIZE || memcmp(base, DLPROF_FILE_MAGIC, 8) != 0) {
    *error = path + ": offset 0: not a .dlprof file (bad magic)";
    return false;
  }
  uint32_t version = U32At(base, 8);
  if (version < DLPROF_FORMAT_OLDEST_VERSION || version > DLPROF_FORMAT_VERSION) {
    *error = path + ": offset 8: unsupported format version " + std::to_string(version);
    return false;
  }
  profile->input_bytes += size;
  const RecordCounts counts = CountRecords(data);
  profile->ReserveSamples(counts.cpu + counts.wall);
  FileDecoder dec(path, profile, raw, counts.cpu);
  size_t off = DLPROF_FILE_HEADER_SIZE;
  bool resyncing = false;
  while (off < size) {
    if (size - off < DLPROF_CHUNK_HEADER_SIZE) {
      dec.Warn(off, "file ends inside a chunk header (truncated); " +
                        std::to_string(size - off) + " bytes ignored");
      break;
    }
    uint32_t magic = U32At(base, off), type = U32At(base, off + 4), len = U32At(base, off + 8),
             crc = U32At(base, off + 12);
    bool ok = magic == DLPROF_CHUNK_MAGIC && len <= DLPROF_MAX_CHUNK_PAYLOAD;
    if (ok && size - off - DLPROF_CHUNK_HEADER_SIZE < len) {
      if (!resyncing) {
        dec.Warn(off, "chunk of " + std::to_string(len) + " bytes cut short by the end of the "
                      "file (truncated); its records are lost");
      }
      break;
    }
    const uint8_t* payload = base + off + DLPROF_CHUNK_HEADER_SIZE;
    if (ok && crc32(0, payload, len) != crc) ok = false;
    if (!ok) {
      if (!resyncing) dec.Warn(off, "damaged chunk (bad magic, length or checksum); skipping to "
                                   "the next intact chunk");
      resyncing = true;
      ++off;  // scan for the next chunk magic with a valid checksum
      continue;
    }
    resyncing = false;
    if (!dec.Chunk(type, payload, payload + len, off)) {
      dec.Warn(off, "chunk type " + std::to_string(type) + " does not decode; records after the "
                    "fault in it are lost");
    }
    off += DLPROF_CHUNK_HEADER_SIZE + len;
  }
  dec.Finish();
  return true;
}

// Collector processes (DLPROF_COLLECTOR=process) may still be draining and
// ending the files of programs that have just exited, or not have made them
// yet: each holds a shared flock on the run folder's DLPROF_COLLECTORS_LOCK
// until it is done. Waits, up to kWriterWaitNs in all, until an exclusive
// one can be had on that file of each folder of `paths` (a run still going
// is then read as it is). Called before the folder is listed, too.
constexpr int64_t kWriterWaitNs = 5000000000LL;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void WaitForCollectors(const std::vector<std::string>& folders) {
  const int64_t deadline = NowNs() + kWriterWaitNs;
  for (const std::string& folder : folders) {
    const std::string path = folder + "/" DLPROF_COLLECTORS_LOCK;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) continue;  // no collector process ever ran there
    while (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK && NowNs() < deadline) {
      const timespec step{0, 5000000};
      nanosleep(&step, nullptr);
    }
    close(fd);  // (an exclusive lock held for an instant: a starting helper retries)
  }
}

// The folders of `paths`, each once.
std::vector<std::string> FoldersOf(const std::vector<std::string>& paths) {
  std::vector<std::string> folders;
  for (const std::string& p : paths) {
    const size_t slash = p.rfind('/');
    std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
    if (std::find(folders.begin(), folders.end(), folder) == folders.end()) folders.push_back(folder);
  }
  return folders;
}

void WaitForWriters(const std::vector<std::string>& paths) { WaitForCollectors(FoldersOf(paths)); }

}  // namespace

bool ReadDlprofFile(const std::string& path, Profile* profile, std::string* error,
                    const FileLimits& limits) {
  WaitForWriters({path});
  std::string data;
  if (!ReadWholeFile(path, &data, error, limits)) return false;
  return ReadDlprofBuffer(data, path, profile, error);
}

bool ReadDlprofBuffer(const std::string& data, const std::string& path, Profile* profile,
                      std::string* error) {
  std::vector<RawSample> raw;
  return Decode(data, path, profile, error, &raw);
}

void ReadDlprofFiles(const std::vector<std::string>& paths, Profile* profile,
                     std::vector<std::string>* errors, const FileLimits& limits) {
  WaitForWriters(paths);
  // Each file is read twice: once to count its records, once to decode it,
  // through one buffer. Reading from the page cache costs less here than
  // first-touching a second copy of every file (page faults are dear on VMs).
  std::string data, error;
  size_t records = 0;
  for (const std::string& path : paths) {
    if (ReadWholeFile(path, &data, &error, limits)) {
      const RecordCounts n = CountRecords(data);
      records += n.cpu + n.wall;
    }
  }
  profile->ReserveSamples(records);
  std::vector<RawSample> raw;
  for (const std::string& path : paths) {
    if (!ReadWholeFile(path, &data, &error, limits) || !Decode(data, path, profile, &error, &raw)) {
      errors->push_back(error);
    }
  }
}

std::vector<std::string> ListRunFiles(const std::string& dir, std::string* error) {
  auto list = [](const std::string& d) {
    std::vector<std::string> files;
    WaitForCollectors({d});  // a file may not exist yet
    if (DIR* dp = opendir(d.c_str())) {
      while (dirent* e = readdir(dp)) {
        std::string n = e->d_name;
        if (n.size() > 7 && n.compare(n.size() - 7, 7, ".dlprof") == 0) files.push_back(d + "/" + n);
      }
      closedir(dp);
    }
    std::sort(files.begin(), files.end());
    return files;
  };
  std::vector<std::string> files = list(dir);
  if (!files.empty()) return files;
  // A DLPROF_OUT folder: its "latest" run, else the newest run folder.
  struct stat st;
  std::string latest = dir + "/latest";
  if (stat(latest.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    files = list(latest);
    if (!files.empty()) return files;
  }
  std::string newest;
  time_t newest_time = 0;
  if (DIR* dp = opendir(dir.c_str())) {
    while (dirent* e = readdir(dp)) {
      std::string n = e->d_name;
      if (n == "." || n == ".." || n == "latest") continue;
      std::string sub = dir + "/" + n;
      if (stat(sub.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_mtime >= newest_time &&
          !list(sub).empty()) {
        newest_time = st.st_mtime;
        newest = sub;
      }
    }
    closedir(dp);
  }
  if (!newest.empty()) return list(newest);
  *error = dir + ": no .dlprof files here, nor in a run folder inside it";
  return {};
}

std::string SyscallName(uint64_t nr) {
  if (nr == DLPROF_SYSCALL_UNKNOWN) return "blocked";
  static const std::map<uint64_t, const char*> names = {
      {0, "read"},        {1, "write"},         {7, "poll"},          {17, "pread64"},
      {18, "pwrite64"},   {19, "readv"},        {20, "writev"},       {23, "select"},
      {35, "nanosleep"},  {42, "connect"},      {43, "accept"},       {44, "sendto"},
      {45, "recvfrom"},   {46, "sendmsg"},      {47, "recvmsg"},      {61, "wait4"},
      {74, "fsync"},      {202, "futex"},       {230, "clock_nanosleep"}, {232, "epoll_wait"},
      {257, "openat"},    {270, "pselect6"},    {271, "ppoll"},       {281, "epoll_pwait"},
      {288, "accept4"},   {295, "preadv"},      {426, "io_uring_enter"}, {441, "epoll_pwait2"}};
  auto it = names.find(nr);
  return it != names.end() ? it->second : "syscall " + std::to_string(nr);
}

}  // namespace dlprof
