// State shared by the two halves of the unwind tables: the signal path's
// lookup (backends/cfi_lookup.cc) and the collector's maintenance
// (backends/cfi_tables.cc). Internal to them; everything else goes through
// backends/cfi_tables.h.
//
// All of it is atomics, constant-initialized (the library has no dynamic
// initializers), so that a handler may read and write it at any time.
#ifndef DLPROF_BACKENDS_CFI_SHARED_H_
#define DLPROF_BACKENDS_CFI_SHARED_H_

#include <atomic>
#include <cstdint>

#include "backends/cfi_tables.h"

namespace dlprof {
namespace cfi_shared {

// What the handler and the tables' maintainer share: the snapshot handlers
// search, how many handlers are reading one (an old snapshot is freed only
// when none is: CfiReadSection), and per object id the want flags (a walk
// landed in it while it had no rows: decode it). In this process's own
// static memory while the collector is a thread; in the arena's cfi region
// (backends/cfi_region.h) when a collector process maintains the tables,
// so that the handler in the program and the maintainer in the helper see
// the same words.
struct CfiSharedState {
  std::atomic<const CfiSnapshot*> snapshot;
  std::atomic<int64_t> readers;
  std::atomic<uint8_t> wanted[kCfiMaxObjects];
  // Frames whose object or part had no rows yet, in all and by object id
  // (zeroed when an id is reused): where rows came late, for users and tests.
  std::atomic<uint64_t> misses;
  std::atomic<uint32_t> object_misses[kCfiMaxObjects];
  // pcs in no object of the snapshot (a library loaded since it was made,
  // JIT code): the maintainer outside reads the maps again sooner.
  std::atomic<uint64_t> no_object;
  // A walk has run: the maintainer starts working.
  std::atomic<bool> tables_wanted;
};
extern CfiSharedState g_own_state;
// The state in use: &g_own_state, or the cfi region's (set before any
// handler can run, CfiUseRegion). One load on the signal path.
extern std::atomic<CfiSharedState*> g_state;
inline CfiSharedState& State() { return *g_state.load(std::memory_order_acquire); }

// Want flags shared with this process's fork children (one MAP_SHARED
// mapping, made by the first CfiMaintain and inherited): a worker whose walk
// lands in an object its parent never decoded (PIL's and libjpeg's code
// runs only in DataLoader workers) asks the parent too, so that the workers
// forked after it inherit the rows instead of each decoding them again
// (~4 ms of each torch worker's collector). Only the process that made
// them reads them (g_shared_wants_own); a child writes until its own list
// of objects changes (ids would differ).
constexpr uint32_t kSharedParts = 8192;
struct SharedWants {
  std::atomic<uint8_t> wanted[kCfiMaxObjects];  // objects decoded whole
  // Parts, as (id + 1) << 20 | part, appended: `next` is taken first, then
  // the entry written (0 until then). Full: children stop asking.
  std::atomic<uint32_t> next;
  std::atomic<uint32_t> parts[kSharedParts];
};
extern std::atomic<SharedWants*> g_shared_wants;
extern std::atomic<bool> g_shared_wants_own;  // this process made them (false in a fork child)

}  // namespace cfi_shared
}  // namespace dlprof

#endif  // DLPROF_BACKENDS_CFI_SHARED_H_
