// Another process's executable mappings with their GNU build-ids, read from
// outside (/proc/<pid>/maps and the mapped files): what ReadExecutableMappings
// (core/proc_maps.h) gives inside the process, for the collector process.
// Links libelf, so it lives in dlprof_remote, never in libdlprof.so.
#ifndef DLPROF_CORE_REMOTE_MAPS_H_
#define DLPROF_CORE_REMOTE_MAPS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/proc_maps.h"

namespace dlprof {

// Keeps the build-ids it has read, by file identity, so that a read after
// the first costs the maps parse and a stat() per mapped file. Not
// thread-safe; not signal-safe. Never throws.
class RemoteMaps {
 public:
  // use_map_files = false skips /proc/<pid>/map_files, as the kernel does
  // for a helper without CAP_CHECKPOINT_RESTORE: for tests.
  explicit RemoteMaps(bool use_map_files = true);

  // The executable, file-backed mappings of `pid` (the lines and fields
  // ReadExecutableMappings keeps, "(deleted)" and "[vdso]" included), each
  // with the build-id of the object mapped there, "" when none could be
  // read. A file is opened through /proc/<pid>/map_files, else
  // /proc/<pid>/root/<path>, else <path> (a path only when its inode is the
  // mapped one); failing those (a deleted file without map_files; the vdso),
  // its headers are read from the process's memory (process_vm_readv:
  // ptrace-attach permission). False with *error (naming the pid), *out
  // untouched, when the maps cannot be read.
  // `maps_text`, if given, is the maps as just read (by another reader of
  // the same process), used instead of reading the file again.
  bool Read(pid_t pid, std::vector<MapEntry>* out, std::string* error,
            const std::string* maps_text = nullptr);

  // The build-ids read from files so far, by file identity (device, inode,
  // mtime), as bytes another RemoteMaps takes with ImportFiles: a fork
  // child's collector process starts with its parent's, and stat()s each
  // mapped file instead of opening and parsing ~300 of them (a torch
  // worker's 20 ms of CPU). ImportFiles ignores what it cannot parse.
  std::string ExportFiles() const;
  void ImportFiles(const void* data, size_t size);
  size_t cached() const { return build_ids_.size(); }

  // Object images read so far: files opened, headers read from memory.
  uint64_t files_opened() const { return files_opened_; }
  uint64_t memory_reads() const { return memory_reads_; }

 private:
  // File: (st_dev, st_ino, mtime ns, 0). Image in a process's memory: (pid,
  // maps inode, address of its offset-0 mapping, 1).
  using Key = std::tuple<uint64_t, uint64_t, uint64_t, int>;
  std::map<Key, std::string> build_ids_;
  // A mapped file as the maps name it: (device major, minor, inode, path).
  using Object = std::tuple<unsigned, unsigned, unsigned long, std::string>;
  // The build-ids the last read found through the files of objects mapped
  // then. A file still mapped under the same name, device and inode at the
  // next read is not stat()ed again: that was 300 stats of
  // /proc/<pid>/map_files per read of a torch process, each read, and a
  // DataLoader worker's helper reads a few times in its first second. (Not
  // seen: a file rewritten in place, same inode, and mapped again between
  // two reads.)
  std::map<Object, std::string> still_mapped_;
  bool use_map_files_;
  uint64_t files_opened_ = 0;
  uint64_t memory_reads_ = 0;
};

// One read without a cache (RemoteMaps::Read).
bool ReadProcessMappings(pid_t pid, std::vector<MapEntry>* out, std::string* error);

// A hash of every field of `maps`: equal from one read to the next when
// nothing was mapped or unmapped, so a caller can skip re-encoding them.
uint64_t MappingsFingerprint(const std::vector<MapEntry>& maps);

}  // namespace dlprof

#endif  // DLPROF_CORE_REMOTE_MAPS_H_
