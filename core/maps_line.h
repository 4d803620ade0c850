// Lines of /proc/<pid>/maps: the one parser every reader of the maps uses
// (the program's own list of its executable mappings, core/proc_maps.cc;
// the helper's maps and build-ids, core/remote_maps.cc; the helper's list
// of loaded objects for the cfi tables, core/remote_cfi.cc). Not
// signal-safe (ReadMapsText allocates); ParseMapsLine neither allocates nor
// locks.
#ifndef DLPROF_CORE_MAPS_LINE_H_
#define DLPROF_CORE_MAPS_LINE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace dlprof {

struct MapsLine {
  uintptr_t lo = 0, hi = 0, offset = 0;
  char perms[4] = {};  // r/-, w/-, x/-, p/s
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  // The path as the kernel writes it ("[vdso]", "/x.so (deleted)"), without
  // the line's end or trailing spaces; empty for anonymous memory. Points
  // into the parsed line.
  std::string_view path;

  bool readable() const { return perms[0] == 'r'; }
  bool executable() const { return perms[2] == 'x'; }
  uint64_t dev() const { return (static_cast<uint64_t>(dev_major) << 32) | dev_minor; }
};

// Parses one line ("lo-hi perms offset major:minor inode [path]"), with or
// without its '\n'. False, *out unspecified, if it is not such a line.
// By hand rather than sscanf: a torch process has ~1,700 lines, and the
// helper reads them several times in a DataLoader worker's first second;
// sscanf was a tenth of such a helper's CPU.
bool ParseMapsLine(std::string_view line, MapsLine* out);

// Calls fn(const MapsLine&) for each line of `text` that parses.
template <class Fn>
void ForEachMapsLine(std::string_view text, Fn&& fn) {
  MapsLine m;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (ParseMapsLine(line, &m)) fn(static_cast<const MapsLine&>(m));
  }
}

// The maps text larger than this is refused (a process with millions of
// mappings): the reader says so instead of using the memory.
constexpr size_t kMaxMapsBytes = 64u << 20;

// The whole of /proc/<pid>/maps (pid 0: /proc/self/maps), read in large
// chunks. False with *error (naming the file) when it cannot be read or is
// larger than kMaxMapsBytes.
bool ReadMapsText(pid_t pid, std::string* text, std::string* error);

}  // namespace dlprof

#endif  // DLPROF_CORE_MAPS_LINE_H_
