// The executable mappings of this process with their GNU build-ids, recorded
// so the reporter can symbolize offline, even after the process is gone.
#ifndef DLPROF_CORE_PROC_MAPS_H_
#define DLPROF_CORE_PROC_MAPS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace dlprof {

struct MapEntry {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  std::string path;
  std::string build_id;  // raw bytes
};

// Parses /proc/self/maps (executable, file-backed mappings only) and attaches
// build-ids read from the loaded objects' PT_NOTE segments in memory.
std::vector<MapEntry> ReadExecutableMappings();

// Changes whenever an object is loaded or unloaded (dl_iterate_phdr's counters).
uint64_t LoadedObjectsGeneration();

}  // namespace dlprof

#endif  // DLPROF_CORE_PROC_MAPS_H_
