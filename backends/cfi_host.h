// Where the cfi tables' maintainer (backends/cfi_tables.h, CfiMaintain)
// finds the loaded objects, reads their unwind bytes and puts the tables it
// builds. Two hosts:
//  * this process (the default): dl_iterate_phdr, reads of its own memory,
//    private anonymous pages. The collector thread maintains the tables.
//  * the program seen from the collector process (core/remote_cfi.h): its
//    objects from /proc/<pid>/maps and their program headers, its bytes by
//    process_vm_readv, and the tables in the arena's cfi region
//    (backends/cfi_region.h), mapped at the same address in both, so the
//    program's signal handler reads what the helper wrote.
// Not signal-safe; used by the maintainer only.
#ifndef DLPROF_BACKENDS_CFI_HOST_H_
#define DLPROF_BACKENDS_CFI_HOST_H_

#include <link.h>

#include <cstddef>
#include <cstdint>

namespace dlprof {

class CfiHost {
 public:
  constexpr CfiHost() = default;
  // Calls `callback` for each loaded object as dl_iterate_phdr() does (its
  // dlpi_adds and dlpi_subs change when the set of objects does). False,
  // without calling it, when the objects cannot be walked now (the loader
  // busy): the tables try again at the next tick.
  virtual bool IterateObjects(int (*callback)(dl_phdr_info*, size_t, void*), void* data) = 0;
  // Copies [from, from + n) of the program's memory to `to`; returns the
  // bytes copied (fewer where memory is gone: an object unloaded meanwhile).
  virtual size_t Copy(void* to, uintptr_t from, size_t n) = 0;
  // `bytes` of zeroed, writable memory that the program's signal handler can
  // read at the returned address; nullptr if there is none. `populate`: it
  // is all written at once (its pages are made in one call).
  virtual void* Map(size_t bytes, bool populate) = 0;
  // Written: read-only from now on where the host can say so.
  virtual void Seal(void* at, size_t bytes) = 0;
  // Memory from Map that no published snapshot names any more.
  virtual void Unmap(void* at, size_t bytes) = 0;
  // Whether memory that the current snapshot no longer names may be
  // unmapped now: no handler is reading (`readers`, the shared count) and
  // nothing else may still be copying it (a fork's copy of the arena).
  virtual bool Quiet(int64_t readers) = 0;
  // True for the collector process: the maintainer runs outside the program.
  virtual bool Outside() const = 0;

 protected:
  // Never deleted through this interface; trivial, so that the library's
  // own host is a constant-initialized global (no dynamic initializers).
  ~CfiHost() = default;
};

// Makes `host` (kept for the process's life) the tables' host: before the
// first CfiMaintain. Not signal-safe.
void CfiSetHost(CfiHost* host);

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_CFI_HOST_H_
