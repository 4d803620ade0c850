// Objects decoded by parts (backends/cfi_tables.h) and walks the handler
// leaves to the collector (backends/cfi_unwinder.h). This program is its own
// collector: it calls CfiMaintain and CfiFinishWalk itself. It never calls
// CfiDecodeAllLoaded, which would decode every object whole.
#include <dlfcn.h>
#include <link.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cfi_tables.h"
#include "backends/cfi_unwinder.h"
#include "backends/eh_frame.h"
#include "backends/unwinder.h"

namespace dlprof {
namespace {

struct Object {
  std::string path;
  LoadedEhFrame frame;
};

// The loaded object whose name contains `part`.
Object FindObject(const char* part) {
  struct Search {
    const char* part;
    Object found;
  } search{part, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr || std::string(info->dlpi_name).find(s->part) == std::string::npos) {
          return 0;
        }
        if (!FindLoadedEhFrame(info, &s->found.frame)) return 0;
        s->found.path = info->dlpi_name;
        return 1;
      },
      &search);
  return search.found;
}

// The row the whole object's rows give for `pc` (the reference).
CfiRow WholeRow(const std::vector<CfiRow>& rows, uintptr_t base, uintptr_t pc) {
  const uint64_t offset = pc - base;
  auto it = std::upper_bound(rows.begin(), rows.end(), offset,
                             [](uint64_t o, const CfiRow& r) { return o < r.pc_offset; });
  if (it == rows.begin()) return CfiRow{0, 0, 0, kCfiNone, 0};
  return *(it - 1);
}

CfiFound Lookup(uintptr_t pc, CfiRow* row) {
  const CfiReadSection section;
  return CfiLookup(section.snapshot(), pc, row);
}

bool SameRule(const CfiRow& a, const CfiRow& b) {
  return a.kind == b.kind && a.cfa_offset == b.cfa_offset && a.fp_offset == b.fp_offset;
}

// Every 61st byte of libc's and libstdc++'s code: the parts' rows say what
// the whole decode says, and only the parts asked for get decoded.
TEST(CfiParts, RowsOfEachPartAreTheWholeObjectsRows) {
  CfiWantTables();
  CfiMaintain();
  for (const char* name : {"libc.so", "libstdc++"}) {
    const Object o = FindObject(name);
    ASSERT_FALSE(o.path.empty()) << name << " is not loaded";
    ASSERT_GT(o.frame.text_hi - o.frame.text_lo, uintptr_t{4} << kCfiPartShift)
        << o.path << " is too small to be decoded by parts";
    CfiRowVector whole_rows;
    std::string error;
    ASSERT_TRUE(DecodeEhFrame(o.frame.source, &whole_rows, &error)) << error;
    const std::vector<CfiRow> whole(whole_rows.begin(), whole_rows.end());
    const CfiStats before = CfiTableStats();
    // Three parts first: exactly those get rows.
    int asked = 0;
    for (uintptr_t pc = o.frame.text_lo + 100; pc < o.frame.text_hi && asked < 3;
         pc += uintptr_t{5} << kCfiPartShift) {
      CfiRow row{};
      if (Lookup(pc, &row) == CfiFound::kNotBuilt) ++asked;
    }
    ASSERT_EQ(asked, 3) << o.path << ": parts had rows before any walk asked for them";
    CfiMaintain();
    EXPECT_EQ(CfiTableStats().parts_decoded - before.parts_decoded, 3u)
        << DescribeCfiStats(CfiTableStats());
    // Then all of it.
    long compared = 0, differ = 0;
    for (int round = 0; round < 2; ++round) {
      for (uintptr_t pc = o.frame.text_lo; pc < o.frame.text_hi; pc += 61) {
        CfiRow row{};
        const CfiFound found = Lookup(pc, &row);
        if (round == 0) continue;  // the first round asks for every part
        ASSERT_EQ(found, CfiFound::kRow) << o.path << " +0x" << std::hex << pc - o.frame.text_lo;
        ++compared;
        const CfiRow want = WholeRow(whole, o.frame.source.base, pc);
        if (!SameRule(row, want)) {
          if (++differ < 5) {
            ADD_FAILURE() << o.path << " +0x" << std::hex << pc - o.frame.text_lo << std::dec
                          << ": part row kind " << int(row.kind) << " cfa " << row.cfa_offset
                          << " fp " << row.fp_offset << ", whole row kind " << int(want.kind)
                          << " cfa " << want.cfa_offset << " fp " << want.fp_offset;
          }
        }
      }
      if (round == 0) CfiMaintain();
    }
    EXPECT_EQ(differ, 0) << "of " << compared << " pcs in " << o.path;
    EXPECT_GT(compared, 10000);
  }
}

// The collector's way: CfiDecodeNow builds a part's rows at once, on the
// thread that maintains the tables, and only once.
TEST(CfiParts, DecodeNowBuildsOnePartOnTheMaintainersThread) {
  CfiWantTables();
  CfiMaintain();
  void* h = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << "no big library to load: " << dlerror();
  CfiMaintain();  // scans it
  Dl_info info{};
  void* fn = dlsym(h, "sqlite3_open");
  if (fn == nullptr) fn = dlsym(h, "EVP_DigestInit_ex");
  ASSERT_NE(fn, nullptr);
  ASSERT_NE(dladdr(fn, &info), 0);
  const uintptr_t pc = reinterpret_cast<uintptr_t>(fn) + 4;
  const CfiStats before = CfiTableStats();
  EXPECT_TRUE(CfiDecodeNow(pc)) << DescribeCfiStats(CfiTableStats());
  EXPECT_FALSE(CfiDecodeNow(pc)) << "decoded twice";
  EXPECT_EQ(CfiTableStats().parts_decoded - before.parts_decoded, 1u);
  CfiRow row{};
  EXPECT_EQ(Lookup(pc, &row), CfiFound::kRow);
  EXPECT_TRUE(row.kind == kCfiSp || row.kind == kCfiFp) << int(row.kind);
}

// A walk through parts without rows: the handler's way stops at the first
// such frame and keeps a copy of the stack; the collector's finish, which
// decodes what the rest needs, gives the frames a walk with every row
// there gives.
struct QsortWalk {
  Unwinder* unwinder = nullptr;
  int deferred = -2;
  int unprepared = 0;
  bool scan_first = false;  // the collector's tick: a scan before the walks
  std::vector<uintptr_t> first, finished, reference;
};
QsortWalk* g_walk = nullptr;

int CompareAndWalk(const void* a, const void* b) {
  if (g_walk != nullptr && g_walk->deferred == -2) {
    ucontext_t uc;
    getcontext(&uc);
    const StackBounds bounds = CurrentStackBounds();
    uintptr_t pcs[256];
    int deferred = -1;
    const int n = g_walk->unwinder->UnwindDeferring(&uc, bounds, pcs, 256, &deferred);
    g_walk->deferred = deferred;
    g_walk->first.assign(pcs, pcs + n);
    if (deferred >= 0) {
      uintptr_t rest[256];
      // Not prepared yet: the collector leaves it in the ring.
      g_walk->unprepared = CfiFinishWalk(deferred, rest, 256 - n, /*now=*/false);
      if (g_walk->scan_first) CfiMaintain();
      CfiPrepareDeferredWalks();
      const int m = CfiFinishWalk(deferred, rest, 256 - n, /*now=*/false);
      g_walk->finished.assign(rest, rest + (m > 0 ? m : 0));
    }
    // Every row it needed is there now.
    const int r = g_walk->unwinder->Unwind(&uc, bounds, pcs, 256);
    g_walk->reference.assign(pcs, pcs + r);
  }
  const int x = *static_cast<const int*>(a), y = *static_cast<const int*>(b);
  return (x > y) - (x < y);
}

uintptr_t g_after_qsort = 0;  // an address in SortThroughLibc after its call of qsort

__attribute__((noinline)) void SortThroughLibc() {
  std::vector<int> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>((i * 37) % 64);
  qsort(v.data(), v.size(), sizeof(int), CompareAndWalk);
  uintptr_t here;
  asm volatile("lea 0(%%rip), %0" : "=r"(here) : : "memory");  // no tail call: this frame stays
  g_after_qsort = here;
}

TEST(CfiParts, AWalkStoppedAtAPartWithoutRowsIsFinishedByTheCollector) {
  std::string error;
  std::unique_ptr<Unwinder> unwinder = MakeUnwinder("cfi", &error);
  ASSERT_NE(unwinder, nullptr) << error;
  unwinder->PrepareThread();
  CfiWantTables();
  CfiMaintain();
  QsortWalk walk;
  walk.unwinder = unwinder.get();
  g_walk = &walk;
  SortThroughLibc();
  g_walk = nullptr;
  const CfiDeferredStats stats = CfiDeferredWalkStats();
  // This test's own code is in a part no walk asked for before.
  ASSERT_GE(walk.deferred, 0) << "the walk was not deferred: " << unwinder->Describe();
  std::vector<uintptr_t> whole = walk.first;
  whole.insert(whole.end(), walk.finished.begin(), walk.finished.end());
  EXPECT_EQ(walk.unprepared, -1) << "finished before its rows were decoded";
  EXPECT_GT(walk.finished.size(), 3u) << "the collector added too few frames";
  EXPECT_EQ(whole, walk.reference) << "deferred and finished walks differ from the full walk";
  EXPECT_GE(stats.finished, 1u);
  // The walk reaches this test's caller: qsort's return address in
  // SortThroughLibc is in it.
  const uintptr_t sort_fn = reinterpret_cast<uintptr_t>(&SortThroughLibc);
  bool through_sort = false;
  for (uintptr_t pc : whole) through_sort |= pc > sort_fn && pc <= g_after_qsort;
  EXPECT_TRUE(through_sort) << "the walk never reached SortThroughLibc";
}

// A frame in a library loaded since the tables' last scan: the handler's
// walk stops there too, and the collector, whose tick scans the objects
// before it finishes the walks (CfiMaintain, then CfiPrepareDeferredWalks),
// finishes it through the library to this test. libbz2 (which nothing here
// links) calls the test's allocator from BZ2_bzCompressInit.
struct Bz2Stream {  // bz_stream's layout, without bzlib's header
  char* next_in;
  unsigned avail_in, total_in_lo32, total_in_hi32;
  char* next_out;
  unsigned avail_out, total_out_lo32, total_out_hi32;
  void* state;
  void* (*bzalloc)(void*, int, int);
  void (*bzfree)(void*, void*);
  void* opaque;
};

void* AllocAndWalk(void*, int items, int size) {
  CompareAndWalk(&items, &size);
  return calloc(static_cast<size_t>(items), static_cast<size_t>(size));
}
void FreeBlock(void*, void* p) { free(p); }

TEST(CfiParts, AWalkThroughALibraryLoadedSinceTheLastScanIsFinished) {
  std::string error;
  std::unique_ptr<Unwinder> unwinder = MakeUnwinder("cfi", &error);
  ASSERT_NE(unwinder, nullptr) << error;
  unwinder->PrepareThread();
  if (dlopen("libbz2.so.1", RTLD_NOW | RTLD_NOLOAD) != nullptr) {
    GTEST_SKIP() << "libbz2 is loaded already (a sanitizer build's libraries load it)";
  }
  CfiWantTables();
  CfiMaintain();
  {
    // Rows for this test's own frames first, so that the walk below stops
    // in libbz2 for want of an object, not of this test's rows.
    QsortWalk warm;
    warm.unwinder = unwinder.get();
    g_walk = &warm;
    free(AllocAndWalk(nullptr, 1, 1));
    g_walk = nullptr;
  }
  void* bz = dlopen("libbz2.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(bz, nullptr) << dlerror();
  using Init = int (*)(Bz2Stream*, int, int, int);
  using End = int (*)(Bz2Stream*);
  auto init = reinterpret_cast<Init>(dlsym(bz, "BZ2_bzCompressInit"));
  auto end = reinterpret_cast<End>(dlsym(bz, "BZ2_bzCompressEnd"));
  ASSERT_TRUE(init != nullptr && end != nullptr);
  QsortWalk walk;
  walk.unwinder = unwinder.get();
  walk.scan_first = true;
  g_walk = &walk;
  Bz2Stream stream{};
  stream.bzalloc = AllocAndWalk;
  stream.bzfree = FreeBlock;
  ASSERT_EQ(init(&stream, 1, 0, 0), 0);
  g_walk = nullptr;
  end(&stream);
  ASSERT_GE(walk.deferred, 0) << "the walk was not deferred: " << unwinder->Describe();
  EXPECT_EQ(walk.unprepared, -1) << "finished before the collector's tick";
  std::vector<uintptr_t> whole = walk.first;
  whole.insert(whole.end(), walk.finished.begin(), walk.finished.end());
  EXPECT_EQ(whole, walk.reference) << "deferred and finished walks differ from the full walk";
  // Through libbz2's BZ2_bzCompressInit to this test's body.
  const uintptr_t init_pc = reinterpret_cast<uintptr_t>(init);
  bool through_bz2 = false;
  for (uintptr_t pc : whole) through_bz2 |= pc > init_pc && pc < init_pc + 4096;
  EXPECT_TRUE(through_bz2) << "the walk never reached BZ2_bzCompressInit";
  dlclose(bz);
}

}  // namespace
}  // namespace dlprof
