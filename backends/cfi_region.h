// The cfi tables' region in the shared arena (core/shared_arena.h), for a
// program whose collector is a process (DLPROF_COLLECTOR=process, issue 11's
// phase 4): the program maps it at session start, the helper maps the same
// memfd pages at the same address, builds the tables into it
// (core/remote_cfi.h), and the program's signal handler searches them
// there. The region starts with the state they share (cfi_shared.h: the
// snapshot's pointer, the readers' count, the want flags) and the helper's
// allocation cursor; the rest is the helper's heap of rows and snapshots.
//
// A fork copies the region with the rest of the arena (AtFork::kCopy), so a
// fork child's helper starts from its parent's rows (it adopts those of the
// objects still loaded at the same place) and allocates past the cursor.
#ifndef DLPROF_BACKENDS_CFI_REGION_H_
#define DLPROF_BACKENDS_CFI_REGION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "backends/cfi_shared.h"

namespace dlprof {

// Address space reserved, not memory: the memfd's pages exist once written
// (but for a program that locks its memory: mlockall makes every page of it
// real, and a fork then copies them all, so the region is kept small). A
// DataLoader run's main process used 2.6 MiB (decoded by parts); past the
// end, objects stay without rows and their frames are walked by frame
// pointer.
constexpr size_t kCfiRegionBytes = size_t{16} << 20;

struct CfiRegion {
  uint64_t magic;
  uint64_t bytes;  // the whole region, this header included
  // Offset of the first byte the helper never handed out (written by the
  // helper only; read by a fork child's).
  std::atomic<uint64_t> used;
  // The deferred walks' pool (backends/cfi_unwinder.h), an arena extent of
  // its own, set by the program before its helper starts; nullptr if none.
  void* deferred_pool;
  // The helper's cache of build-ids by file (core/remote_maps.h
  // ExportFiles), in its heap: a block whose first 8 bytes are the length
  // of what follows; nullptr if none. A fork child's helper starts with its
  // parent's. Replaced whole; an old block is freed as tables are.
  std::atomic<const uint64_t*> maps_cache;
  cfi_shared::CfiSharedState state;
};
constexpr uint64_t kCfiRegionMagic = 0x31494643666c6455ull;  // "UdlfCFI1"
// Where the heap starts: after the header, page-aligned.
constexpr size_t kCfiRegionHeapOffset = (sizeof(CfiRegion) + 4095) & ~size_t{4095};

// Program side, at session start: makes a region of `bytes` at `at` (zeroed
// arena memory) and returns it.
CfiRegion* CfiInitRegion(void* at, size_t bytes);
// Program and helper: the handler's and the maintainer's shared state is
// the region's from now on, and the handler leaves no walk to a collector
// in this process (no deferred walks: nothing here would finish them).
// Before any handler can run. False for a region that is not one.
bool CfiUseRegion(CfiRegion* region);
// The region in use, or nullptr (the collector is a thread).
CfiRegion* CfiActiveRegion();

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_CFI_REGION_H_
