#include "readers/pprof_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "readers/file_bytes.h"

namespace dlprof {
namespace {

// Process::fields keys of a process read from pprof: the file it was first
// read from, the runs that file names (kPprofRunComment, sorted, joined by
// spaces), and the views read into it ("cpu", "wall", or both).
constexpr char kFromPprofField[] = "pprof_file";
constexpr char kPprofRunsField[] = "pprof_runs";
constexpr char kPprofViewsField[] = "pprof_views";

// A decoding fault at a byte offset of the protobuf stream.
struct WireError {
  size_t offset;
  std::string what;
};

// Reads protobuf wire format from [begin, end) of a buffer; offsets stay
// relative to the whole buffer so errors point into the file.
class WireReader {
 public:
  WireReader(const std::string& buf, size_t begin, size_t end)
      : data_(reinterpret_cast<const uint8_t*>(buf.data())), pos_(begin), end_(end) {}

  bool done() const { return pos_ >= end_; }
  size_t pos() const { return pos_; }
  size_t end() const { return end_; }

  uint64_t Varint() {
    size_t start = pos_;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= end_) throw WireError{start, "varint runs past the end"};
      uint8_t b = data_[pos_++];
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
    throw WireError{start, "varint longer than 10 bytes"};
  }

  // Reads a field tag; returns false at the end of the range.
  bool Next(uint32_t* field, uint32_t* wire) {
    if (done()) return false;
    size_t start = pos_;
    uint64_t tag = Varint();
    *field = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7);
    if (*field == 0) throw WireError{start, "field number 0"};
    return true;
  }

  // A length-delimited body: returns a reader over it and skips past it.
  WireReader Sub() {
    size_t start = pos_;
    uint64_t n = Varint();
    if (n > end_ - pos_) {
      throw WireError{start, "length " + std::to_string(n) + " runs past the end"};
    }
    WireReader sub(*this);
    sub.end_ = pos_ + n;
    pos_ += n;
    return sub;
  }

  void Skip(uint32_t wire) {
    size_t start = pos_;
    switch (wire) {
      case 0:
        Varint();
        return;
      case 1:
        Advance(8, start);
        return;
      case 2:
        Sub();
        return;
      case 5:
        Advance(4, start);
        return;
      default:
        throw WireError{start, "unsupported wire type " + std::to_string(wire)};
    }
  }

  // A repeated scalar field, packed (wire type 2) or not (wire type 0).
  template <typename T>
  void Repeated(uint32_t wire, std::vector<T>* out) {
    if (wire == 0) {
      out->push_back(static_cast<T>(Varint()));
    } else if (wire == 2) {
      WireReader sub = Sub();
      while (!sub.done()) out->push_back(static_cast<T>(sub.Varint()));
    } else {
      throw WireError{pos_, "repeated varint field with wire type " + std::to_string(wire)};
    }
  }

  uint64_t Scalar(uint32_t wire) {
    if (wire != 0)
      throw WireError{pos_, "expected a varint, got wire type " + std::to_string(wire)};
    return Varint();
  }

 private:
  void Advance(size_t n, size_t start) {
    if (n > end_ - pos_) throw WireError{start, "fixed-size field runs past the end"};
    pos_ += n;
  }

  const uint8_t* data_;
  size_t pos_, end_;
};

struct RawLabel {
  int64_t key = 0, str = 0, num = 0, unit = 0;
};
struct RawSample {
  std::vector<uint64_t> locations;
  std::vector<int64_t> values;
  std::vector<RawLabel> labels;
};
struct RawMapping {
  uint64_t start = 0, limit = 0, offset = 0;
  int64_t filename = 0, build_id = 0;
};
struct RawLine {
  uint64_t function = 0;
  int64_t line = 0;
};
struct RawLocation {
  uint64_t mapping = 0, address = 0;
  std::vector<RawLine> lines;
};
struct RawFunction {
  int64_t name = 0, system_name = 0, filename = 0, start_line = 0;
};

// Everything the protobuf holds, with string and id references unresolved
// (the tables may come after the samples that use them).
struct RawProfile {
  std::vector<std::pair<int64_t, int64_t>> sample_types;
  std::vector<RawSample> samples;
  std::unordered_map<uint64_t, RawMapping> mappings;
  std::vector<uint64_t> mapping_order;
  std::unordered_map<uint64_t, RawLocation> locations;
  std::unordered_map<uint64_t, RawFunction> functions;
  std::vector<std::string> strings;
  std::pair<int64_t, int64_t> period_type{0, 0};
  int64_t period = 0, time_nanos = 0, duration_nanos = 0;
  std::vector<int64_t> comments;  // string indices
};

std::pair<int64_t, int64_t> DecodeValueType(WireReader r) {
  std::pair<int64_t, int64_t> vt{0, 0};
  uint32_t f, w;
  while (r.Next(&f, &w)) {
    if (f == 1)
      vt.first = static_cast<int64_t>(r.Scalar(w));
    else if (f == 2)
      vt.second = static_cast<int64_t>(r.Scalar(w));
    else
      r.Skip(w);
  }
  return vt;
}

RawSample DecodeSample(WireReader r) {
  RawSample s;
  uint32_t f, w;
  while (r.Next(&f, &w)) {
    if (f == 1) {
      r.Repeated(w, &s.locations);
    } else if (f == 2) {
      r.Repeated(w, &s.values);
    } else if (f == 3 && w == 2) {
      WireReader lr = r.Sub();
      RawLabel l;
      uint32_t lf, lw;
      while (lr.Next(&lf, &lw)) {
        if (lf == 1)
          l.key = static_cast<int64_t>(lr.Scalar(lw));
        else if (lf == 2)
          l.str = static_cast<int64_t>(lr.Scalar(lw));
        else if (lf == 3)
          l.num = static_cast<int64_t>(lr.Scalar(lw));
        else if (lf == 4)
          l.unit = static_cast<int64_t>(lr.Scalar(lw));
        else
          lr.Skip(lw);
      }
      s.labels.push_back(l);
    } else {
      r.Skip(w);
    }
  }
  return s;
}

void DecodeMapping(WireReader r, RawProfile* raw) {
  uint64_t id = 0;
  RawMapping m;
  uint32_t f, w;
  while (r.Next(&f, &w)) {
    switch (f) {
      case 1:
        id = r.Scalar(w);
        break;
      case 2:
        m.start = r.Scalar(w);
        break;
      case 3:
        m.limit = r.Scalar(w);
        break;
      case 4:
        m.offset = r.Scalar(w);
        break;
      case 5:
        m.filename = static_cast<int64_t>(r.Scalar(w));
        break;
      case 6:
        m.build_id = static_cast<int64_t>(r.Scalar(w));
        break;
      default:
        r.Skip(w);
    }
  }
  if (raw->mappings.emplace(id, m).second) raw->mapping_order.push_back(id);
}

void DecodeLocation(WireReader r, RawProfile* raw) {
  uint64_t id = 0;
  RawLocation loc;
  uint32_t f, w;
  while (r.Next(&f, &w)) {
    if (f == 1) {
      id = r.Scalar(w);
    } else if (f == 2) {
      loc.mapping = r.Scalar(w);
    } else if (f == 3) {
      loc.address = r.Scalar(w);
    } else if (f == 4 && w == 2) {
      WireReader lr = r.Sub();
      RawLine line;
      uint32_t lf, lw;
      while (lr.Next(&lf, &lw)) {
        if (lf == 1)
          line.function = lr.Scalar(lw);
        else if (lf == 2)
          line.line = static_cast<int64_t>(lr.Scalar(lw));
        else
          lr.Skip(lw);
      }
      loc.lines.push_back(line);
    } else {
      r.Skip(w);
    }
  }
  raw->locations.emplace(id, std::move(loc));
}

void DecodeFunction(WireReader r, RawProfile* raw) {
  uint64_t id = 0;
  RawFunction fn;
  uint32_t f, w;
  while (r.Next(&f, &w)) {
    switch (f) {
      case 1:
        id = r.Scalar(w);
        break;
      case 2:
        fn.name = static_cast<int64_t>(r.Scalar(w));
        break;
      case 3:
        fn.system_name = static_cast<int64_t>(r.Scalar(w));
        break;
      case 4:
        fn.filename = static_cast<int64_t>(r.Scalar(w));
        break;
      case 5:
        fn.start_line = static_cast<int64_t>(r.Scalar(w));
        break;
      default:
        r.Skip(w);
    }
  }
  raw->functions.emplace(id, fn);
}

// Decodes top-level fields until the end or the first fault; each message is
// decoded whole before it is kept, so a fault never leaves half a sample.
void DecodeProfile(const std::string& buf, RawProfile* raw, std::string* error) {
  WireReader r(buf, 0, buf.size());
  size_t field_start = 0;
  try {
    uint32_t f, w;
    while (true) {
      field_start = r.pos();
      if (!r.Next(&f, &w)) break;
      if (w == 2 && f <= 6) {
        WireReader sub = r.Sub();
        switch (f) {
          case 1:
            raw->sample_types.push_back(DecodeValueType(sub));
            break;
          case 2:
            raw->samples.push_back(DecodeSample(sub));
            break;
          case 3:
            DecodeMapping(sub, raw);
            break;
          case 4:
            DecodeLocation(sub, raw);
            break;
          case 5:
            DecodeFunction(sub, raw);
            break;
          case 6:
            raw->strings.emplace_back(buf, sub.pos(), sub.end() - sub.pos());
            break;
        }
      } else if (f == 11 && w == 2) {
        raw->period_type = DecodeValueType(r.Sub());
      } else if (f == 12) {
        raw->period = static_cast<int64_t>(r.Scalar(w));
      } else if (f == 9) {
        raw->time_nanos = static_cast<int64_t>(r.Scalar(w));
      } else if (f == 10) {
        raw->duration_nanos = static_cast<int64_t>(r.Scalar(w));
      } else if (f == 13) {
        r.Repeated(w, &raw->comments);
      } else {
        r.Skip(w);
      }
    }
  } catch (const WireError& e) {
    *error = "offset " + std::to_string(e.offset) + ": " + e.what +
             " (in the top-level field at offset " + std::to_string(field_start) + ")";
  }
}

// Inflates gzip data; on a fault keeps what was inflated and says where.
// A gzip stream is inflated to at most 100 times its size plus 64 MiB. Real
// profiles compress 3 to 20 times; deflate itself allows ~1032 times, so
// 100 KB of zeros made 2.2 GB of memory (and a report that died of it).
constexpr uint64_t kMaxInflateRatio = 100;
constexpr uint64_t kInflateSlack = uint64_t{64} << 20;

std::string Gunzip(const std::string& in, std::string* error) {
  const uint64_t cap = in.size() * kMaxInflateRatio + kInflateSlack;
  std::string out;
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    *error = "zlib init failed";
    return out;
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  char buf[1 << 16];
  int rc = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    const size_t got = sizeof(buf) - z.avail_out;
    if (out.size() + got > cap) {
      out.append(buf, cap - out.size());  // what was read is kept, and decoded
      *error = "inflates to more than " + ByteSize(cap) + " (" + std::to_string(kMaxInflateRatio) +
               " times its " + ByteSize(in.size()) + ", plus 64 MiB): not a real profile; the "
               "first " + ByteSize(cap) + " are read";
      inflateEnd(&z);
      return out;
    }
    out.append(buf, got);
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members are one stream (as gzip -d treats them).
      if (z.avail_in == 0) break;
      inflateReset(&z);
      continue;
    }
    if (rc != Z_OK) break;
    if (z.avail_in == 0 && z.avail_out != 0) {
      rc = Z_BUF_ERROR;
      break;
    }
  }
  if (rc != Z_STREAM_END) {
    *error = "gzip stream " +
             std::string(rc == Z_BUF_ERROR ? "truncated" : (z.msg ? z.msg : "corrupt")) +
             " at compressed offset " + std::to_string(z.total_in) + " (" +
             std::to_string(out.size()) + " bytes inflated)";
  }
  inflateEnd(&z);
  return out;
}

const std::string& Str(const RawProfile& raw, int64_t i) {
  static const std::string kEmpty;
  return i > 0 && static_cast<size_t>(i) < raw.strings.size() ? raw.strings[i] : kEmpty;
}

// The "stage_parts" label dlprof writes when a stage name contains '/':
// "<length>:<name>" per level. False (and nothing interned) unless it parses
// completely, so a hostile label falls back to splitting "stage".
bool SplitStageParts(const std::string& parts, Profile* profile, std::vector<uint32_t>* path) {
  if (parts.empty()) return false;
  std::vector<std::string> names;
  size_t at = 0;
  while (at < parts.size()) {
    const size_t colon = parts.find(':', at);
    if (colon == std::string::npos || colon == at || colon - at > 9) return false;
    size_t len = 0;
    for (size_t i = at; i < colon; ++i) {
      if (parts[i] < '0' || parts[i] > '9') return false;
      len = len * 10 + static_cast<size_t>(parts[i] - '0');
    }
    if (len > parts.size() - colon - 1) return false;
    names.push_back(parts.substr(colon + 1, len));
    at = colon + 1 + len;
  }
  for (const std::string& name : names) path->push_back(profile->InternStage(name));
  return true;
}

}  // namespace

void ReadPprof(const std::string& path, Profile* profile, const FileLimits& limits) {
  std::string bytes, error;
  if (!ReadWholeFile(path, &bytes, &error, limits)) throw std::runtime_error(error);
  ReadPprofBuffer(std::move(bytes), path, profile);
}

void ReadPprofBuffer(std::string bytes, const std::string& path, Profile* profile) {
  std::vector<std::string> warnings;
  profile->input_bytes += bytes.size();  // as stored: compressed
  if (bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
      static_cast<uint8_t>(bytes[1]) == 0x8b) {
    std::string error;
    bytes = Gunzip(bytes, &error);
    if (!error.empty()) warnings.push_back(path + ": " + error);
  }
  RawProfile raw;
  std::string error;
  DecodeProfile(bytes, &raw, &error);
  if (!error.empty()) {
    warnings.push_back(path + ": " + error + "; kept " + std::to_string(raw.samples.size()) +
                       " complete samples");
  }

  // Which value is which: pprof names them by (type, unit).
  int count_i = -1, cpu_i = -1, wall_i = -1, wait_i = -1;
  for (size_t i = 0; i < raw.sample_types.size(); ++i) {
    const std::string& type = Str(raw, raw.sample_types[i].first);
    const std::string& unit = Str(raw, raw.sample_types[i].second);
    if (count_i < 0 && unit == "count") count_i = static_cast<int>(i);
    if (cpu_i < 0 && type == "cpu" && unit == "nanoseconds") cpu_i = static_cast<int>(i);
    if (wall_i < 0 && type == "wall" && unit == "nanoseconds") wall_i = static_cast<int>(i);
    if (wait_i < 0 && type == "wait" && unit == "nanoseconds") wait_i = static_cast<int>(i);
  }
  bool period_is_cpu_ns =
      Str(raw, raw.period_type.first) == "cpu" && Str(raw, raw.period_type.second) == "nanoseconds";
  // dlprof's wall profile (PprofView::kWall): every sample is a tick, its
  // cpu value the CPU used in it (which CPU samples count).
  const bool wall_ticks = wall_i >= 0 && Str(raw, raw.period_type.first) == "wall" &&
                          Str(raw, raw.period_type.second) == "nanoseconds";

  std::vector<Mapping> mappings;
  for (uint64_t id : raw.mapping_order) {
    const RawMapping& m = raw.mappings[id];
    mappings.push_back(
        Mapping{m.start, m.limit, m.offset, Str(raw, m.filename), Str(raw, m.build_id)});
  }

  std::unordered_map<uint64_t, uint32_t> location_ids;
  auto location_of = [&](uint64_t id) -> uint32_t {
    auto known = location_ids.find(id);
    if (known != location_ids.end()) return known->second;
    Location loc;
    auto it = raw.locations.find(id);
    if (it == raw.locations.end()) {
      loc.pseudo = true;
      loc.frames.push_back(Frame{"[missing location " + std::to_string(id) + "]", "", 0});
    } else {
      const RawLocation& rl = it->second;
      loc.address = rl.address;
      auto m = raw.mappings.find(rl.mapping);
      if (rl.mapping != 0 && m != raw.mappings.end()) {
        loc.module = Str(raw, m->second.filename);
        loc.build_id = Str(raw, m->second.build_id);
        if (rl.address >= m->second.start) {
          loc.module_offset = rl.address - m->second.start + m->second.offset;
        }
      }
      for (const RawLine& line : rl.lines) {
        Frame frame;
        auto fn = raw.functions.find(line.function);
        if (fn != raw.functions.end()) {
          // dlprof writes the full demangled name as system_name; others
          // may leave it mangled, and then the readable name is better.
          const std::string& system = Str(raw, fn->second.system_name);
          bool mangled = system.size() > 2 && system[0] == '_' && system[1] == 'Z';
          frame.function = system.empty() || mangled ? Str(raw, fn->second.name) : system;
          if (frame.function.empty()) frame.function = system;
          frame.file = Str(raw, fn->second.filename);
          const int64_t start = fn->second.start_line;
          frame.start_line = start > 0 && start <= INT32_MAX ? static_cast<int>(start) : 0;
        }
        frame.line = static_cast<int>(line.line);
        loc.frames.push_back(frame);
      }
      // A Python frame as dlprof writes it: no mapping, no address, one line
      // of a function with a file and a first line. It is a Python location
      // again (one per line, where a pseudo one would be one per name), and
      // the reports show it as they show Python frames.
      if (rl.address == 0 && rl.mapping == 0 && loc.frames.size() == 1 &&
          loc.frames[0].start_line > 0 && !loc.frames[0].file.empty()) {
        loc.python = true;
        loc.frames[0].python = true;
      } else if (rl.address == 0 && !loc.frames.empty()) {
        loc.pseudo = true;
      }
    }
    uint32_t index = profile->InternLocation(loc);
    location_ids.emplace(id, index);
    return index;
  };

  // The run the profile comes from, when it names exactly one: dlprof
  // writes a run's CPU samples and wall ticks to two profiles, and the
  // processes of the second one read are those of the first.
  // A report of several runs names them all, and its processes carry a host
  // label per run: the same set of runs, and the same labels, are the same
  // process. Only the other view joins: a copy of the same view is counted
  // again, with a warning.
  std::vector<std::string> runs;
  for (int64_t c : raw.comments) {
    const std::string& text = Str(raw, c);
    if (text.compare(0, std::strlen(kPprofRunComment), kPprofRunComment) != 0) continue;
    runs.push_back(text.substr(std::strlen(kPprofRunComment)));
  }
  std::sort(runs.begin(), runs.end());
  std::string run_key;
  for (const std::string& r : runs) run_key += (run_key.empty() ? "" : " ") + r;
  const std::string view = wall_ticks ? "wall" : "cpu";
  std::string copy_warning;  // the profile's only: the file itself is whole
  auto same_run = [&](const std::string& host, int64_t pid, const std::string& role,
                      int64_t worker) -> int64_t {
    if (run_key.empty()) return -1;
    for (size_t i = 0; i < profile->processes.size(); ++i) {
      const Process& p = profile->processes[i];
      auto from = p.fields.find(kFromPprofField);
      auto key = p.fields.find(kPprofRunsField);
      if (from == p.fields.end() || from->second == path || key == p.fields.end() ||
          key->second != run_key || p.host != host || p.pid != pid || p.role != role ||
          p.worker != worker) {
        continue;
      }
      if (p.fields.at(kPprofViewsField).find(view) == std::string::npos) {
        return static_cast<int64_t>(i);
      }
      if (copy_warning.empty()) {
        copy_warning = path + ": the same run's " +
                       (wall_ticks ? "wall-clock ticks" : "CPU samples") + " as " + from->second +
                       "; both are counted";
      }
    }
    return -1;
  };

  // One process per (host, pid, role, worker) label set.
  std::map<std::tuple<std::string, int64_t, std::string, int64_t>, uint32_t> processes;
  std::vector<uint32_t> stack;
  for (const RawSample& rs : raw.samples) {
    std::string host, role = "main", stage, stage_parts, cpu;
    int64_t pid = 0, worker = -1, tid = 0;
    for (const RawLabel& l : rs.labels) {
      const std::string& key = Str(raw, l.key);
      if (key == "stage")
        stage = Str(raw, l.str);
      else if (key == "stage_parts")
        stage_parts = Str(raw, l.str);
      else if (key == "role")
        role = Str(raw, l.str);
      else if (key == "host")
        host = Str(raw, l.str);
      else if (key == "cpu")
        cpu = Str(raw, l.str);
      else if (key == "pid")
        pid = l.num;
      else if (key == "tid")
        tid = l.num;
      else if (key == "worker")
        worker = l.num;
    }
    auto [it, added] = processes.emplace(std::make_tuple(host, pid, role, worker),
                                         static_cast<uint32_t>(profile->processes.size()));
    if (const int64_t known = added ? same_run(host, pid, role, worker) : -1; known >= 0) {
      it->second = static_cast<uint32_t>(known);
      Process& proc = profile->processes[it->second];
      proc.fields[kPprofViewsField] += "," + view;
      proc.complete &= warnings.empty();
      proc.warnings.insert(proc.warnings.end(), warnings.begin(), warnings.end());
      for (const Mapping& m : mappings) {  // each file has the mappings its own samples use
        if (std::none_of(proc.mappings.begin(), proc.mappings.end(), [&](const Mapping& k) {
              return k.start == m.start && k.path == m.path && k.build_id == m.build_id;
            })) {
          proc.mappings.push_back(m);
        }
      }
      if (proc.hz == 0 && period_is_cpu_ns && raw.period > 0) {
        proc.hz = static_cast<int>(1000000000 / raw.period);
      }
    } else if (added) {
      Process proc;
      proc.pid = static_cast<int>(pid);
      proc.role = role;
      proc.worker = static_cast<int>(worker);
      proc.host = host;
      proc.file = path;
      proc.start_unix_ns = std::max<int64_t>(0, raw.time_nanos);
      if (period_is_cpu_ns && raw.period > 0) proc.hz = static_cast<int>(1000000000 / raw.period);
      proc.mappings = mappings;
      proc.complete = warnings.empty();
      proc.warnings = warnings;
      proc.fields[kFromPprofField] = path;
      proc.fields[kPprofRunsField] = run_key;
      proc.fields[kPprofViewsField] = view;
      if (runs.size() == 1) proc.fields["run_id"] = runs[0];
      profile->processes.push_back(std::move(proc));
    }

    Sample s;
    s.process = it->second;
    s.tid = static_cast<uint32_t>(tid);
    s.on_cpu = cpu != "off";
    auto value = [&](int i) -> int64_t {
      return i >= 0 && static_cast<size_t>(i) < rs.values.size() ? ClampValue(rs.values[i]) : 0;
    };
    s.count = count_i >= 0 ? value(count_i) : 1;
    const int64_t period = ClampValue(raw.period);
    s.cpu_ns = cpu_i >= 0 ? value(cpu_i) : (period_is_cpu_ns ? ClampedProduct(s.count, period) : 0);
    s.wall_ns = value(wall_i);
    s.kind = wall_ticks || (s.wall_ns > 0 && s.cpu_ns == 0) ? SampleKind::kWall : SampleKind::kCpu;
    if (s.kind == SampleKind::kWall) {
      // As the dlprof reader bounds them: CPU and wait fit in the wall time.
      s.cpu_ns = std::min(s.cpu_ns, s.wall_ns);
      s.wait_ns = std::min(value(wait_i), s.wall_ns - s.cpu_ns);
    }
    stack.clear();
    for (uint64_t id : rs.locations) stack.push_back(location_of(id));
    s.stack = profile->InternStack(stack);
    if (std::vector<uint32_t> stage_path; !stage.empty() &&
                                           SplitStageParts(stage_parts, profile, &stage_path)) {
      s.stage_path = profile->InternStagePath(stage_path);
    } else if (!stage.empty()) {
      std::vector<uint32_t> stage_path;
      size_t start = 0;
      while (start <= stage.size()) {
        size_t slash = stage.find('/', start);
        if (slash == std::string::npos) slash = stage.size();
        stage_path.push_back(profile->InternStage(stage.substr(start, slash - start)));
        start = slash + 1;
      }
      s.stage_path = profile->InternStagePath(stage_path);
    }
    if (s.kind == SampleKind::kCpu) {
      uint64_t& total = profile->processes[s.process].samples;
      total = AddCount(total, s.count);  // a negative count (a diff profile) adds none
    }
    profile->samples.push_back(s);
  }
  profile->warnings.insert(profile->warnings.end(), warnings.begin(), warnings.end());
  if (!copy_warning.empty()) profile->warnings.push_back(copy_warning);
}

}  // namespace dlprof
