#include "readers/gperftools_reader.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "readers/file_bytes.h"
#include "readers/symbolizer.h"

namespace dlprof {
namespace {

struct WordFormat {
  size_t size;  // 4 or 8
  bool big_endian;
};

// In the order pprof tries them; the header 0, 3, 0 matches only the right one.
constexpr WordFormat kFormats[] = {{8, false}, {8, true}, {4, false}, {4, true}};

// A stack deeper than this is corruption, not a program (gperftools keeps 64).
constexpr uint64_t kMaxDepth = 1 << 16;

class WordReader {
 public:
  WordReader(const std::string& bytes, WordFormat f) : bytes_(bytes), f_(f) {}

  // Words left from byte offset `pos`.
  size_t WordsLeft(size_t pos) const {
    return pos >= bytes_.size() ? 0 : (bytes_.size() - pos) / f_.size;
  }

  uint64_t At(size_t pos) const {
    uint64_t v = 0;
    for (size_t i = 0; i < f_.size; ++i) {
      auto b = static_cast<uint8_t>(bytes_[pos + (f_.big_endian ? i : f_.size - 1 - i)]);
      v = (v << 8) | b;
    }
    return v;
  }

 private:
  const std::string& bytes_;
  WordFormat f_;
};

bool HeaderMatches(const std::string& bytes, WordFormat f) {
  if (bytes.size() < 5 * f.size) return false;
  WordReader r(bytes, f);
  return r.At(0) == 0 && r.At(f.size) == 3 && r.At(2 * f.size) == 0;
}

struct Record {
  uint64_t count;
  std::vector<uint64_t> pcs;
  size_t offset;  // of the record in the file, for warnings
};

// Executable, file-backed lines of a /proc/pid/maps text.
std::vector<Mapping> ParseMaps(const std::string& text) {
  std::vector<Mapping> out;
  std::unordered_map<std::string, std::string> build_ids;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    uint64_t start, limit, offset;
    char perms[8] = "";
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %n", &start,
                    &limit, perms, &offset, &path_at) < 4 ||
        path_at == 0) {
      continue;  // gperftools may add other lines (e.g. "build=..."); not maps
    }
    std::string path = line.substr(static_cast<size_t>(path_at));
    while (!path.empty() && (path.back() == ' ' || path.back() == '\r')) path.pop_back();
    if (std::strchr(perms, 'x') == nullptr || path.empty()) continue;
    auto [it, added] = build_ids.emplace(path, "");
    if (added && path[0] == '/') it->second = ReadElfBuildId(path);
    out.push_back(Mapping{start, limit, offset, path, it->second});
  }
  return out;
}

}  // namespace

bool LooksLikeGperftoolsProfile(const std::string& bytes) {
  for (WordFormat f : kFormats) {
    if (HeaderMatches(bytes, f)) return true;
  }
  return false;
}

void ReadGperftools(const std::string& path, Profile* profile, const FileLimits& limits) {
  std::string bytes, error;
  if (!ReadWholeFile(path, &bytes, &error, limits)) throw std::runtime_error(error);
  ReadGperftoolsBuffer(bytes, path, profile);
}

void ReadGperftoolsBuffer(const std::string& bytes, const std::string& path, Profile* profile) {
  profile->input_bytes += bytes.size();
  const WordFormat* format = nullptr;
  for (const WordFormat& f : kFormats) {
    if (HeaderMatches(bytes, f)) {
      format = &f;
      break;
    }
  }
  if (format == nullptr) {
    throw std::runtime_error(path + ": offset 0: not a gperftools CPU profile (no 0, 3, 0 header)");
  }
  const size_t w = format->size;
  WordReader r(bytes, *format);
  std::string warning;
  auto fault = [&](size_t offset, const std::string& what) {
    warning = path + ": offset " + std::to_string(offset) + ": " + what;
  };

  const uint64_t header_words = 2 + r.At(w);  // the second word counts the rest
  // A period over 1000 s is damage; 0 means unknown.
  const uint64_t period_us = std::min<uint64_t>(r.At(3 * w), 1000000000);
  size_t pos = static_cast<size_t>(header_words * w);
  std::vector<Record> records;
  bool complete = false;
  while (true) {
    size_t left = r.WordsLeft(pos);
    if (left < 2) {
      fault(pos, left == 0 && pos >= bytes.size() ? "file ends before the trailer"
                                                  : "record header cut short");
      break;
    }
    uint64_t count = r.At(pos), depth = r.At(pos + w);
    if (count == 0 && depth == 1 && left >= 3 && r.At(pos + 2 * w) == 0) {
      pos += 3 * w;
      complete = true;
      break;
    }
    if (depth > kMaxDepth) {
      fault(pos, "stack depth " + std::to_string(depth) + " is corrupt");
      break;
    }
    if (left < 2 + depth) {
      fault(pos, "record of " + std::to_string(depth) + " pcs cut short (" +
                     std::to_string(bytes.size() - pos) + " bytes left)");
      break;
    }
    Record rec{count, {}, pos};
    rec.pcs.reserve(depth);
    for (uint64_t i = 0; i < depth; ++i) rec.pcs.push_back(r.At(pos + (2 + i) * w));
    records.push_back(std::move(rec));
    pos += (2 + depth) * w;
  }

  Process proc;
  proc.pid = 0;
  proc.role = "main";
  proc.file = path;
  proc.hz = period_us > 0 ? static_cast<int>(1000000 / period_us) : 0;
  proc.complete = complete;
  if (complete) {
    proc.mappings = ParseMaps(bytes.substr(pos));
    if (!proc.mappings.empty()) proc.command = proc.mappings.front().path;
  }
  if (!warning.empty()) {
    warning += "; kept " + std::to_string(records.size()) + " complete records";
    if (!complete) warning += ", no memory map (addresses stay unsymbolized)";
    proc.warnings.push_back(warning);
    profile->warnings.push_back(warning);
  }
  const uint32_t process = static_cast<uint32_t>(profile->processes.size());
  profile->processes.push_back(std::move(proc));
  Process& p = profile->processes.back();

  // Mappings sorted by start for the pc lookups.
  std::vector<const Mapping*> by_start;
  for (const Mapping& m : p.mappings) by_start.push_back(&m);
  std::sort(by_start.begin(), by_start.end(),
            [](const Mapping* a, const Mapping* b) { return a->start < b->start; });
  auto mapping_of = [&](uint64_t pc) -> const Mapping* {
    auto it = std::upper_bound(by_start.begin(), by_start.end(), pc,
                               [](uint64_t v, const Mapping* m) { return v < m->start; });
    if (it == by_start.begin()) return nullptr;
    const Mapping* m = *(it - 1);
    return pc < m->limit ? m : nullptr;
  };

  std::unordered_map<uint64_t, uint32_t> location_of_pc;
  std::vector<uint32_t> stack;
  size_t hostile_counts = 0;
  for (const Record& rec : records) {
    if (rec.count > static_cast<uint64_t>(kMaxRecordValue) && hostile_counts++ == 0) {
      // A record counts the ticks that saw its stack: 2^40 of them is 348
      // years at 100 Hz. More is damage, and as a signed number it was shown
      // as "samples -2".
      const std::string w = path + ": offset " + std::to_string(rec.offset) + ": record count " +
                            std::to_string(rec.count) + " is not a sample count; counted as " +
                            std::to_string(kMaxRecordValue);
      profile->warnings.push_back(w);
    }
    stack.clear();
    for (size_t i = 0; i < rec.pcs.size(); ++i) {
      uint64_t pc = rec.pcs[i];
      auto known = location_of_pc.find(pc);
      if (known != location_of_pc.end()) {
        stack.push_back(known->second);
        continue;
      }
      Location loc;
      loc.address = pc;
      // A return address may sit one past the end of its mapping.
      if (const Mapping* m = mapping_of(i > 0 && pc > 0 ? pc - 1 : pc)) {
        loc.module = m->path;
        loc.build_id = m->build_id;
        loc.module_offset = pc - m->start + m->offset;
      }
      uint32_t id = profile->InternLocation(loc);
      location_of_pc.emplace(pc, id);
      stack.push_back(id);
    }
    Sample s;
    s.process = process;
    s.stack = profile->InternStack(stack);
    s.count = ClampUnsigned(rec.count);
    s.cpu_ns = ClampedProduct(s.count, static_cast<int64_t>(period_us) * 1000);
    s.kind = SampleKind::kCpu;
    s.on_cpu = true;
    profile->samples.push_back(s);
    p.samples = AddCount(p.samples, s.count);
  }
}

}  // namespace dlprof
