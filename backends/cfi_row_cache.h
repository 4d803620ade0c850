// Decoded cfi tables shared by every process and run that profiles into one
// DLPROF_OUT: one file per object version, DLPROF_OUT/.cfi-cache/
// cfi-<build-id>-<text offset>-<header offset>.rows, holding the table's
// pages as they are mapped (rows, then the granule index) and a trailer
// that says what they are.
//
// Why: the main process of a torch run spent 2/3 of its collector's CPU
// decoding (libtorch_cpu alone: 1.41M rows, 130-200 ms), and every process
// that does not inherit the tables by fork decodes them again: spawned and
// forkserver DataLoader workers, torchrun's ranks, the next run. A cached
// table is mapped from the file (no decode, no copy) and its pages are the
// page cache's, shared by all those processes instead of 17 MB of private
// rows each.
//
// Trust: the folder is the user's own (DLPROF_OUT is created 0700), the
// folder is checked to be a directory owned by us with no group or other
// access, files are opened without following links, and a table is used
// only if its trailer names the object's build-id and offsets and its rows
// and index are in order. A wrong table can only mislead walks, whose reads
// are bounded and fault-safe. Off the signal path: the collector thread.
#ifndef DLPROF_BACKENDS_CFI_ROW_CACHE_H_
#define DLPROF_BACKENDS_CFI_ROW_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/eh_frame.h"

namespace dlprof {

// Where the tables are kept ("" turns the cache off, the default). Called
// once before the collector starts; creates the folder (0700) if needed.
void CfiSetRowCacheFolder(const std::string& folder);

// Which object version a table is for.
struct CfiRowKey {
  std::string build_id;  // raw bytes; empty: the object is not cached
  uint64_t text_offset = 0;    // text_lo - load bias
  uint64_t header_offset = 0;  // eh_frame_hdr (or eh_frame) - load bias
};

// A table mapped from the cache: rows, then the index, in one read-only
// mapping of `mapped` bytes starting at `rows` (munmap(rows, mapped)).
struct CfiCachedTable {
  const CfiRow* rows = nullptr;
  const uint32_t* index = nullptr;
  uint32_t row_count = 0, index_count = 0;
  size_t mapped = 0;
};

// The cached table for `key`, if there is a valid one.
bool CfiRowCacheLoad(const CfiRowKey& key, CfiCachedTable* out);
// Stores a decoded table (`rows` followed by `index`, as Decode maps them)
// for the processes that come next: a temporary file renamed into place.
// Never past RLIMIT_FSIZE (whose SIGXFSZ would kill the program); on any
// failure nothing is kept.
void CfiRowCacheStore(const CfiRowKey& key, const CfiRow* rows, uint32_t row_count,
                      const uint32_t* index, uint32_t index_count);

struct CfiRowCacheStats {
  uint64_t loaded = 0;    // tables mapped from the cache
  uint64_t stored = 0;    // tables written to it
  uint64_t rejected = 0;  // cache files found invalid (decoded again)
};
CfiRowCacheStats CfiRowCacheTableStats();

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_CFI_ROW_CACHE_H_
