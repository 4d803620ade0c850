// Offline symbolizer: turns (module, build-id, file offset) locations into
// source frames with elfutils' libdwfl, long after the profiled process died.
#ifndef DLPROF_READERS_SYMBOLIZER_H_
#define DLPROF_READERS_SYMBOLIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "readers/profile.h"

namespace dlprof {

// The GNU build-id of the ELF file at `path` as lowercase hex, or "" when the
// file is missing, not ELF, or has no build-id note.
std::string ReadElfBuildId(const std::string& path);

// Resolves locations to frames. Each module is opened once and kept open,
// however many spellings of its path the profile has (the same build-id, or
// else the same device and inode), so a profile with millions of samples
// costs one DWARF load per module and one lookup per distinct location.
//
// Debug info is found as gdb and eu-addr2line find it: in the module itself,
// by build-id under `<dir>/.build-id/xx/yyyy.debug` for every absolute dir of
// the search path, or by .gnu_debuglink next to the module, in its `.debug/`
// subdirectory, or under `<dir>/<module's directory>`. When the file at the
// recorded path is missing or has another build-id than the one recorded, its
// symbols are not trusted (one warning per module); the debug file named by
// the recorded build-id is used instead if one exists.
//
// Not thread-safe: use one Symbolizer per thread.
class Symbolizer {
 public:
  // `debuginfo_path` uses the elfutils syntax (see dwfl_standard_find_debuginfo
  // in libdwfl.h): colon-separated dirs, "" meaning the module's own dir.
  explicit Symbolizer(std::string debuginfo_path = ":.debug:/usr/lib/debug");
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Fills `frames` of every location in `locs` that has none and is not a
  // pseudo location: innermost inlined function first, the real (outermost)
  // function last; each with its demangled name, source file and line. An
  // address nothing is known about becomes one frame "module_basename+0xoff"
  // (off = file offset), or "0xaddress" when the location has no module.
  //
  // `is_return[i]` says that locs[i] is a return address (a caller's frame
  // rather than the sampled pc). Its line is then looked up at address - 1,
  // inside the call instruction, as pprof and gdb do; otherwise a call at
  // the end of a function, or an inlined call, would be attributed to the
  // next line or the wrong function. Missing entries count as false.
  void Symbolize(std::vector<Location>* locs, const std::vector<bool>& is_return);

  // Symbolizes every location of `profile`. A location is a return address
  // when some stack holds it at a non-leaf position. Warnings are appended to
  // profile->warnings. Then merges the Python frames of each stack into its
  // native ones (MergePythonStacks, readers/python_merge.h), which needs the
  // names: every path that symbolizes a profile gets merged stacks.
  void SymbolizeProfile(Profile* profile);

  // Problems met so far ("module: build-id ... differs ..."), one per module.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  struct Module;

  Module* GetModule(const std::string& path, const std::string& build_id);
  std::vector<Frame> Frames(Module* m, uint64_t vaddr, uint64_t module_offset);

  std::string debuginfo_path_;
  char* debuginfo_path_c_;  // into debuginfo_path_: libdwfl keeps a char**
  std::vector<std::unique_ptr<Module>> owned_;
  // By spelling (path + '\0' + build-id), by recorded build-id (modules
  // symbolized with it), by file ("dev:inode" + '\0' + build-id): spellings
  // of one file share one module.
  std::unordered_map<std::string, Module*> modules_, by_build_id_, by_file_;
  std::vector<std::string> warnings_;
};

}  // namespace dlprof

#endif  // DLPROF_READERS_SYMBOLIZER_H_
