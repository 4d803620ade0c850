#include "reports/pprof_writer.h"

#include <dlprof/version.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "readers/pprof_reader.h"
#include "reports/dense_index.h"
#include "reports/output_file.h"
#include "reports/pprof_wire.h"
#include "reports/utf8.h"

namespace dlprof {
namespace {

// Field numbers of perftools.profiles (github.com/google/pprof proto/profile.proto).
namespace field {
constexpr uint32_t kSampleType = 1, kSample = 2, kMapping = 3, kLocation = 4, kFunction = 5,
                   kStringTable = 6, kTimeNanos = 9, kDurationNanos = 10, kPeriodType = 11,
                   kPeriod = 12, kComment = 13, kDefaultSampleType = 14;
constexpr uint32_t kValueTypeType = 1, kValueTypeUnit = 2;
constexpr uint32_t kSampleLocationId = 1, kSampleValue = 2, kSampleLabel = 3;
constexpr uint32_t kLabelKey = 1, kLabelStr = 2, kLabelNum = 3, kLabelNumUnit = 4;
constexpr uint32_t kMappingId = 1, kMappingStart = 2, kMappingLimit = 3, kMappingOffset = 4,
                   kMappingFilename = 5, kMappingBuildId = 6, kMappingHasFunctions = 7,
                   kMappingHasFilenames = 8, kMappingHasLineNumbers = 9,
                   kMappingHasInlineFrames = 10;
constexpr uint32_t kLocationId = 1, kLocationMappingId = 2, kLocationAddress = 3, kLocationLine = 4;
constexpr uint32_t kLineFunctionId = 1, kLineLine = 2;
constexpr uint32_t kFunctionId = 1, kFunctionName = 2, kFunctionSystemName = 3,
                   kFunctionFilename = 4, kFunctionStartLine = 5;
}  // namespace field

// What each view holds, for `pprof -comments`.
constexpr char kCpuViewComment[] =
    "samples: CPU samples (cpu/nanoseconds); wall-clock ticks, running and blocked, are in "
    "the wall profile (profile.wall.pb.gz in a report folder)";
constexpr char kWallViewComment[] =
    "samples: wall-clock ticks of every thread (wall/nanoseconds), running (label cpu=on) "
    "or blocked (cpu=off); of their wall time, cpu/nanoseconds the thread ran and "
    "wait/nanoseconds it waited for a core";

class StringTable {
 public:
  StringTable() { Intern(""); }
  int64_t Intern(const std::string& s) {
    auto [it, added] = index_.emplace(s, static_cast<int64_t>(strings_.size()));
    if (added) strings_.push_back(s);
    return it->second;
  }
  const std::vector<std::string>& strings() const { return strings_; }

 private:
  std::unordered_map<std::string, int64_t> index_;
  std::vector<std::string> strings_;
};

struct MappingInfo {
  uint64_t id = 0;
  std::string path, build_id;
  uint64_t start = std::numeric_limits<uint64_t>::max(), limit = 0, offset = 0;
  bool from_process = false;
  std::vector<Mapping> segments;  // of the one process the range comes from
  bool has_functions = true, has_filenames = false, has_lines = false, has_inline = false;
};

// The address `module_offset` had in the process `m` was taken from, or
// `fallback` when no segment of it holds that offset.
uint64_t AddressIn(const MappingInfo& m, uint64_t module_offset, uint64_t fallback) {
  for (const Mapping& seg : m.segments) {
    if (module_offset >= seg.offset && module_offset - seg.offset < seg.limit - seg.start) {
      return seg.start + (module_offset - seg.offset);
    }
  }
  return fallback;
}

// The executable of the training process (else of the first process): its
// lowest file mapping, where the kernel puts a PIE or fixed-address
// executable below the libraries and the loader. "" when unknown.
const Mapping* MainExecutable(const Profile& p, const std::vector<std::string>& roles) {
  const Mapping* first = nullptr;
  for (size_t i = 0; i < p.processes.size(); ++i) {
    const std::string& role = i < roles.size() ? roles[i] : p.processes[i].role;
    const Mapping* lowest = nullptr;
    for (const Mapping& m : p.processes[i].mappings) {
      if (m.path.empty() || m.path[0] == '[') continue;
      if (lowest == nullptr || m.start < lowest->start) lowest = &m;
    }
    if (lowest == nullptr) continue;
    if (role == "main") return lowest;
    if (first == nullptr) first = lowest;
  }
  return first;
}

void ValueType(ProtoEncoder* e, uint32_t f, StringTable* st, const char* type, const char* unit) {
  size_t t = e->BeginMessage(f);
  e->Int64(field::kValueTypeType, st->Intern(type));
  e->Int64(field::kValueTypeUnit, st->Intern(unit));
  e->EndMessage(t);
}

void StrLabel(ProtoEncoder* e, int64_t key, int64_t value) {
  size_t t = e->BeginMessage(field::kSampleLabel);
  e->Int64(field::kLabelKey, key);
  e->Int64(field::kLabelStr, value);
  e->EndMessage(t);
}

void NumLabel(ProtoEncoder* e, int64_t key, int64_t value) {
  size_t t = e->BeginMessage(field::kSampleLabel);
  e->Int64(field::kLabelKey, key);
  e->Int64(field::kLabelNum, value);
  e->Int64(field::kLabelNumUnit, key);
  e->EndMessage(t);
}

// Drops parameter lists, and template arguments unless `keep_templates`:
// "f<int>(a, b) const" -> "f". A group inside {...} stays (GCC names a
// lambda "{lambda(int)#1}" by its parameters), and so does "(anonymous
// namespace)". Unbalanced text is returned as it is.
std::string StripGroups(const std::string& name, bool keep_templates) {
  static const std::string kAnonymous = "(anonymous namespace)";
  std::string out;
  int braces = 0, angles = 0, dropped = 0;  // dropped: depth inside a removed group
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (dropped == 0 && name.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      out += kAnonymous;  // a scope, not a parameter list
      i += kAnonymous.size() - 1;
      continue;
    }
    const bool open = c == '(' || c == '<', close = c == ')' || c == '>';
    if (dropped > 0) {
      dropped += open ? 1 : close ? -1 : 0;
      continue;
    }
    if (braces == 0 && (c == '(' ? angles == 0 : c == '<' && !keep_templates)) {
      dropped = 1;
      continue;
    }
    if (c == '{') ++braces;
    if (c == '}' && braces > 0) --braces;
    if (c == '<') ++angles;
    if (c == '>' && angles > 0) --angles;
    out += c;
  }
  return dropped == 0 && braces == 0 && angles == 0 ? out : name;
}

// pprof shows C++ names without parameters and template arguments (its
// default demangling). It derives that short name itself only from mangled
// names, which Frame does not keep, so the writer stores it as Function.name
// and the full demangled name as system_name. Template arguments that name
// a lambda or an unnamed type stay (pprof's "templates" form): without them
// every std::function's "_M_invoke" would be one function. Go and Java
// names, with their "pkg.(*T).M" and "C.<init>", are left alone.
std::string ShortName(const std::string& name) {
  if (name.find(".(") != std::string::npos || name.find(".<") != std::string::npos ||
      name.find("]).") != std::string::npos || name.find("operator") != std::string::npos) {
    return name;
  }
  const bool keep_templates = name.find("{lambda") != std::string::npos ||
                              name.find("{unnamed type") != std::string::npos;
  std::string out = StripGroups(name, keep_templates);
  for (const char* suffix : {" const", " volatile", " &&", " &"}) {
    size_t n = std::strlen(suffix);
    if (out.size() > n && out.compare(out.size() - n, n, suffix) == 0) out.resize(out.size() - n);
  }
  return out.empty() ? name : out;
}

std::string ModuleKey(const std::string& path, const std::string& build_id) {
  return path + '\0' + build_id;
}

// The pprof sample a Profile sample is summed into is identified by its
// thread (this key) and its (stack, stage path) pair.
struct ThreadKey {
  uint32_t process, tid;
  bool on_cpu;
  bool operator==(const ThreadKey& o) const {
    return process == o.process && tid == o.tid && on_cpu == o.on_cpu;
  }
};

struct ThreadKeyHash {
  uint64_t operator()(const ThreadKey& k) const {
    return MixBits((uint64_t{k.process} << 32 | k.tid) ^ MixBits(uint64_t{k.on_cpu}));
  }
};

struct SampleSum {
  int64_t count = 0, value = 0;  // value: cpu or wall nanoseconds, by the view
  int64_t tick_cpu_ns = 0, wait_ns = 0;  // the wall view's
};

// One thread's sums, by (stack << 32 | stage path).
struct ThreadSums {
  DenseIndex<uint64_t, U64Hash> pairs;
  std::vector<SampleSum> sums;
};

// True when a name in `path` contains '/', with *parts the names as
// "<length>:<name>" one after another (the "stage_parts" label).
bool SlashInAName(const Profile& p, const std::vector<uint32_t>& path, std::string* parts) {
  bool slash = false;
  for (uint32_t id : path) {
    const std::string& name = id < p.stages.size() ? p.stages[id] : std::string();
    slash |= name.find('/') != std::string::npos;
    *parts += std::to_string(name.size()) + ":" + name;
  }
  return slash;
}

}  // namespace

bool InPprofView(const Sample& s, PprofView view) {
  return view == PprofView::kWall ? s.kind == SampleKind::kWall && s.wall_ns > 0
                                  : s.kind == SampleKind::kCpu;
}

int64_t PprofSampleCount(const Profile& p, PprofView view) {
  int64_t n = 0;
  for (const Sample& s : p.samples) {
    if (InPprofView(s, view)) n += view == PprofView::kWall ? WallTicks(s) : s.count;
  }
  return n;
}

std::string EncodePprof(const Profile& p, PprofView view, const std::vector<std::string>& roles) {
  StringTable st;
  ProtoEncoder head, functions, mappings, locations, samples, tail;

  const bool wall_view = view == PprofView::kWall;
  const char* value_type = wall_view ? "wall" : "cpu";
  ValueType(&head, field::kSampleType, &st, "samples", "count");
  ValueType(&head, field::kSampleType, &st, value_type, "nanoseconds");
  if (wall_view) {
    // Of each tick's wall time: the CPU the thread used, and the time it was
    // runnable but waiting for a core; the rest it was blocked.
    ValueType(&head, field::kSampleType, &st, "cpu", "nanoseconds");
    ValueType(&head, field::kSampleType, &st, "wait", "nanoseconds");
  }

  // Mappings: one per module, its range taken from the first process that
  // mapped it (all its segments), else spanned by the locations themselves.
  // The first is the training process's executable: pprof names the
  // profile after mapping[0] ("File:") and takes it for the main binary.
  std::unordered_map<std::string, size_t> mapping_index;
  std::vector<MappingInfo> mapping_list;
  auto intern_mapping = [&](const std::string& path, const std::string& build_id) -> MappingInfo& {
    auto [it, added] = mapping_index.emplace(ModuleKey(path, build_id), mapping_list.size());
    if (added) {
      MappingInfo m;
      m.id = mapping_list.size() + 1;
      m.path = path;
      m.build_id = build_id;
      mapping_list.push_back(m);
    }
    return mapping_list[it->second];
  };
  if (const Mapping* exe = MainExecutable(p, roles)) intern_mapping(exe->path, exe->build_id);
  // Only the locations the view's samples use: the CPU profile lists no
  // function that only blocked, and each file stays as small as its samples.
  // A tick of no wall time (a thread's record at its very start or end)
  // would print as a sample of 0 in -traces: it is left out.
  auto in_view = [&](const Sample& s) { return InPprofView(s, view); };
  std::vector<bool> used(p.locations.size(), false);
  {
    std::vector<bool> stack_seen(p.stacks.size(), false);
    for (const Sample& s : p.samples) {
      if (!in_view(s) || s.stack >= p.stacks.size() || stack_seen[s.stack]) continue;
      stack_seen[s.stack] = true;
      for (uint32_t loc : p.stacks[s.stack]) {
        if (loc < used.size()) used[loc] = true;
      }
    }
  }
  std::vector<uint64_t> location_mapping(p.locations.size(), 0);
  for (size_t i = 0; i < p.locations.size(); ++i) {
    const Location& loc = p.locations[i];
    if (!used[i] || loc.pseudo || loc.module.empty()) continue;
    MappingInfo& m = intern_mapping(loc.module, loc.build_id);
    location_mapping[i] = m.id;
    // A mapping has functions only when every location of it is named:
    // pprof symbolizes (from PPROF_BINARY_PATH) only mappings without.
    m.has_functions &= !loc.frames.empty();
    m.has_inline |= loc.frames.size() > 1;
    for (const Frame& f : loc.frames) {
      m.has_functions &= !f.unnamed;
      m.has_filenames |= !f.file.empty();
      m.has_lines |= f.line > 0;
    }
    if (loc.address >= loc.module_offset) {
      m.start = std::min(m.start, loc.address - loc.module_offset);
      m.limit = std::max(m.limit, loc.address + 1);
    }
  }
  for (const Process& proc : p.processes) {
    std::unordered_map<std::string, MappingInfo> seen;  // this process's segments per module
    for (const Mapping& pm : proc.mappings) {
      for (const char* id : {pm.build_id.c_str(), ""}) {
        auto it = mapping_index.find(ModuleKey(pm.path, id));
        if (it == mapping_index.end() || mapping_list[it->second].from_process) continue;
        MappingInfo& s = seen[it->first];
        if (pm.start < s.start) {
          s.start = pm.start;
          s.offset = pm.offset;
        }
        s.limit = std::max(s.limit, pm.limit);
        if (pm.limit > pm.start) s.segments.push_back(pm);
        break;
      }
    }
    for (auto& [key, s] : seen) {
      MappingInfo& m = mapping_list[mapping_index[key]];
      m.start = s.start;
      m.limit = s.limit;
      m.offset = s.offset;
      m.segments = std::move(s.segments);
      m.from_process = true;
    }
  }
  for (const MappingInfo& m : mapping_list) {
    size_t t = mappings.BeginMessage(field::kMapping);
    mappings.Varint(field::kMappingId, m.id);
    mappings.Varint(field::kMappingStart,
                    m.start == std::numeric_limits<uint64_t>::max() ? 0 : m.start);
    mappings.Varint(field::kMappingLimit, m.limit);
    mappings.Varint(field::kMappingOffset, m.offset);
    mappings.Int64(field::kMappingFilename, st.Intern(m.path));
    mappings.Int64(field::kMappingBuildId, st.Intern(m.build_id));
    mappings.Bool(field::kMappingHasFunctions, m.has_functions);
    mappings.Bool(field::kMappingHasFilenames, m.has_functions && m.has_filenames);
    mappings.Bool(field::kMappingHasLineNumbers, m.has_functions && m.has_lines);
    mappings.Bool(field::kMappingHasInlineFrames, m.has_functions && m.has_inline);
    mappings.EndMessage(t);
  }

  // Functions by (name, file), Python ones by (qualname, file, first line):
  // two lambdas of one file are two functions. Locations keep the Profile's
  // index + 1 as id. A Python frame's Function is its code object: the
  // qualname as its name, the real co_filename (so that `pprof -list` finds
  // the source) and start_line; it has no mapping and no address (Python
  // locations have neither), and its Line is the line being run. It has no
  // system_name: pprof "demangles" a function whose system_name is its name,
  // and its heuristic for demangled C++ strips "<...>", which leaves nothing
  // of "<module>", "<lambda>", "<listcomp>" or "<genexpr>" (ShortName would
  // do the same, so it is not used either).
  std::unordered_map<std::string, uint64_t> function_ids;
  for (size_t i = 0; i < p.locations.size(); ++i) {
    const Location& loc = p.locations[i];
    if (!used[i]) continue;
    size_t t = locations.BeginMessage(field::kLocation);
    locations.Varint(field::kLocationId, i + 1);
    uint64_t address = loc.pseudo ? 0 : loc.address;
    if (location_mapping[i] != 0) {
      locations.Varint(field::kLocationMappingId, location_mapping[i]);
      // In the layout of the process the mapping's range is from: another
      // process's address (ASLR) would fall outside it.
      address = AddressIn(mapping_list[location_mapping[i] - 1], loc.module_offset, address);
    }
    if (address != 0) locations.Varint(field::kLocationAddress, address);
    for (const Frame& f : loc.frames) {
      // An unnamed frame gets no Line: pprof then shows the address and
      // module, and can symbolize it later (PPROF_BINARY_PATH).
      if (f.unnamed) continue;
      std::string key = f.function + '\0' + f.file;
      if (f.python) key += "\0py:" + std::to_string(f.start_line);
      auto [it, added] = function_ids.emplace(std::move(key), function_ids.size() + 1);
      if (added) {
        size_t ft = functions.BeginMessage(field::kFunction);
        functions.Varint(field::kFunctionId, it->second);
        functions.Int64(field::kFunctionName, st.Intern(f.python ? f.function : ShortName(f.function)));
        if (!f.python) functions.Int64(field::kFunctionSystemName, st.Intern(f.function));
        if (!f.file.empty()) functions.Int64(field::kFunctionFilename, st.Intern(f.file));
        if (f.start_line > 0) functions.Int64(field::kFunctionStartLine, f.start_line);
        functions.EndMessage(ft);
      }
      size_t lt = locations.BeginMessage(field::kLocationLine);
      locations.Varint(field::kLineFunctionId, it->second);
      if (f.line > 0) locations.Int64(field::kLineLine, f.line);
      locations.EndMessage(lt);
    }
    locations.EndMessage(t);
  }

  // Samples, summed per key in order of first appearance (stable output).
  // Two levels: the thread, then the (stack, stage path) pair in it. A
  // thread's samples come in runs, so the table in use is one thread's few
  // thousand pairs and stays in the CPU's cache; one table of every key (70k
  // in the scale test) missed the cache twice per sample.
  DenseIndex<ThreadKey, ThreadKeyHash> thread_index;
  std::vector<ThreadSums> threads;
  std::vector<std::pair<uint32_t, uint32_t>> order;  // (thread, pair), first appearance
  ThreadKey last_key{};
  uint32_t last = UINT32_MAX;
  for (const Sample& s : p.samples) {
    if (!in_view(s)) continue;
    const ThreadKey key{s.process, s.tid, s.on_cpu};
    if (last == UINT32_MAX || !(key == last_key)) {
      bool added;
      last = thread_index.Intern(key, &added);
      if (added) threads.emplace_back();
      last_key = key;
    }
    ThreadSums& thread = threads[last];
    bool added;
    const uint32_t i = thread.pairs.Intern(uint64_t{s.stack} << 32 | s.stage_path, &added);
    if (added) {
      thread.sums.emplace_back();
      order.push_back({last, i});
    }
    SampleSum& sum = thread.sums[i];
    sum.count += wall_view ? WallTicks(s) : s.count;
    sum.value += wall_view ? s.wall_ns : s.cpu_ns;
    sum.tick_cpu_ns += s.cpu_ns;
    sum.wait_ns += s.wait_ns;
  }
  const int64_t k_stage = st.Intern("stage"), k_role = st.Intern("role"),
                k_worker = st.Intern("worker"), k_pid = st.Intern("pid"), k_tid = st.Intern("tid"),
                k_cpu = st.Intern("cpu"), k_host = st.Intern("host"), v_on = st.Intern("on"),
                v_off = st.Intern("off");
  std::vector<uint64_t> ids;
  for (const auto& [thread, pair] : order) {
    const ThreadKey& k = thread_index.keys()[thread];
    const SampleSum& sum = threads[thread].sums[pair];
    const uint32_t stack = static_cast<uint32_t>(threads[thread].pairs.keys()[pair] >> 32);
    const uint32_t stage_path = static_cast<uint32_t>(threads[thread].pairs.keys()[pair]);
    size_t t = samples.BeginMessage(field::kSample);
    ids.clear();
    if (stack < p.stacks.size()) {
      for (uint32_t loc : p.stacks[stack]) ids.push_back(uint64_t{loc} + 1);
    }
    samples.PackedVarints(field::kSampleLocationId, ids);
    if (wall_view) {
      samples.PackedInt64s(field::kSampleValue, {sum.count, sum.value, sum.tick_cpu_ns, sum.wait_ns});
    } else {
      samples.PackedInt64s(field::kSampleValue, {sum.count, sum.value});
    }
    std::string stage = StagePathName(p, stage_path);
    if (!stage.empty()) StrLabel(&samples, k_stage, st.Intern(stage));
    // "stage" joins the path with '/'; when a name has a '/' of its own that
    // cannot be split back, so the names also go length-prefixed.
    if (stage.find('/') != std::string::npos && stage_path < p.stage_paths.size()) {
      if (std::string parts; SlashInAName(p, p.stage_paths[stage_path], &parts)) {
        StrLabel(&samples, st.Intern("stage_parts"), st.Intern(parts));
      }
    }
    if (k.process < p.processes.size()) {
      const Process& proc = p.processes[k.process];
      StrLabel(&samples, k_role, st.Intern(k.process < roles.size() ? roles[k.process] : proc.role));
      if (proc.worker >= 0) NumLabel(&samples, k_worker, proc.worker);
      NumLabel(&samples, k_pid, proc.pid);
      if (!proc.host.empty()) StrLabel(&samples, k_host, st.Intern(proc.host));
    }
    NumLabel(&samples, k_tid, k.tid);
    StrLabel(&samples, k_cpu, k.on_cpu ? v_on : v_off);
    samples.EndMessage(t);
  }

  // Profile-wide facts: the sampling period and the span of the run.
  int hz = 0;
  int64_t time_nanos = 0, duration = 0;
  for (const Process& proc : p.processes) {
    if (hz == 0 && proc.hz > 0) hz = proc.hz;
    if (proc.start_unix_ns > 0 && (time_nanos == 0 || proc.start_unix_ns < time_nanos)) {
      time_nanos = proc.start_unix_ns;
    }
    if (proc.end_ns > proc.start_ns) duration = std::max(duration, proc.end_ns - proc.start_ns);
  }
  if (time_nanos != 0) tail.Int64(field::kTimeNanos, time_nanos);
  if (duration != 0) tail.Int64(field::kDurationNanos, duration);
  ValueType(&tail, field::kPeriodType, &st, value_type, "nanoseconds");
  // A wall tick's length varies (DLPROF_SNAPSHOT_MS, light mode): no period.
  if (!wall_view) tail.Int64(field::kPeriod, 1000000000 / (hz > 0 ? hz : 100));
  tail.Int64(field::kDefaultSampleType, st.Intern(value_type));
  // `pprof -comments`: what wrote the profile, what it holds, and what ran.
  tail.Int64(field::kComment, st.Intern("dlprof " DLPROF_VERSION_STRING));
  tail.Int64(field::kComment,
             st.Intern(wall_view ? kWallViewComment : kCpuViewComment));
  // The runs it comes from: the reader joins the CPU and wall profiles of
  // one run into the same processes by them.
  std::vector<std::string> run_ids;
  for (const Process& proc : p.processes) {
    auto id = proc.fields.find("run_id");
    if (id == proc.fields.end() || id->second.empty()) continue;
    if (std::find(run_ids.begin(), run_ids.end(), id->second) == run_ids.end()) {
      run_ids.push_back(id->second);
    }
  }
  for (const std::string& id : run_ids) tail.Int64(field::kComment, st.Intern(kPprofRunComment + id));
  for (size_t i = 0; i < p.processes.size(); ++i) {
    const std::string& role = i < roles.size() ? roles[i] : p.processes[i].role;
    if (role != "main" || p.processes[i].command.empty()) continue;
    tail.Int64(field::kComment, st.Intern("main process: " + p.processes[i].command + " (pid " +
                                          std::to_string(p.processes[i].pid) + ")"));
    break;
  }

  ProtoEncoder strings;
  // profile.proto is proto3: a string field that is not valid UTF-8 makes
  // strict parsers reject the whole profile. Names come from the profiled
  // program, so each bad sequence becomes U+FFFD.
  for (const std::string& s : st.strings()) strings.Bytes(field::kStringTable, ValidUtf8(s));

  std::string out = head.Release();
  for (ProtoEncoder* e : {&strings, &functions, &mappings, &locations, &tail, &samples}) {
    out += e->data();
  }
  return out;
}

void WritePprof(const Profile& profile, const std::string& path, PprofView view,
                const std::vector<std::string>& roles) {
  // Level 6, as pprof writes. On the 8 MB profile of 8 x 250k samples it
  // takes ~0.12 s; levels 1-3 save ~0.03 s for a 2-7% larger file, level 9
  // costs 0.08 s more for 0.6% smaller.
  WriteGzipFile(path, EncodePprof(profile, view, roles));
}

void WritePprofToFd(const Profile& profile, int fd, PprofView view,
                    const std::vector<std::string>& roles) {
  const int own = dup(fd);  // gzclose closes it; the caller keeps `fd`
  if (own < 0) throw std::runtime_error(std::string("stdout: cannot write: ") + strerror(errno));
  WriteGzipToFd(EncodePprof(profile, view, roles), own, "stdout");
}

}  // namespace dlprof
