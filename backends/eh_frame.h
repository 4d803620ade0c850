// Decodes a loaded object's .eh_frame (found through its .eh_frame_hdr, in
// this process's memory) into compact unwind rows: for each address range,
// how to find the caller's stack pointer (the CFA), return address and frame
// pointer. Runs off the signal path (the collector builds the tables,
// backends/cfi_tables.h); the signal handler only reads the rows.
//
// Why our own decoder rather than libdw's: libdw's CFI reader wants an Elf
// handle, i.e. the file opened (a descriptor among the program's, a second
// mapping of a 600 MB libtorch), while the loader has already mapped the very
// bytes the program's own C++ exceptions unwind with. Reading them in memory
// needs no fd, works for deleted or replaced files, and matches the loaded
// code exactly. The tests check the rows against libdw's answers.
//
// x86_64 only: the rows describe %rsp, %rbp and the return address.
#ifndef DLPROF_BACKENDS_EH_FRAME_H_
#define DLPROF_BACKENDS_EH_FRAME_H_

#include <link.h>

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

namespace dlprof {

// How a row finds the caller's frame.
enum CfiKind : uint8_t {
  kCfiSp = 1,       // CFA = %rsp + cfa_offset
  kCfiFp = 2,       // CFA = %rbp + cfa_offset
  kCfiOutermost,    // the return address is undefined: the walk ends here
  kCfiSignal,       // a signal trampoline: the interrupted context is at %rsp
  kCfiUnknown,      // a rule we do not follow (an expression, another register)
  kCfiNone,         // no FDE covers this range
};

// One row, valid from its pc up to the next row's pc. 12 bytes.
struct CfiRow {
  uint32_t pc_offset;  // from the object's table base (CfiTable::base)
  int32_t cfa_offset;
  int16_t fp_offset;   // %rbp is saved at CFA + fp_offset; 0: %rbp unchanged
  uint8_t kind;        // CfiKind
  uint8_t reserved;
};
static_assert(sizeof(CfiRow) == 12, "rows are packed for the signal handler's cache");

// The collector's big temporaries (rows, copies of .eh_frame: 20+ MB for
// libtorch) come from mmap and go back to the system when freed, instead of
// growing the collector thread's malloc arena for good.
template <typename T>
struct MmapAllocator {
  using value_type = T;
  MmapAllocator() = default;
  template <typename U>
  MmapAllocator(const MmapAllocator<U>&) {}
  T* allocate(size_t n) {
    // Populated at once: each is written whole (a row reservation up to
    // its FDE estimate), and per-page faults were a third of libtorch_cpu's
    // decode on a VM (BENCHMARKS.md).
    void* p = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { munmap(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const MmapAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const MmapAllocator<U>&) const { return false; }
};
using CfiRowVector = std::vector<CfiRow, MmapAllocator<CfiRow>>;
using ByteVector = std::vector<unsigned char, MmapAllocator<unsigned char>>;

// Fills a copy on demand: `EhFrameSource::copy` may be a reservation whose
// chunks are copied in only when a read needs them (a part's decode reads a
// few KB of libtorch's 15 MB of unwind sections).
class CopyFiller {
 public:
  virtual ~CopyFiller() = default;
  // Makes [addr, addr + n) of the copy hold the object's bytes; false if
  // they cannot be read. *ready_lo, *ready_hi: a range around it that is
  // ready too (the reader asks again only outside it).
  virtual bool Ensure(uintptr_t addr, size_t n, uintptr_t* ready_lo, uintptr_t* ready_hi) = 0;
};

// Where an object's unwind information lies in memory.
struct EhFrameSource {
  uintptr_t eh_frame_hdr = 0;  // runtime address of .eh_frame_hdr (PT_GNU_EH_FRAME)
  uintptr_t readable_lo = 0;   // every read stays inside [readable_lo, readable_hi):
  uintptr_t readable_hi = 0;   // the PT_LOAD segments around it
  uintptr_t base = 0;          // rows' pc_offset is from here (the lowest text address)
  // A copy of [readable_lo, readable_hi) to read instead of the memory
  // itself (nullptr: read in place). Addresses in the tables stay the
  // original ones; only where the bytes come from changes.
  const unsigned char* copy = nullptr;
  // Set when `copy` is filled on demand; nullptr: it is whole.
  CopyFiller* filler = nullptr;
  // Without a header (linked with --no-eh-frame-hdr): .eh_frame itself, from
  // the file's section headers, walked entry by entry.
  uintptr_t eh_frame = 0;
  uintptr_t eh_frame_size = 0;
};

// A loaded object's executable range and unwind information, from its
// program headers (a dl_iterate_phdr entry), or, for an object without
// PT_GNU_EH_FRAME, from the .eh_frame section its file names (read with
// open/pread: call it off the signal path). False when it has neither, or no
// executable segment.
struct LoadedEhFrame {
  uintptr_t text_lo = 0, text_hi = 0;
  EhFrameSource source;
};
bool FindLoadedEhFrame(const dl_phdr_info* info, LoadedEhFrame* out);

// Where .eh_frame starts, from the header's eh_frame_ptr; 0 if unreadable.
// GNU ld and lld put it after .eh_frame_hdr, gold before.
uintptr_t EhFrameStart(const EhFrameSource& source);

// Appends the rows of every FDE, sorted by pc, with kCfiNone rows for the
// gaps between FDEs: through the header's search table, or without a header
// by walking .eh_frame's entries. Corrupt entries are skipped (counted in
// *skipped when given): never a read outside the readable range, never an
// unbounded loop. False (and *error) if the header itself cannot be read.
bool DecodeEhFrame(const EhFrameSource& source, CfiRowVector* rows, std::string* error,
                   long* skipped = nullptr);

// The same for the FDEs that cover [pc_lo, pc_hi) only: those starting in
// it, and the one before (a function that starts earlier may run into it).
// The rows are sorted; the first may start before pc_lo. Needs the header's
// search table in its usual fixed-size encoding (4-byte offsets from the
// header, as GNU ld, gold and lld write it): false and *error otherwise, and
// the caller decodes the whole object instead.
bool DecodeEhFrameRange(const EhFrameSource& source, uintptr_t pc_lo, uintptr_t pc_hi,
                        CfiRowVector* rows, std::string* error, long* skipped = nullptr);

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_EH_FRAME_H_
