#include "backends/cfi_tables.h"

#include <link.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "backends/cfi_host.h"
#include "backends/cfi_region.h"
#include "backends/cfi_shared.h"
#include "backends/own_memory.h"

namespace dlprof {

using cfi_shared::CfiSharedState;
using cfi_shared::g_shared_wants;
using cfi_shared::g_shared_wants_own;
using cfi_shared::kSharedParts;
using cfi_shared::SharedWants;
using cfi_shared::State;

namespace {

struct Mapping {
  const void* at;
  size_t size;
};

std::atomic<bool> g_decode_all{false};   // CfiDecodeAllLoaded
std::atomic<pthread_t> g_maintainer{0};  // the thread that runs CfiMaintain (CfiDecodeNow)
uint32_t g_shared_read = 0;              // the parent's cursor in SharedWants::parts

// Read by CfiTableStats from any thread.
std::atomic<int> g_stat_objects{0}, g_stat_decoded{0};
std::atomic<uint64_t> g_stat_rows{0}, g_stat_bytes{0}, g_stat_decode_ns{0};
std::atomic<uint64_t> g_stat_parts{0}, g_stat_parts_decoded{0};
std::atomic<long> g_stat_skipped{0};

// More rows than this (96 MiB) for one object: walked by frame pointer.
constexpr size_t kMaxRowsPerObject = size_t{8} << 20;

// Objects with more code than this are decoded by parts.
constexpr uintptr_t kPartedAbove = uintptr_t{4} << kCfiPartShift;
constexpr uint32_t kPartGranules = 1u << (kCfiPartShift - kCfiIndexShift);

// How the loaded objects are walked in this process (CfiSetObjectIterator).
std::atomic<CfiObjectIterator> g_iterate{nullptr};

// The default host: this process.
class OwnHost final : public CfiHost {
 public:
  constexpr OwnHost() = default;
  bool IterateObjects(int (*callback)(dl_phdr_info*, size_t, void*), void* data) override {
    if (CfiObjectIterator f = g_iterate.load(std::memory_order_acquire)) return f(callback, data);
    dl_iterate_phdr(callback, data);
    return true;
  }
  size_t Copy(void* to, uintptr_t from, size_t n) override { return CopyOwnMemory(to, from, n); }
  void* Map(size_t bytes, bool populate) override {
    // MAP_POPULATE: one call maps every page, not one fault a page (each
    // fault costs a trap to the hypervisor on a VM).
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  void Seal(void* at, size_t bytes) override { mprotect(at, bytes, PROT_READ); }
  void Unmap(void* at, size_t bytes) override { munmap(at, bytes); }
  bool Quiet(int64_t readers) override { return readers == 0; }
  bool Outside() const override { return false; }
};
OwnHost g_own_host;
std::atomic<CfiHost*> g_host{&g_own_host};
CfiHost& Host() { return *g_host.load(std::memory_order_acquire); }
size_t HostCopy(void* to, uintptr_t from, size_t n) { return Host().Copy(to, from, n); }

// A copy of an object's unwind sections whose 64 KiB chunks are copied in
// when a part's decode first reads them (CopyFiller): the reservation costs
// address space, not memory. Kept with the object, so the search table and
// CIEs are copied once.
class SparseCopy : public CopyFiller {
 public:
  static constexpr int kChunkShift = 16;
  SparseCopy(uintptr_t lo, uintptr_t hi) : lo_(lo), size_(hi - lo) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    bytes_ = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
    filled_.assign(((size_ - 1) >> kChunkShift) + 1, 0);
  }
  ~SparseCopy() override {
    if (bytes_ != nullptr) munmap(bytes_, size_);
  }
  SparseCopy(const SparseCopy&) = delete;
  SparseCopy& operator=(const SparseCopy&) = delete;
  bool ok() const { return bytes_ != nullptr; }
  const unsigned char* bytes() const { return bytes_; }

  bool Ensure(uintptr_t addr, size_t n, uintptr_t* ready_lo, uintptr_t* ready_hi) override {
    if (bytes_ == nullptr || addr < lo_ || n == 0 || addr - lo_ > size_ || n > size_ - (addr - lo_)) {
      return false;
    }
    const size_t first = (addr - lo_) >> kChunkShift, last = (addr - lo_ + n - 1) >> kChunkShift;
    for (size_t c = first; c <= last; ++c) {
      if (filled_[c]) continue;
      const size_t off = c << kChunkShift;
      const size_t len = std::min(size_ - off, size_t{1} << kChunkShift);
      if (HostCopy(bytes_ + off, lo_ + off, len) != len) return false;
      filled_[c] = 1;
    }
    *ready_lo = lo_ + (first << kChunkShift);
    *ready_hi = lo_ + std::min(size_, (last + 1) << kChunkShift);
    return true;
  }

 private:
  uintptr_t lo_;
  size_t size_;
  unsigned char* bytes_ = nullptr;
  std::vector<uint8_t> filled_;
};

// What the collector knows of one loaded object. Only the collector thread
// touches these.
// The object's first executable segment as /proc/self/maps shows it (page
// bounds and file offset): what names its samples once it is unloaded.
struct ExecMapping {
  uintptr_t lo = 0, hi = 0, offset = 0;
};

struct Record {
  std::string name;
  uintptr_t bias = 0;
  uintptr_t lo = 0, hi = 0;
  EhFrameSource source;
  ExecMapping mapping;
  const CfiRow* rows = nullptr;
  const uint32_t* index = nullptr;  // in the same mapping, after the rows
  uint32_t row_count = 0;
  uint32_t index_count = 0;
  size_t mapped = 0;
  bool present = true;
  bool tried = false;  // decoded, or failed: not tried again
  bool adopted = false;  // rows and parts from the inherited snapshot: not ours to unmap
  // Decoded by parts: their slots (mmap'd, parts_mapped bytes), each part's
  // rows (own mappings), which were tried, and the copy they read.
  CfiPart* parts = nullptr;
  uint32_t part_count = 0;
  size_t parts_mapped = 0;
  std::vector<Mapping> part_blocks;  // chunks the parts' rows are carved from
  uint8_t* part_arena_next = nullptr;  // free space in the last chunk
  size_t part_arena_left = 0;
  std::vector<uint8_t> part_tried;
  std::unique_ptr<SparseCopy> copy;
  // What it adds to the stats (taken off when it is unloaded).
  uint64_t stat_rows = 0, stat_bytes = 0, stat_parts_decoded = 0;
  bool stat_decoded = false;
};


struct Tables {
  std::vector<Record> records;  // index = id; an unloaded object's id is reused
  uint64_t adds = ~uint64_t{0}, subs = ~uint64_t{0};
  std::vector<Mapping> retired;  // unmapped once no handler reads
  // A fork child's helper: the snapshot its parent's helper published, whose
  // rows it adopts for the objects still loaded where they were
  // (Adopt); never unmapped by this process.
  const CfiSnapshot* inherited = nullptr;
  int64_t recheck_parts_until_ns = 0;  // after adopting: wanted parts whose flags went to old ids
  std::vector<Mapping> unpublished;  // rows of unloaded objects the current snapshot still names
  // A part's rows while they are decoded, kept from part to part: a vector
  // of its own was a mapping made, populated and unmapped for each part
  // (an unmap is a TLB shootdown on every core the program runs on).
  CfiRowVector part_rows;
  Mapping current{nullptr, 0};
  uint32_t unloads = 0;
};
Tables* g_tables = nullptr;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

size_t PageRound(size_t n) {
  const size_t page = 4096;
  return (n + page - 1) / page * page;
}

// Read-only pages holding a copy of `bytes` bytes; nullptr if none.
const void* MapCopy(const void* data, size_t bytes, size_t* mapped) {
  *mapped = PageRound(bytes == 0 ? 1 : bytes);
  void* p = Host().Map(*mapped, /*populate=*/false);
  if (p == nullptr) return nullptr;
  if (bytes != 0) std::memcpy(p, data, bytes);
  Host().Seal(p, *mapped);
  return p;
}

struct Scanned {
  std::string name;
  uintptr_t bias, lo, hi;
  EhFrameSource source;
  ExecMapping mapping;
};

bool IterateObjects(int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  return Host().IterateObjects(callback, data);
}

bool Describe(const dl_phdr_info* info, Scanned* out) {
  LoadedEhFrame found;
  if (!FindLoadedEhFrame(info, &found)) return false;
  out->name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  out->bias = info->dlpi_addr;
  out->lo = found.text_lo;
  out->hi = found.text_hi;
  out->source = found.source;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0) continue;
    const uintptr_t page = 4095;
    out->mapping.lo = (info->dlpi_addr + ph.p_vaddr) & ~page;
    out->mapping.hi = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz + page) & ~page;
    out->mapping.offset = ph.p_offset & ~page;
    break;
  }
  return true;
}

bool Counters(uint64_t* adds, uint64_t* subs) {
  struct Out {
    uint64_t adds = 0, subs = 0;
    bool ok = false;
  } out;
  IterateObjects(
      [](dl_phdr_info* info, size_t size, void* data) {
        auto* o = static_cast<Out*>(data);
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          o->adds = info->dlpi_adds;
          o->subs = info->dlpi_subs;
          o->ok = true;
        }
        return 1;  // the counters are the same in every entry
      },
      &out);
  *adds = out.adds;
  *subs = out.subs;
  return out.ok;
}

// False when the loader was busy.
// No exception may leave a dl_iterate_phdr callback (core/proc_maps.cc,
// CollectBuildIds, says why): out of memory, the walk stops and the
// bad_alloc is raised again here, outside the loader (CfiMaintain takes it).
bool ScanObjects(std::vector<Scanned>* out) {
  struct Scan {
    std::vector<Scanned>* out;
    bool out_of_memory = false;
  } scan{out};
  const bool walked = IterateObjects(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* scan = static_cast<Scan*>(data);
        try {
          Scanned s;
          if (Describe(info, &s)) scan->out->push_back(std::move(s));
          return 0;
        } catch (const std::bad_alloc&) {
          scan->out_of_memory = true;
          return 1;
        }
      },
      &scan);
  if (scan.out_of_memory) throw std::bad_alloc();
  return walked;
}

enum class Presence { kLoaded, kGone, kLoaderBusy };

// Whether the object that `r` describes is still loaded where it was.
// Nothing unloaded since the last scan (the loader's count of removals is
// the same), which found `r`, answers it from the first object; else all are
// walked. (The walk to find it, for each part decoded, was ~10% of a torch
// process's collector CPU.) Called by the maintainer, which scans.
Presence StillLoaded(const Record& r) {
  uint64_t adds = 0, subs = 0;
  if (r.present && g_tables != nullptr && g_tables->subs != ~uint64_t{0} &&
      Counters(&adds, &subs) && subs == g_tables->subs) {
    return Presence::kLoaded;
  }
  struct Find {
    const Record* r;
    bool found = false;
  } f{&r};
  const bool walked = IterateObjects(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* f = static_cast<Find*>(data);
        const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (info->dlpi_addr == f->r->bias && f->r->name == name) f->found = true;
        return f->found ? 1 : 0;
      },
      &f);
  if (!walked) return Presence::kLoaderBusy;
  return f.found ? Presence::kLoaded : Presence::kGone;
}

// Copies [lo, hi) of this process's memory (backends/own_memory.h): an
// object unloaded meanwhile (a dlclose on another thread) makes the copy
// fail instead of the collector fault. (Pinning the object with
// dlopen(RTLD_NOLOAD) instead was tried and is wrong: during exit, glibc's
// _dl_fini clears an object's "initialized" mark before its destructors, and
// a dlopen then runs its constructors again: libdlprof started a second
// session in a process that was exiting.)
bool CopyObjectMemory(uintptr_t lo, uintptr_t hi, ByteVector* out) {
  out->resize(hi - lo);
  return HostCopy(out->data(), lo, out->size()) == out->size();
}

// One object's rows, decoded (Decode) and then put in its record under the
// commit lock (Apply).
struct Decoded {
  const CfiRow* rows = nullptr;
  const uint32_t* index = nullptr;
  uint32_t row_count = 0, index_count = 0;
  size_t mapped = 0;
  bool loader_busy = false;  // not tried: at the next tick
};

// The granule index: for each granule from `first_offset` on, the last row
// starting at or before its first byte.
void FillIndex(const CfiRowVector& rows, uint64_t first_offset, uint32_t granules,
               uint32_t* index) {
  uint32_t row = 0;
  for (uint32_t g = 0; g < granules; ++g) {
    const uint64_t first_byte = first_offset + (static_cast<uint64_t>(g) << kCfiIndexShift);
    while (row + 1 < rows.size() && rows[row + 1].pc_offset <= first_byte) ++row;
    index[g] = row;
  }
}

// Decodes one object's rows from a copy of its unwind information. Touches
// nothing but its result: it takes the time, and a fork meanwhile must not
// find the tables half changed.
Decoded Decode(const Record& record) {
  Decoded out;
  const Record* r = &record;
  const Presence presence = StillLoaded(*r);
  if (presence == Presence::kLoaderBusy) {
    out.loader_busy = true;
    return out;
  }
  if (presence == Presence::kGone) return out;
  const int64_t start = NowNs();
  // From the header, or from .eh_frame when it comes first (gold puts it
  // before the header; GNU ld and lld after), to the end of its run of
  // segments: the text before them is not read.
  EhFrameSource source = r->source;
  // Without a header, .eh_frame's place is known (from the file).
  uintptr_t from = source.eh_frame_hdr != 0 ? source.eh_frame_hdr : source.eh_frame;
  if (source.eh_frame_hdr != 0) {
    // The header's first fields, read from a copy too (a dlclose meanwhile).
    EhFrameSource head = source;
    head.readable_lo = source.eh_frame_hdr & ~uintptr_t{7};
    head.readable_hi = std::min(source.readable_hi, head.readable_lo + 64);
    ByteVector bytes;
    if (!CopyObjectMemory(head.readable_lo, head.readable_hi, &bytes)) return out;
    head.copy = bytes.data();
    const uintptr_t frame = EhFrameStart(head);
    if (frame >= source.readable_lo && frame < from) from = frame;
  }
  source.readable_lo = std::max(source.readable_lo, from & ~uintptr_t{7});
  ByteVector copy;
  if (!CopyObjectMemory(source.readable_lo, source.readable_hi, &copy)) return out;
  source.copy = copy.data();
  CfiRowVector rows;
  std::string error;
  long skipped = 0;
  if (DecodeEhFrame(source, &rows, &error, &skipped) && !rows.empty() &&
      rows.size() <= kMaxRowsPerObject) {
    // The granule index: for each granule, the last row starting at or
    // before its first byte.
    // Rows and index are written straight into their read-only pages (a
    // temporary image copied into them was one more copy and one more set
    // of page faults of the whole table).
    const uint32_t granules = (rows.back().pc_offset >> kCfiIndexShift) + 1;
    const size_t row_bytes = rows.size() * sizeof(CfiRow);
    const size_t mapped = PageRound(row_bytes + granules * sizeof(uint32_t));
    void* pages = Host().Map(mapped, /*populate=*/true);
    if (pages != nullptr) {
      std::memcpy(pages, rows.data(), row_bytes);
      FillIndex(rows, 0, granules,
                reinterpret_cast<uint32_t*>(static_cast<unsigned char*>(pages) + row_bytes));
      Host().Seal(pages, mapped);
      out.rows = static_cast<const CfiRow*>(pages);
      out.index = reinterpret_cast<const uint32_t*>(static_cast<const unsigned char*>(pages) +
                                                    rows.size() * sizeof(CfiRow));
      out.row_count = static_cast<uint32_t>(rows.size());
      out.index_count = granules;
      out.mapped = mapped;
    }
  }
  g_stat_skipped.fetch_add(skipped, std::memory_order_relaxed);
  g_stat_decode_ns.fetch_add(static_cast<uint64_t>(NowNs() - start), std::memory_order_relaxed);
  return out;
}

// Decode, where no memory (mmap refused under the program's RLIMIT_AS)
// leaves the object without rows: its frames are walked by frame pointer,
// the program runs on.
Decoded DecodeOrNothing(const Record& r) {
  try {
    return Decode(r);
  } catch (const std::bad_alloc&) {
    return Decoded{};
  }
}

void CountRows(Record* r, uint64_t rows, uint64_t bytes) {
  if (!r->stat_decoded) {
    r->stat_decoded = true;
    g_stat_decoded.fetch_add(1, std::memory_order_relaxed);
  }
  r->stat_rows += rows;
  r->stat_bytes += bytes;
  g_stat_rows.fetch_add(rows, std::memory_order_relaxed);
  g_stat_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

// Takes an unloaded (or re-decoded) object's share off the stats.
void UncountRows(Record* r) {
  if (r->stat_decoded) g_stat_decoded.fetch_sub(1, std::memory_order_relaxed);
  g_stat_rows.fetch_sub(r->stat_rows, std::memory_order_relaxed);
  g_stat_bytes.fetch_sub(r->stat_bytes, std::memory_order_relaxed);
  g_stat_parts_decoded.fetch_sub(r->stat_parts_decoded, std::memory_order_relaxed);
  if (r->parts != nullptr) g_stat_parts.fetch_sub(r->part_count, std::memory_order_relaxed);
  r->stat_decoded = false;
  r->stat_rows = r->stat_bytes = r->stat_parts_decoded = 0;
}

void Apply(const Decoded& d, Record* r) {
  r->tried = true;
  if (d.rows == nullptr) return;
  r->rows = d.rows;
  r->index = d.index;
  r->row_count = d.row_count;
  r->index_count = d.index_count;
  r->mapped = d.mapped;
  CountRows(r, d.row_count, d.mapped);
}

// One part's rows (DecodeEhFrameRange), in read-only pages of their own.
// The collector changes the tables under this lock, and fork() takes it
// (pthread_atfork): a child never inherits them half changed (a records
// vector mid-reallocation). It is held for the bookkeeping only, never
// while decoding or calling into the loader.
pthread_mutex_t g_commit_mu = PTHREAD_MUTEX_INITIALIZER;

class CommitLock {
 public:
  CommitLock() { pthread_mutex_lock(&g_commit_mu); }
  ~CommitLock() { pthread_mutex_unlock(&g_commit_mu); }
  CommitLock(const CommitLock&) = delete;
  CommitLock& operator=(const CommitLock&) = delete;
};

// Room for a part's rows, carved from chunks of the record's own (256 KiB,
// or one block's size, whichever is more). A mapping per part, populated and
// then made read-only, was a tenth of the main process's collector time in
// mmap and mprotect (perf record of a torch run). The chunks are written
// only before a part's pointer is published (release) and only read after;
// they go with the record's other mappings when it is unloaded. The record
// changes under the commit lock: a fork child never inherits it half
// changed.
void* CarvePartBlock(Record* r, size_t bytes) {
  constexpr size_t kChunk = 256 << 10;
  void* fresh = nullptr;
  size_t size = 0;
  if (r->part_arena_left < bytes) {
    size = std::max(kChunk, PageRound(bytes));
    fresh = Host().Map(size, /*populate=*/false);
    if (fresh == nullptr) return nullptr;
  }
  CommitLock lock;
  if (fresh != nullptr) {
    r->part_blocks.push_back(Mapping{fresh, size});
    r->part_arena_next = static_cast<uint8_t*>(fresh);
    r->part_arena_left = size;
  }
  void* at = r->part_arena_next;
  r->part_arena_next += bytes;
  r->part_arena_left -= bytes;
  return at;
}

struct PartDecoded {
  const CfiPartRows* block = nullptr;
  size_t mapped = 0;
  bool whole = false;  // the object's header cannot be searched: decode it whole
};

// Decodes part `part` of a parted object from its sparse copy. The caller
// has checked that the object is still loaded. Touches the record's copy
// only.
PartDecoded DecodePart(Record* r, uint32_t part) {
  PartDecoded out;
  const int64_t start = NowNs();
  if (r->copy == nullptr) {
    auto copy = std::make_unique<SparseCopy>(r->source.readable_lo, r->source.readable_hi);
    if (!copy->ok()) return out;
    r->copy = std::move(copy);
  }
  EhFrameSource source = r->source;
  source.copy = r->copy->bytes();
  source.filler = r->copy.get();
  const uintptr_t pc_lo = r->lo + (static_cast<uintptr_t>(part) << kCfiPartShift);
  const uintptr_t pc_hi = std::min(r->hi, pc_lo + (uintptr_t{1} << kCfiPartShift));
  CfiRowVector& rows = g_tables->part_rows;
  rows.clear();
  std::string error;
  long skipped = 0;
  if (pc_lo < source.base || !DecodeEhFrameRange(source, pc_lo, pc_hi, &rows, &error, &skipped)) {
    out.whole = true;
    return out;
  }
  const uintptr_t part_offset = pc_lo - source.base;
  const size_t row_bytes = rows.size() * sizeof(CfiRow);
  const size_t bytes =
      (sizeof(CfiPartRows) + row_bytes + kPartGranules * sizeof(uint32_t) + 15) & ~size_t{15};
  if (void* at = CarvePartBlock(r, bytes)) {
    auto* head = static_cast<CfiPartRows*>(at);
    head->row_count = static_cast<uint32_t>(rows.size());
    head->index_count = kPartGranules;
    if (row_bytes != 0) std::memcpy(const_cast<CfiRow*>(head->rows()), rows.data(), row_bytes);
    FillIndex(rows, part_offset, kPartGranules, const_cast<uint32_t*>(head->index()));
    out.block = head;
    out.mapped = bytes;
  }
  g_stat_skipped.fetch_add(skipped, std::memory_order_relaxed);
  g_stat_decode_ns.fetch_add(static_cast<uint64_t>(NowNs() - start), std::memory_order_relaxed);
  return out;
}


// What the collector reads of the tables while it holds its own lock (the
// unwinder's state, the mappings of unloaded objects): under a lock of its
// own, taken last and never held while taking another. The commit lock
// would not do: fork() takes it before the collector's (its handler is
// registered later, and pthread_atfork runs them in reverse), so the
// collector waiting for it under its own lock deadlocked with a fork
// (Faults.StressForkExecDlopenMallocAt1000HzNeitherHangsNorCrashes).
pthread_mutex_t g_leaf_mu = PTHREAD_MUTEX_INITIALIZER;
std::vector<std::string>* g_names = nullptr;              // file names by id; "" once gone
std::vector<CfiUnloadedObject>* g_unloaded = nullptr;  // since CfiTakeUnloadedObjects; the last 256

class LeafLock {
 public:
  LeafLock() { pthread_mutex_lock(&g_leaf_mu); }
  ~LeafLock() { pthread_mutex_unlock(&g_leaf_mu); }
  LeafLock(const LeafLock&) = delete;
  LeafLock& operator=(const LeafLock&) = delete;
};

void NameObject(size_t id, const std::string& path) {
  if (id >= static_cast<size_t>(kCfiMaxObjects)) return;
  const size_t slash = path.rfind('/');
  LeafLock lock;
  if (g_names == nullptr) g_names = new std::vector<std::string>();
  if (g_names->size() <= id) g_names->resize(id + 1);
  (*g_names)[id] = slash == std::string::npos ? path : path.substr(slash + 1);
}

void NoteUnloaded(size_t id, const Record& r) {
  LeafLock lock;
  if (g_names != nullptr && id < g_names->size()) (*g_names)[id].clear();
  if (r.name.empty() || r.mapping.hi <= r.mapping.lo) return;
  if (g_unloaded == nullptr) g_unloaded = new std::vector<CfiUnloadedObject>();
  if (g_unloaded->size() >= 256) g_unloaded->erase(g_unloaded->begin());
  g_unloaded->push_back({r.name, r.mapping.lo, r.mapping.hi, r.mapping.offset});
}

void RegisterForkHandlersOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { pthread_mutex_lock(&g_commit_mu); },
                   [] { pthread_mutex_unlock(&g_commit_mu); },
                   [] {
                     pthread_mutex_unlock(&g_commit_mu);
                     // The child's own work from here: it inherits the
                     // rows, not the time its parent spent decoding them.
                     g_shared_wants_own.store(false, std::memory_order_relaxed);
                     g_stat_decode_ns.store(0, std::memory_order_relaxed);
                     CfiSharedState& state = State();
                     state.misses.store(0, std::memory_order_relaxed);
                     for (auto& m : state.object_misses) m.store(0, std::memory_order_relaxed);
                   });
  });
}

// False when the snapshot could not be made (no memory): the old one stays.
bool Publish(Tables* t) {
  std::vector<CfiObject> objects;
  for (size_t id = 0; id < t->records.size(); ++id) {
    const Record& r = t->records[id];
    if (!r.present) continue;
    objects.push_back(CfiObject{r.lo, r.hi, r.source.base, r.rows, r.index, r.row_count,
                                r.index_count, static_cast<uint32_t>(id), r.parts,
                                r.part_count});
  }
  std::sort(objects.begin(), objects.end(),
            [](const CfiObject& a, const CfiObject& b) { return a.lo < b.lo; });
  std::vector<CfiObject> kept;  // overlaps cannot be searched: the first one wins
  for (const CfiObject& o : objects) {
    if (kept.empty() || o.lo >= kept.back().hi) kept.push_back(o);
  }
  const size_t bytes = offsetof(CfiSnapshot, objects) + std::max<size_t>(kept.size(), 1) *
                                                            sizeof(CfiObject);
  std::vector<unsigned char> image(bytes, 0);
  auto* snap = reinterpret_cast<CfiSnapshot*>(image.data());
  snap->count = static_cast<uint32_t>(kept.size());
  snap->unloads = t->unloads;
  std::copy(kept.begin(), kept.end(), snap->objects);
  size_t mapped = 0;
  const void* copy = MapCopy(image.data(), bytes, &mapped);
  if (copy == nullptr) return false;
  State().snapshot.store(static_cast<const CfiSnapshot*>(copy), std::memory_order_seq_cst);
  if (t->current.at != nullptr) t->retired.push_back(t->current);
  t->current = Mapping{copy, mapped};
  return true;
}

}  // namespace

void CfiSetObjectIterator(CfiObjectIterator iterate) {
  g_iterate.store(iterate, std::memory_order_release);
}

void CfiSetHost(CfiHost* host) { g_host.store(host, std::memory_order_release); }

void CfiDecodeAllLoaded() {
  g_decode_all.store(true, std::memory_order_relaxed);
  CfiWantTables();
}

namespace {

// Slots for a big object's parts, when it has a header to search.
void MakeParts(Record* r) {
  if (r->source.eh_frame_hdr == 0 || r->hi - r->lo <= kPartedAbove) return;
  const uint32_t count = static_cast<uint32_t>(((r->hi - r->lo - 1) >> kCfiPartShift) + 1);
  const size_t mapped = PageRound(count * sizeof(CfiPart));
  void* p = Host().Map(mapped, /*populate=*/false);
  if (p == nullptr) return;  // decoded whole, then
  r->parts = static_cast<CfiPart*>(p);  // zero-filled: no rows, not wanted
  r->part_count = count;
  r->parts_mapped = mapped;
  r->part_tried.assign(count, 0);
  g_stat_parts.fetch_add(count, std::memory_order_relaxed);
}

// Decodes the whole object and puts its rows in the record; false when the
// loader was busy (not tried: at the next tick).
bool DecodeWhole(Record* r) {
  const Decoded d = DecodeOrNothing(*r);
  if (d.loader_busy) return false;
  CommitLock lock;
  Apply(d, r);
  return true;
}

// Publishes the records (the commit lock held); the mappings the old
// snapshot named are unmapped once no handler reads.
void PublishAndRetire(Tables* t) {
  if (Publish(t)) {
    t->retired.insert(t->retired.end(), t->unpublished.begin(), t->unpublished.end());
    t->unpublished.clear();
  }
}

// Decodes `part` of a parted object if it has no rows and was not tried;
// true if it has rows now. The whole object instead when its header cannot
// be searched (then *whole_decoded: a new snapshot is needed).
bool DecodeOnePart(Record* r, uint32_t part, bool* whole_decoded) {
  if (part >= r->part_count || r->part_tried[part]) return false;
  if (r->parts[part].rows.load(std::memory_order_relaxed) != nullptr) return false;
  PartDecoded d;
  try {
    d = DecodePart(r, part);
  } catch (const std::bad_alloc&) {
    d = PartDecoded{};
  }
  if (d.whole) {
    *whole_decoded = DecodeWhole(r);
    return r->rows != nullptr;
  }
  CommitLock lock;
  r->part_tried[part] = 1;
  if (d.block == nullptr) return false;
  r->parts[part].rows.store(d.block, std::memory_order_release);
  r->stat_parts_decoded += 1;
  g_stat_parts_decoded.fetch_add(1, std::memory_order_relaxed);
  CountRows(r, d.block->row_count, d.mapped);
  return true;
}

// The parts of record `id` that walks asked for. True when a new snapshot
// is needed (the object was decoded whole after all).
bool DecodeWantedParts(Record* r, size_t id) {
  const Presence presence = StillLoaded(*r);
  if (presence == Presence::kLoaderBusy) {
    if (id < static_cast<size_t>(kCfiMaxObjects)) State().wanted[id].store(1, std::memory_order_relaxed);
    return false;
  }
  if (presence == Presence::kGone) return false;  // the next scan drops it
  bool whole = false;
  for (uint32_t part = 0; part < r->part_count && !whole; ++part) {
    // Read before cleared, as the objects' flags are: a fork child's helper
    // looks at every part of every adopted object at each tick for a second
    // (recheck_parts_until_ns), and an exchange of each (thousands for
    // libtorch) was two thirds of its table upkeep's own time.
    std::atomic<uint8_t>& wanted = r->parts[part].wanted;
    if (wanted.load(std::memory_order_relaxed) == 0 || wanted.exchange(0, std::memory_order_relaxed) == 0) {
      continue;
    }
    DecodeOnePart(r, part, &whole);
  }
  return whole;
}

// A fork child's collector process: the rows its parent's helper had built
// for this object, when the snapshot the child inherited (with the arena's
// copy) has it at the same place. The rows are in the child's copy of the
// region, so they are its own; they were built from the same bytes.
bool Adopt(Tables* t, Record* r) {
  const CfiSnapshot* s = t->inherited;
  if (s == nullptr) return false;
  for (uint32_t i = 0; i < s->count; ++i) {
    const CfiObject& o = s->objects[i];
    if (o.lo != r->lo || o.hi != r->hi || o.base != r->source.base) continue;
    if (o.rows == nullptr && o.parts == nullptr) return false;
    r->adopted = true;
    if (o.rows != nullptr) {
      r->rows = o.rows;
      r->index = o.index;
      r->row_count = o.row_count;
      r->index_count = o.index_count;
      r->tried = true;
      return true;
    }
    r->parts = o.parts;
    r->part_count = o.part_count;
    r->part_tried.assign(o.part_count, 0);
    for (uint32_t p = 0; p < o.part_count; ++p) {
      if (o.parts[p].rows.load(std::memory_order_acquire) != nullptr) r->part_tried[p] = 1;
    }
    g_stat_parts.fetch_add(o.part_count, std::memory_order_relaxed);
    // The handler's asks for parts went to the parent's object ids until
    // this helper's first snapshot: its parts' own flags are looked at for
    // a while whatever the object's flag says.
    t->recheck_parts_until_ns = NowNs() + 1000000000;
    return true;
  }
  return false;
}

// The parts this process's fork children asked for (SharedWants::parts).
void TakeChildrensParts(Tables* t, SharedWants* shared) {
  const uint32_t end = std::min(shared->next.load(std::memory_order_acquire), kSharedParts);
  while (g_shared_read < end) {
    const uint32_t v = shared->parts[g_shared_read].load(std::memory_order_acquire);
    if (v == 0) break;  // taken but not written yet: at the next tick
    ++g_shared_read;
    const uint32_t id = (v >> 20) - 1, part = v & 0xfffff;
    if (id >= t->records.size() || id >= static_cast<uint32_t>(kCfiMaxObjects)) continue;
    Record& r = t->records[id];
    if (!r.present || r.parts == nullptr || part >= r.part_count) continue;
    r.parts[part].wanted.store(1, std::memory_order_relaxed);
    State().wanted[id].store(1, std::memory_order_relaxed);
  }
}

void MaintainOnce() {
  if (g_tables == nullptr) {
    auto* fresh = new Tables;
    // Outside, a snapshot already there is the parent's (a fork child).
    if (Host().Outside()) fresh->inherited = State().snapshot.load(std::memory_order_acquire);
    if (fresh->inherited != nullptr) {
      // The counts came with the copy: the child's own from here (the
      // thread's atfork child handler does the same).
      CfiSharedState& state = State();
      state.misses.store(0, std::memory_order_relaxed);
      for (auto& m : state.object_misses) m.store(0, std::memory_order_relaxed);
    }
    CommitLock lock;
    g_tables = fresh;
  }
  Tables* t = g_tables;
  // (Outside, a fork child's helper starts from its parent's rows in the
  // arena's copy instead.)
  if (!Host().Outside() && g_shared_wants.load(std::memory_order_relaxed) == nullptr) {
    void* page = mmap(nullptr, sizeof(SharedWants), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED) {  // zero-filled: no flag set
      g_shared_wants_own.store(true, std::memory_order_relaxed);
      g_shared_wants.store(static_cast<SharedWants*>(page), std::memory_order_release);
    }
  }
  SharedWants* const own_shared = g_shared_wants_own.load(std::memory_order_relaxed)
                                      ? g_shared_wants.load(std::memory_order_relaxed)
                                      : nullptr;
  bool changed = false;
  uint64_t adds = 0, subs = 0;
  if (Counters(&adds, &subs) && (adds != t->adds || subs != t->subs)) {
    std::vector<Scanned> scanned;
    if (!ScanObjects(&scanned)) return;  // the loader busy: at the next tick
    // A fork child whose objects change no longer has its parent's ids.
    if (!g_shared_wants_own.load(std::memory_order_relaxed) && t->adds != ~uint64_t{0}) {
      g_shared_wants.store(nullptr, std::memory_order_relaxed);
    }
    CommitLock lock;
    t->adds = adds;
    t->subs = subs;
    std::vector<bool> seen(t->records.size(), false);
    // The present records by start address: a torch process has ~300
    // objects and rescans at each of its hundreds of dlopens, and a search
    // of all records for each scanned object was most of the time spent in
    // this function.
    std::unordered_multimap<uintptr_t, size_t> by_lo;
    by_lo.reserve(t->records.size());
    for (size_t id = 0; id < t->records.size(); ++id) {
      if (t->records[id].present) by_lo.emplace(t->records[id].lo, id);
    }
    for (Scanned& s : scanned) {
      size_t id = t->records.size();
      for (auto [it, end] = by_lo.equal_range(s.lo); it != end; ++it) {
        const Record& r = t->records[it->second];
        if (r.bias == s.bias && r.hi == s.hi && r.name == s.name) {
          id = it->second;
          break;
        }
      }
      if (id == t->records.size()) {
        // A new object takes the id of one unloaded before (its rows are
        // retired already): ids kept for good ran out after ~1000
        // load/unload cycles, and no object loaded later got rows again.
        // A want flag a handler sets for the old object's pc from an old
        // snapshot asks at most for one early decode of the new one.
        size_t free_id = 0;
        while (free_id < t->records.size() && t->records[free_id].present) ++free_id;
        if (free_id == t->records.size() &&
            t->records.size() >= static_cast<size_t>(kCfiMaxObjects)) {
          continue;
        }
        Record r;
        r.name = std::move(s.name);
        r.bias = s.bias;
        r.lo = s.lo;
        r.hi = s.hi;
        r.source = s.source;
        r.mapping = s.mapping;
        if (!Adopt(t, &r)) MakeParts(&r);
        NameObject(free_id, r.name);
        if (free_id < t->records.size()) {
          t->records[free_id] = std::move(r);
          seen[free_id] = true;
          if (free_id < static_cast<size_t>(kCfiMaxObjects)) {
            State().wanted[free_id].store(0, std::memory_order_relaxed);
            State().object_misses[free_id].store(0, std::memory_order_relaxed);
            if (own_shared != nullptr) {
              own_shared->wanted[free_id].store(0, std::memory_order_relaxed);
            }
          }
        } else {
          t->records.push_back(std::move(r));
          seen.push_back(true);
        }
        changed = true;
      } else {
        seen[id] = true;
      }
    }
    for (size_t id = 0; id < t->records.size(); ++id) {
      Record& r = t->records[id];
      if (!r.present || seen[id]) continue;
      r.present = false;  // unloaded: its rows go once no handler reads them
      ++t->unloads;       // and cached rows of its addresses are stale
      NoteUnloaded(id, r);
      // Unmapped only after a snapshot without it is out: the current one
      // still points at them. (Adopted rows stay: their size is the
      // parent's to know.)
      if (r.rows != nullptr && !r.adopted) t->unpublished.push_back(Mapping{r.rows, r.mapped});
      if (r.parts != nullptr && !r.adopted) {
        t->unpublished.push_back(Mapping{r.parts, r.parts_mapped});
      }
      t->unpublished.insert(t->unpublished.end(), r.part_blocks.begin(), r.part_blocks.end());
      UncountRows(&r);  // the stats are of what is loaded
      r.rows = nullptr;
      r.parts = nullptr;
      r.part_blocks.clear();
      r.part_arena_next = nullptr;
      r.part_arena_left = 0;
      r.copy.reset();
      changed = true;
    }
  }
  if (own_shared != nullptr) TakeChildrensParts(t, own_shared);
  int present = 0;
  const bool decode_all = g_decode_all.load(std::memory_order_relaxed);
  const bool recheck_adopted = t->recheck_parts_until_ns != 0 && NowNs() < t->recheck_parts_until_ns;
  // Only this thread changes the records, so reading them needs no lock.
  for (size_t id = 0; id < t->records.size(); ++id) {
    if (!t->records[id].present) continue;
    ++present;
    if (t->records[id].tried) continue;
    // Read before they are cleared: an exchange of every flag of a torch
    // process's ~300 objects, at every tick, was ~600 atomic writes.
    std::atomic<uint8_t>* want = &State().wanted[id];
    bool wanted = want->load(std::memory_order_relaxed) != 0 &&
                  want->exchange(0, std::memory_order_relaxed) != 0;
    if (recheck_adopted && t->records[id].adopted && t->records[id].parts != nullptr) wanted = true;
    if (own_shared != nullptr && id < static_cast<size_t>(kCfiMaxObjects) &&
        own_shared->wanted[id].load(std::memory_order_relaxed) != 0 &&
        own_shared->wanted[id].exchange(0, std::memory_order_relaxed) != 0) {
      wanted = true;
    }
    if (!wanted && !decode_all) continue;
    if (t->records[id].parts != nullptr && !decode_all) {
      if (DecodeWantedParts(&t->records[id], id)) changed = true;
      continue;
    }
    const Decoded d = DecodeOrNothing(t->records[id]);
    if (d.loader_busy) {
      if (wanted) want->store(1, std::memory_order_relaxed);
      continue;
    }
    CommitLock lock;
    Apply(d, &t->records[id]);
    changed = true;
  }
  g_stat_objects.store(present, std::memory_order_relaxed);
  if (changed) {
    CommitLock lock;
    PublishAndRetire(t);
  }
  if (!t->retired.empty() && Host().Quiet(State().readers.load(std::memory_order_seq_cst))) {
    CommitLock lock;
    for (const Mapping& m : t->retired) Host().Unmap(const_cast<void*>(m.at), m.size);
    t->retired.clear();
  }
}

}  // namespace

bool CfiDecodeNow(uintptr_t pc) {
  Tables* t = g_tables;
  if (t == nullptr || g_maintainer.load(std::memory_order_relaxed) != pthread_self()) return false;
  size_t id = 0;
  while (id < t->records.size() &&
         !(t->records[id].present && pc >= t->records[id].lo && pc < t->records[id].hi)) {
    ++id;
  }
  if (id == t->records.size()) return false;
  Record* r = &t->records[id];
  if (r->rows != nullptr || r->tried) return false;
  bool whole = false, built = false;
  try {
    if (r->parts != nullptr) {
      if (StillLoaded(*r) != Presence::kLoaded) return false;
      built = DecodeOnePart(r, static_cast<uint32_t>((pc - r->lo) >> kCfiPartShift), &whole);
    } else {
      whole = DecodeWhole(r);
      built = r->rows != nullptr;
    }
    if (whole) {
      CommitLock lock;
      PublishAndRetire(t);
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  return built;
}

void CfiMaintain() {
  if (!State().tables_wanted.load(std::memory_order_relaxed)) return;
  g_maintainer.store(pthread_self(), std::memory_order_relaxed);
  RegisterForkHandlersOnce();
  try {
    MaintainOnce();
  } catch (const std::bad_alloc&) {
    // No memory for the bookkeeping (a program near its RLIMIT_AS): try
    // again at the next tick; walks use what is published.
  }
}

std::vector<CfiUnloadedObject> CfiTakeUnloadedObjects() {
  std::vector<CfiUnloadedObject> out;
  LeafLock lock;
  if (g_unloaded != nullptr) out.swap(*g_unloaded);
  return out;
}

CfiStats CfiTableStats() {
  CfiStats s;
  s.objects = g_stat_objects.load(std::memory_order_relaxed);
  s.decoded = g_stat_decoded.load(std::memory_order_relaxed);
  s.rows = g_stat_rows.load(std::memory_order_relaxed);
  s.bytes = g_stat_bytes.load(std::memory_order_relaxed);
  s.decode_ns = g_stat_decode_ns.load(std::memory_order_relaxed);
  s.misses = State().misses.load(std::memory_order_relaxed);
  s.skipped_fdes = g_stat_skipped.load(std::memory_order_relaxed);
  s.parts = g_stat_parts.load(std::memory_order_relaxed);
  s.parts_decoded = g_stat_parts_decoded.load(std::memory_order_relaxed);
  {
    LeafLock lock;
    for (size_t id = 0; g_names != nullptr && id < g_names->size(); ++id) {
      const uint32_t n = State().object_misses[id].load(std::memory_order_relaxed);
      if (n != 0 && !(*g_names)[id].empty()) s.missed_in.emplace_back((*g_names)[id], n);
    }
  }
  std::stable_sort(s.missed_in.begin(), s.missed_in.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (s.missed_in.size() > 8) s.missed_in.resize(8);
  return s;
}

std::string DescribeCfiStats(const CfiStats& s) {
  std::string missed;
  for (const auto& [name, n] : s.missed_in) {
    missed += (missed.empty() ? " (" : ", ") + name + " " + std::to_string(n);
  }
  if (!missed.empty()) missed += ")";
  return std::to_string(s.decoded) + " of " + std::to_string(s.objects) + " objects decoded, " +
         std::to_string(s.rows) + " rows (" + std::to_string(s.bytes >> 10) + " KiB) in " +
         std::to_string(s.decode_ns / 1000000) + " ms; " + std::to_string(s.misses) +
         " frames before their object's rows" + missed + "; " + std::to_string(s.skipped_fdes) +
         " FDEs skipped; " + std::to_string(s.parts_decoded) + " of " + std::to_string(s.parts) +
         " parts decoded";
}

}  // namespace dlprof
