#include "readers/profile.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace dlprof {
namespace {

// Advice, not a promise: only whole 2 MiB-aligned pages inside the block
// qualify, and the kernel may say no (THP off) or have none free.
void AdviseHugePages(void* p, size_t bytes) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHugePage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// A byte key for a vector of ids; the maps hold at most one per distinct value.
std::string KeyOf(const std::vector<uint32_t>& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(uint32_t));
}

}  // namespace

void Profile::ReserveSamples(size_t more) {
  const size_t need = samples.size() + more;
  if (need <= samples.capacity()) return;
  samples.reserve(std::max(need, 2 * samples.capacity()));
  AdviseHugePages(samples.data(), samples.capacity() * sizeof(Sample));
}

uint32_t Profile::InternStage(const std::string& name) {
  if (name.empty()) return 0;
  if (stage_index_.empty()) stage_index_.emplace("", 0);
  auto [it, added] = stage_index_.emplace(name, stages.size());
  if (added) stages.push_back(name);
  return it->second;
}

uint32_t Profile::InternStagePath(const std::vector<uint32_t>& path) {
  if (path.empty()) return 0;
  auto [it, added] = stage_path_index_.emplace(KeyOf(path), stage_paths.size());
  if (added) stage_paths.push_back(path);
  return it->second;
}

uint32_t Profile::InternStack(const std::vector<uint32_t>& locations) {
  if (locations.empty()) return 0;
  auto [it, added] = stack_index_.emplace(KeyOf(locations), stacks.size());
  if (added) stacks.push_back(locations);
  return it->second;
}

uint32_t Profile::InternLocation(const Location& loc) {
  std::string key;
  if (loc.pseudo) {
    key = "pseudo:" + (loc.frames.empty() ? std::string() : loc.frames[0].function);
  } else if (loc.python) {
    // Names may hold any byte: each part is length-prefixed.
    const Frame f = loc.frames.empty() ? Frame{} : loc.frames[0];
    key = "py:" + std::to_string(f.function.size()) + ":" + f.function +
          std::to_string(f.file.size()) + ":" + f.file + std::to_string(f.start_line) + ":" +
          std::to_string(f.line) + (loc.python_entry ? ":e" : ":-");
  } else if (loc.module.empty()) {
    key = "abs:" + std::to_string(loc.address);
  } else {
    key = (loc.build_id.empty() ? loc.module : loc.build_id) + ":" +
          std::to_string(loc.module_offset);
  }
  auto [it, added] = location_index_.emplace(key, locations.size());
  if (added) locations.push_back(loc);
  return it->second;
}

std::string StagePathName(const Profile& p, uint32_t stage_path) {
  std::string out;
  if (stage_path >= p.stage_paths.size()) return out;
  for (uint32_t s : p.stage_paths[stage_path]) {
    if (!out.empty()) out += '/';
    out += s < p.stages.size() ? p.stages[s] : "?";
  }
  return out;
}

std::string ModuleOffsetName(const std::string& module, uint64_t offset) {
  char buf[40];
  snprintf(buf, sizeof(buf), "+0x%llx", static_cast<unsigned long long>(offset));
  const size_t slash = module.rfind('/');
  return (slash == std::string::npos ? module : module.substr(slash + 1)) + buf;
}

std::string UnsymbolizedName(const Location& loc) {
  if (!loc.module.empty()) return ModuleOffsetName(loc.module, loc.module_offset);
  char buf[40];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(loc.address));
  return buf;
}

std::string PythonFrameSource(const Frame& f) {
  if (f.file.empty()) return "";
  const size_t slash = f.file.rfind('/');
  std::string out = slash == std::string::npos ? f.file : f.file.substr(slash + 1);
  if (f.start_line > 0) out += ":" + std::to_string(f.start_line);
  return out;
}

std::string FrameDisplayName(const Frame& f) {
  if (!f.python) return f.function;
  const std::string name = f.function.empty() ? "?" : f.function;
  const std::string source = PythonFrameSource(f);
  return source.empty() ? name : name + " (" + source + ")";
}

}  // namespace dlprof
