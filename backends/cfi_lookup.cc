// The signal path's side of the tables (backends/cfi_tables.h): finding a
// pc's row in the published snapshot, through a small cache, and saying
// which object or part a walk wanted when there was none. Every function
// here is async-signal-safe: atomics and reads of published memory only.
#include <atomic>
#include <cstdint>

#include "backends/cfi_shared.h"
#include "backends/cfi_tables.h"

namespace dlprof {
namespace cfi_shared {

CfiSharedState g_own_state{};
std::atomic<CfiSharedState*> g_state{&g_own_state};
std::atomic<SharedWants*> g_shared_wants{nullptr};
std::atomic<bool> g_shared_wants_own{false};

}  // namespace cfi_shared

using cfi_shared::CfiSharedState;
using cfi_shared::g_shared_wants;
using cfi_shared::g_shared_wants_own;
using cfi_shared::State;
using cfi_shared::kSharedParts;
using cfi_shared::SharedWants;

namespace {

// The row cache (CfiLookup). A word: kind (2 bits: 1 sp, 2 fp; 0 empty),
// cfa_offset / 8 (11 bits), fp code (8 bits: 0 unchanged, -128 lost, else
// fp_offset / 8), unload count (8 bits), pc >> 12 (35 bits: user space is
// below 2^47 on x86_64). Rows that do not fit are not cached.
constexpr int kCacheBits = 12;
std::atomic<uint64_t> g_row_cache[1 << kCacheBits];

uint32_t CacheSlot(uintptr_t pc) {
  return static_cast<uint32_t>((pc ^ (pc >> kCacheBits)) & ((1u << kCacheBits) - 1));
}

// 0 when the row cannot be cached.
uint64_t PackCached(uintptr_t pc, const CfiRow& row, uint32_t unloads) {
  if ((row.kind != kCfiSp && row.kind != kCfiFp) || pc >> 47 != 0) return 0;
  if (row.cfa_offset < 0 || row.cfa_offset % 8 != 0 || row.cfa_offset / 8 >= (1 << 11)) return 0;
  int fp_code;
  if (row.fp_offset == 0) {
    fp_code = 0;
  } else if (row.fp_offset == INT16_MIN) {
    fp_code = -128;
  } else if (row.fp_offset % 8 == 0 && row.fp_offset / 8 >= -127 && row.fp_offset / 8 <= 127) {
    fp_code = row.fp_offset / 8;
  } else {
    return 0;
  }
  return static_cast<uint64_t>(row.kind) | static_cast<uint64_t>(row.cfa_offset / 8) << 2 |
         static_cast<uint64_t>(static_cast<uint8_t>(fp_code)) << 13 |
         static_cast<uint64_t>(unloads & 0xff) << 21 | static_cast<uint64_t>(pc >> kCacheBits) << 29;
}

bool UnpackCached(uint64_t word, uintptr_t pc, uint32_t unloads, CfiRow* row) {
  if ((word & 3) == 0 || (word >> 29) != (pc >> kCacheBits) ||
      ((word >> 21) & 0xff) != (unloads & 0xff)) {
    return false;
  }
  row->kind = static_cast<uint8_t>(word & 3);
  row->cfa_offset = static_cast<int32_t>((word >> 2) & 0x7ff) * 8;
  const int fp_code = static_cast<int8_t>((word >> 13) & 0xff);
  row->fp_offset = fp_code == -128 ? INT16_MIN : static_cast<int16_t>(fp_code * 8);
  row->pc_offset = 0;
  row->reserved = 0;
  return true;
}

}  // namespace

namespace {
CfiFound SearchTables(const CfiSnapshot* snap, uintptr_t pc, CfiRow* row);
CfiFound SearchRows(const CfiRow* rows, uint32_t row_count, const uint32_t* index,
                    uint32_t index_count, uintptr_t offset, uintptr_t granule, CfiRow* row);
}  // namespace

CfiReadSection::CfiReadSection() : state_(&State()) {
  state_->readers.fetch_add(1, std::memory_order_seq_cst);
  snapshot_ = state_->snapshot.load(std::memory_order_seq_cst);
}

CfiReadSection::~CfiReadSection() { state_->readers.fetch_sub(1, std::memory_order_seq_cst); }

void CfiWantTables() { State().tables_wanted.store(true, std::memory_order_relaxed); }

CfiFound CfiLookup(const CfiSnapshot* snap, uintptr_t pc, CfiRow* row) {
  if (snap == nullptr) {
    if (!State().tables_wanted.load(std::memory_order_relaxed)) CfiWantTables();
    return CfiFound::kNoObject;
  }
  if (snap->count == 0) return CfiFound::kNoObject;
  std::atomic<uint64_t>& cached = g_row_cache[CacheSlot(pc)];
  if (UnpackCached(cached.load(std::memory_order_relaxed), pc, snap->unloads, row)) {
    return CfiFound::kRow;
  }
  const CfiFound found = SearchTables(snap, pc, row);
  if (found == CfiFound::kRow) {
    if (const uint64_t word = PackCached(pc, *row, snap->unloads); word != 0) {
      cached.store(word, std::memory_order_relaxed);
    }
  }
  return found;
}

namespace {

void CountMiss(uint32_t id) {
  CfiSharedState& state = State();
  state.misses.fetch_add(1, std::memory_order_relaxed);
  if (id < kCfiMaxObjects) state.object_misses[id].fetch_add(1, std::memory_order_relaxed);
}

CfiFound SearchTables(const CfiSnapshot* snap, uintptr_t pc, CfiRow* row) {
  // The last object starting at or below pc.
  uint32_t lo = 0, hi = snap->count;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (snap->objects[mid].lo <= pc) lo = mid; else hi = mid;
  }
  const CfiObject& o = snap->objects[lo];
  if (pc < o.lo || pc >= o.hi) {
    State().no_object.fetch_add(1, std::memory_order_relaxed);
    return CfiFound::kNoObject;
  }
  if (o.rows == nullptr && o.parts != nullptr) {
    const uintptr_t part = (pc - o.lo) >> kCfiPartShift;
    if (part >= o.part_count) return CfiFound::kNoObject;
    CfiPart& slot = o.parts[part];
    const CfiPartRows* block = slot.rows.load(std::memory_order_acquire);
    if (block == nullptr) {
      if (slot.wanted.load(std::memory_order_relaxed) == 0) {
        slot.wanted.store(1, std::memory_order_relaxed);
        if (o.id < kCfiMaxObjects) State().wanted[o.id].store(1, std::memory_order_relaxed);
        SharedWants* shared = g_shared_wants.load(std::memory_order_relaxed);
        if (shared != nullptr && !g_shared_wants_own.load(std::memory_order_relaxed) &&
            o.id < kCfiMaxObjects) {
          const uint32_t at = shared->next.fetch_add(1, std::memory_order_relaxed);
          if (at < kSharedParts) {
            shared->parts[at].store((o.id + 1) << 20 | static_cast<uint32_t>(part),
                                    std::memory_order_release);
          }
        }
      }
      CountMiss(o.id);
      return CfiFound::kNotBuilt;
    }
    const uintptr_t offset = pc - o.base;
    const uintptr_t part_offset = (o.lo - o.base) + (part << kCfiPartShift);
    return SearchRows(block->rows(), block->row_count, block->index(), block->index_count,
                      offset, (offset - part_offset) >> kCfiIndexShift, row);
  }
  if (o.rows == nullptr) {
    if (o.id < kCfiMaxObjects) {
      State().wanted[o.id].store(1, std::memory_order_relaxed);
      if (SharedWants* shared = g_shared_wants.load(std::memory_order_relaxed)) {
        shared->wanted[o.id].store(1, std::memory_order_relaxed);
      }
    }
    CountMiss(o.id);
    return CfiFound::kNotBuilt;
  }
  const uintptr_t offset = pc - o.base;
  return SearchRows(o.rows, o.row_count, o.index, o.index_count, offset, offset >> kCfiIndexShift,
                    row);
}

CfiFound SearchRows(const CfiRow* rows, uint32_t row_count, const uint32_t* index,
                    uint32_t index_count, uintptr_t offset, uintptr_t granule, CfiRow* row) {
  if (offset > UINT32_MAX || row_count == 0 || rows[0].pc_offset > offset) {
    *row = CfiRow{0, 0, 0, kCfiNone, 0};
    return CfiFound::kRow;
  }
  if (granule >= index_count) {
    *row = rows[row_count - 1];  // past the last FDE: its end row (no FDE)
    return CfiFound::kRow;
  }
  // The rows covering this granule: from the one at its start up to the one
  // at the next granule's start.
  uint32_t a = index[granule];
  uint32_t b = granule + 1 < index_count ? index[granule + 1] + 1 : row_count;
  if (b > row_count || a >= b) {
    *row = CfiRow{0, 0, 0, kCfiNone, 0};  // a damaged index: no row rather than a wrong one
    return CfiFound::kRow;
  }
  while (b - a > 1) {
    const uint32_t mid = a + (b - a) / 2;
    if (rows[mid].pc_offset <= offset) a = mid; else b = mid;
  }
  *row = rows[a];
  return CfiFound::kRow;
}

}  // namespace

}  // namespace dlprof
