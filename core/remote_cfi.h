// The cfi tables' host for the collector process (backends/cfi_host.h):
// the program's loaded objects found from outside, their unwind bytes read
// by process_vm_readv, and the tables put in the arena's cfi region
// (backends/cfi_region.h), which the program's signal handler searches at
// the same addresses. Helper only (library dlprof_remote). Not thread-safe;
// not signal-safe.
#ifndef DLPROF_CORE_REMOTE_CFI_H_
#define DLPROF_CORE_REMOTE_CFI_H_

#include <elf.h>
#include <link.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cfi_host.h"
#include "backends/cfi_region.h"

namespace dlprof {

// One loaded ELF object of another process, found from its maps: the
// mapping of the file's offset 0 holds its ELF header, whose program
// headers give the load bias and segments, as dl_iterate_phdr would.
struct RemoteObject {
  std::string name;  // the maps' path ("[vdso]" for the vdso)
  uintptr_t bias = 0;
  std::vector<ElfW(Phdr)> phdrs;
};

// The objects of `pid` now; false with *error when its maps cannot be read.
// An offset-0 mapping counts only when the object it heads has an
// executable mapping of the same file inside its segments (a data file
// mapped whole, an ELF file read with mmap, are not loaded objects).
//
// `headers`, if given, keeps what each object's headers gave (or that the
// mapping heads no ELF object) by its offset-0 mapping's line (addresses,
// device, inode, path), for the next read: one still mapped the same is not
// read again (two process_vm_readv per object, ~300 objects in a torch
// process, at each read). Entries of mappings gone at a read are dropped.
struct RemoteHeader {
  bool elf = false;
  bool unreadable = false;  // process_vm_readv failed: read again next time
  uintptr_t bias = 0, text_lo = 0, text_hi = 0;
  std::vector<ElfW(Phdr)> phdrs;
};
using RemoteHeaders =
    std::map<std::tuple<uintptr_t, uintptr_t, uint64_t, uint64_t, std::string>, RemoteHeader>;
// `maps_text`, if given, receives the maps text the objects were found in.
bool ReadRemoteObjects(pid_t pid, std::vector<RemoteObject>* out, std::string* error,
                       RemoteHeaders* headers = nullptr, std::string* maps_text = nullptr);

// The size of the executable mappings (kB) in a /proc/<pid>/status text:
// VmExe + VmLib. False when either is missing.
bool ParseExecKb(const char* status, uint64_t* kb);

class RemoteCfiHost final : public CfiHost {
 public:
  RemoteCfiHost(pid_t pid, CfiRegion* region);
  ~RemoteCfiHost();
  RemoteCfiHost(const RemoteCfiHost&) = delete;
  RemoteCfiHost& operator=(const RemoteCfiHost&) = delete;

  bool IterateObjects(int (*callback)(dl_phdr_info*, size_t, void*), void* data) override;
  size_t Copy(void* to, uintptr_t from, size_t n) override;
  void* Map(size_t bytes, bool populate) override;
  void Seal(void*, size_t) override {}
  void Unmap(void* at, size_t bytes) override;
  bool Quiet(int64_t readers) override;
  bool Outside() const override { return true; }

  // Bytes of the region's heap in use (handed out and not freed).
  uint64_t heap_in_use() const { return in_use_; }
  // Changes when the set of the program's objects read does (0 before the
  // first read).
  uint64_t generation() const { return generation_; }
  // Times the program's objects were read (its maps and headers), and the
  // reads due that its executable mappings' size spared (RefreshIfDue).
  uint64_t scans() const { return scans_; }
  uint64_t size_checks() const { return size_checks_; }
  // The maps text of the last read, and when it was read (MonotonicNs; 0:
  // none yet): what the helper's list of mappings takes instead of reading
  // the file again (in a DataLoader worker's first second the two readers
  // together read it ~9 times; each reads it once a second after that).
  const std::string& maps_text() const { return maps_text_; }
  int64_t maps_text_ns() const { return maps_text_ns_; }
  // Why the program's objects could not be read, or why none was found
  // ("" when some were): for the profile (the tables are empty then).
  std::string Unreadable() const;

 private:
  // Reads the objects again when due: at the first walk, then once a
  // second if the size of the executable mappings changed (every
  // kFullReadNs regardless: a library replaced by one of the same size), or
  // sooner when a handler met a pc in no object (a library loaded since):
  // 20 ms after the last read while reads find new objects, doubling to a
  // second while they find none.
  void RefreshIfDue();
  // VmExe + VmLib of the program's status (kB), through a descriptor kept
  // open (the helper's own); false when unreadable.
  bool ReadExecKb(uint64_t* kb);
  static constexpr int64_t kFullReadNs = 10000000000;
  int status_fd_ = -1;
  uint64_t exec_kb_ = 0;            // at the last read of the maps
  int64_t last_full_read_ns_ = 0;
  uint64_t size_checks_ = 0;

  pid_t pid_;
  CfiRegion* region_;
  std::vector<RemoteObject> objects_;
  RemoteHeaders headers_;     // the last read's, for the next one
  std::string maps_text_;     // see maps_text()
  int64_t maps_text_ns_ = 0;
  uint64_t generation_ = 0;   // changes when the set of objects does
  uint64_t fingerprint_ = 0;  // of objects_
  int64_t last_read_ns_ = 0;
  uint64_t no_object_seen_ = 0;
  static constexpr int64_t kFirstMissWaitNs = 20000000;
  int64_t miss_wait_ns_ = kFirstMissWaitNs;  // RefreshIfDue
  std::string read_error_;                   // the last read's failure
  uint64_t scans_ = 0;
  // Freed heap runs by address (merged with their neighbours), reused first.
  std::map<uintptr_t, size_t> free_;
  uint64_t in_use_ = 0;
};

}  // namespace dlprof

#endif  // DLPROF_CORE_REMOTE_CFI_H_
