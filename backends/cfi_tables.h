// The "cfi" unwinder's tables: for each loaded object, the compact unwind
// rows decoded from its .eh_frame (backends/eh_frame.h), published so that
// the signal handler can look a pc up with no lock: a word of the row cache,
// or two binary searches on a miss.
//
// Who does what:
//  * The collector thread (CfiMaintain, every tick, off the signal path)
//    notices objects loaded and unloaded (dl_iterate_phdr's counters),
//    decodes tables, and publishes an immutable snapshot of them.
//    An object is decoded only once a sample's walk lands in it: a torch
//    process has 300+ objects, and decoding them all when first seen took
//    2.5 s of the collector's CPU and 74 MB for 5.9M rows, most of them in
//    libraries no sample ever walked through.
//    A big object is decoded by parts (64 KiB of its code each, kCfiPartShift):
//    only the parts a walk landed in. libtorch_cpu has 1,289 parts, of which
//    a training run's samples touch ~140; decoding it whole took ~130 ms of
//    each torch process's collector (BENCHMARKS.md).
//  * The signal handler (CfiLookup, inside a CfiReadSection) finds the row
//    for a pc in the snapshot. A pc in an object or part without rows yet
//    asks for them (one atomic store; in a fork child one more, in a page
//    shared with the parent, which decodes them too: the children forked
//    after it inherit the rows). The walk stops there, and the collector
//    finishes it from a copy of the stack once it has decoded the rows
//    (backends/cfi_unwinder.h); where it cannot, the frame is walked by
//    frame pointer.
//
// Memory: rows and snapshots live in mmap'd pages, not on the program's
// heap. A snapshot or an unloaded object's rows are unmapped once no handler
// is inside a CfiReadSection (a counter the handler raises and lowers: one
// atomic add and one subtract per sample). In a fork child that inherited
// a raised count (another thread was sampling at the fork) they are kept.
//
// Only the collector thread may call CfiMaintain: the tables have one
// writer, so they take no lock a fork child could inherit held.
#ifndef DLPROF_BACKENDS_CFI_TABLES_H_
#define DLPROF_BACKENDS_CFI_TABLES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/eh_frame.h"

namespace dlprof {

namespace cfi_shared {
struct CfiSharedState;
}  // namespace cfi_shared

// How CfiMaintain walks the loaded objects: calls `callback` as
// dl_iterate_phdr() would, or returns false without calling it when the
// loader is busy (the tables then try again at the next tick). The runtime
// sets one that never waits for the loader's lock and that fork() waits for
// (core/proc_maps.h TryIterateLoadedObjects); unset, it is dl_iterate_phdr.
using CfiObjectIterator = bool (*)(int (*callback)(struct dl_phdr_info*, size_t, void*), void* data);
void CfiSetObjectIterator(CfiObjectIterator iterate);

// Objects we keep track of in one process; more are walked by frame pointer.
constexpr int kCfiMaxObjects = 1024;

// Rows are found in two steps: `index[off >> kCfiIndexShift]` is the row
// covering the start of that 256-byte granule of code, so the search is
// among the few rows up to the next granule's. (A plain binary search over
// 74k rows of CPython was 17 dependent loads, 70 ns a frame.)
constexpr int kCfiIndexShift = 8;

// A big object's parts: [lo + (i << kCfiPartShift), lo + ((i + 1) << kCfiPartShift)).
constexpr int kCfiPartShift = 16;

// One decoded part: `row_count` rows (sorted; the first may start before
// the part, in a function that runs into it), then an index of
// 1 << (kCfiPartShift - kCfiIndexShift) granules of the part.
struct CfiPartRows {
  uint32_t row_count;
  uint32_t index_count;
  const CfiRow* rows() const { return reinterpret_cast<const CfiRow*>(this + 1); }
  const uint32_t* index() const { return reinterpret_cast<const uint32_t*>(rows() + row_count); }
};

// A part's slot, written by the collector (rows, once, with release) and by
// the handler (wanted).
struct CfiPart {
  std::atomic<const CfiPartRows*> rows;
  std::atomic<uint8_t> wanted;
};

struct CfiObject {
  uintptr_t lo = 0, hi = 0;  // the executable segments, [lo, hi)
  uintptr_t base = 0;        // rows' pc_offset origin
  // Decoded whole: rows and their index.
  const CfiRow* rows = nullptr;
  const uint32_t* index = nullptr;
  uint32_t row_count = 0;
  uint32_t index_count = 0;
  uint32_t id = 0;  // index of its want flag
  // Decoded by parts (when rows is nullptr): `part_count` slots.
  CfiPart* parts = nullptr;
  uint32_t part_count = 0;
};

struct CfiSnapshot {
  uint32_t unloads;  // how many objects had been unloaded when it was made
  uint32_t count;
  CfiObject objects[1];  // `count` of them, sorted by lo, not overlapping
};

// While one is alive on a thread, the snapshot it returns stays mapped.
// This class is safe to use from asynchronous signals (two atomic ops).
class CfiReadSection {
 public:
  CfiReadSection();
  ~CfiReadSection();
  CfiReadSection(const CfiReadSection&) = delete;
  CfiReadSection& operator=(const CfiReadSection&) = delete;
  const CfiSnapshot* snapshot() const { return snapshot_; }

 private:
  cfi_shared::CfiSharedState* state_;
  const CfiSnapshot* snapshot_;
};

enum class CfiFound {
  kRow,       // *row is the row for pc
  kNotBuilt,  // pc is in an object whose rows are not decoded yet (now asked for)
  kNoObject,  // pc is in no object we know (JIT code, a gap)
};

// The row that covers `pc`. This function is safe to call from asynchronous
// signals: reads of the snapshot, and relaxed atomic stores (a want flag, a
// word of the row cache).
//
// The row cache: 4096 words, each a pc's row packed with the pc's tag and
// the snapshot's unload count, so a hit costs one load instead of the
// searches (which cost ~40 ns a frame: on this VM each timer interrupt is a
// VM exit that leaves the tables cold). Rows of a loaded object never
// change, so only an unload makes a word stale, and the unload count in it
// says so (it wraps after 256 unloads; a stale word then can mislead one
// frame of a walk, whose reads stay inside the stack bounds).
CfiFound CfiLookup(const CfiSnapshot* snapshot, uintptr_t pc, CfiRow* row);

// The collector's tick. Not signal-safe; collector thread only. It does
// nothing until a walk has asked for tables (CfiLookup, or CfiWantTables):
// a process that is never sampled (a shell that execs at once, a 3 ms
// helper) decodes nothing.
void CfiMaintain();
// Decodes the rows for `pc` now, if its object or part has none yet and
// they were not tried before: true when there are rows for it afterwards
// that were not there before (a walk stopped there can go on). For the
// collector's walks (backends/cfi_unwinder.h); does nothing (false) on any
// thread but the one that runs CfiMaintain. Not signal-safe.
bool CfiDecodeNow(uintptr_t pc);
// Starts the tables, as a first walk does. Async-signal-safe: one relaxed
// store.
void CfiWantTables();
// From the next CfiMaintain on, decodes every loaded object, not only those
// walks landed in: for tests and benchmarks, which are their own collector
// and want warm tables before their first walk. Not signal-safe.
void CfiDecodeAllLoaded();

// Objects the tables saw loaded and then gone, since the last call: where a
// library that came and went between two reads of /proc/self/maps was
// (the collector adds them to the profile's mappings, so that its samples
// keep their names). At most the last 256. Not signal-safe.
struct CfiUnloadedObject {
  std::string path;
  uintptr_t lo, hi, offset;  // its first executable mapping
};
std::vector<CfiUnloadedObject> CfiTakeUnloadedObjects();

struct CfiStats {
  int objects = 0;        // known now
  int decoded = 0;        // with rows
  uint64_t rows = 0;
  uint64_t bytes = 0;     // of rows, mapped
  uint64_t decode_ns = 0; // collector time spent decoding, all objects
  uint64_t misses = 0;    // frames whose object or part had no rows yet
  // Of those, by object loaded now (file name, count), most first; at most 8.
  std::vector<std::pair<std::string, uint64_t>> missed_in;
  long skipped_fdes = 0;  // corrupt or unfollowable FDEs
  uint64_t parts = 0;          // of the objects decoded by parts
  uint64_t parts_decoded = 0;  // of those
};
// Not signal-safe (reads the collector's counters; approximate while it runs).
CfiStats CfiTableStats();
std::string DescribeCfiStats(const CfiStats& s);

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_CFI_TABLES_H_
