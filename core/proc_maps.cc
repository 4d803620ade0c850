#include "core/proc_maps.h"

#include <elf.h>
#include <link.h>
#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>

namespace dlprof {
namespace {

struct BuildIdScan {
  std::map<std::string, std::string> by_path;  // object path -> build-id
  std::string exe_build_id;
  uint64_t generation = 0;
};

std::string NoteBuildId(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((nh->n_namesz + 3) & ~3u);
      const char* next = desc + ((nh->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        return std::string(desc, nh->n_descsz);
      }
      p = next;
    }
  }
  return {};
}

int CollectBuildIds(dl_phdr_info* info, size_t, void* data) {
  auto* scan = static_cast<BuildIdScan*>(data);
  scan->generation = info->dlpi_adds * 1000003ull + info->dlpi_subs;
  std::string id = NoteBuildId(info);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') {
    if (scan->exe_build_id.empty()) scan->exe_build_id = id;
  } else {
    scan->by_path[info->dlpi_name] = id;
    char real[PATH_MAX];
    if (realpath(info->dlpi_name, real) != nullptr) scan->by_path[real] = id;
  }
  return 0;
}

}  // namespace

uint64_t LoadedObjectsGeneration() {
  BuildIdScan scan;
  dl_iterate_phdr([](dl_phdr_info* info, size_t, void* data) {
    *static_cast<uint64_t*>(data) = info->dlpi_adds * 1000003ull + info->dlpi_subs;
    return 1;  // the counters are the same in every entry: stop at the first
  }, &scan.generation);
  return scan.generation;
}

std::vector<MapEntry> ReadExecutableMappings() {
  BuildIdScan scan;
  dl_iterate_phdr(CollectBuildIds, &scan);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  std::string exe_path = n > 0 ? std::string(exe, n) : std::string();

  std::vector<MapEntry> out;
  FILE* f = fopen("/proc/self/maps", "re");
  if (f == nullptr) return out;
  char line[PATH_MAX + 256];
  while (fgets(line, sizeof(line), f) != nullptr) {
    unsigned long start, end, offset;
    char perms[8];
    int path_pos = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &start, &end, perms, &offset, &path_pos) < 4) {
      continue;
    }
    if (perms[2] != 'x' || path_pos == 0) continue;
    std::string path = line + path_pos;
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    if (path.empty()) continue;
    MapEntry m{start, end, offset, path, {}};
    if (path == exe_path) {
      m.build_id = scan.exe_build_id;
    } else if (auto it = scan.by_path.find(path); it != scan.by_path.end()) {
      m.build_id = it->second;
    }
    out.push_back(std::move(m));
  }
  fclose(f);
  return out;
}

}  // namespace dlprof
