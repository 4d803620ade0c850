// Where the collector reads another runtime's objects (CPython's code
// objects and strings) from: this process's own memory through fault-safe
// loads (the collector thread), or the profiled program's through
// process_vm_readv (the collector process, dlprof-collector). One reader of
// code objects serves both (core/python_code.h). Off the signal path.
#ifndef DLPROF_CORE_MEMORY_VIEW_H_
#define DLPROF_CORE_MEMORY_VIEW_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlprof {

struct ReadTrace;

class MemoryView {
 public:
  virtual ~MemoryView() = default;
  // Copies `n` bytes at `address` into `out`; false when any of them cannot
  // be read (unmapped, or the process is gone), never a fault.
  virtual bool Copy(uintptr_t address, void* out, size_t n) const = 0;
  // Brackets a batch of Copy calls (the own view opens the fault handler
  // for its SafeLoads there; each Copy needs an open batch).
  virtual void BeginReads() const {}
  virtual void EndReads() const {}
  // Whether every read of `trace` gets the same bytes now, asked at once
  // (ProcessMemory's one system call); false where the view cannot tell.
  virtual bool SameAsTraced(const ReadTrace& trace) const {
    (void)trace;
    return false;
  }

  bool U64(uintptr_t address, uint64_t* out) const { return Copy(address, out, sizeof(*out)); }
  bool U32(uintptr_t address, uint32_t* out) const { return Copy(address, out, sizeof(*out)); }
  bool Ptr(uintptr_t address, uintptr_t* out) const { return Copy(address, out, sizeof(*out)); }
};

// This process's memory, by SafeLoads (core/safe_load.h): only on a thread
// that blocks the signals the fault handler recovers from, the collector
// thread's way (core/fault_handler.h).
class OwnMemory : public MemoryView {
 public:
  bool Copy(uintptr_t address, void* out, size_t n) const override;
  void BeginReads() const override;
  void EndReads() const override;
};

// Another process's memory, by process_vm_readv: it needs the rights of a
// ptrace attach on it (the same user and a dumpable process, or
// CAP_SYS_PTRACE; under Yama's ptrace_scope 1 the program names its helper
// with PR_SET_PTRACER). Counts the reads the kernel refused for want of
// them, which no later read will change.
// [from, from + n) of process `pid`'s memory into `to`, by process_vm_readv
// (the ptrace read permission): the bytes copied before the first page that
// could not be read. Not signal-safe in spirit (the collector's), though it
// only makes system calls.
size_t CopyFromProcess(pid_t pid, void* to, uintptr_t from, size_t n);

class ProcessMemory : public MemoryView {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}
  bool Copy(uintptr_t address, void* out, size_t n) const override;
  // Reads refused with EPERM (the rights are missing), and the last errno of
  // a failed read.
  uint64_t refused() const { return refused_; }
  int last_error() const { return last_error_; }
  // Whether every read of `trace` (complete) gets the same bytes now: the
  // spans they fall in, read in one process_vm_readv. False when they cannot
  // all be read, or take more than kMaxTraceSpans pieces (a 19-frame torch
  // worker's walk reads ~136 fields in ~25 spans: one per code object,
  // besides the data stack's).
  bool SameAsTraced(const ReadTrace& trace) const override;
  static constexpr int kMaxTraceSpans = 128;
  static constexpr size_t kMaxTraceBytes = 64 << 10;

 private:
  pid_t pid_;
  mutable std::vector<unsigned char> copy_;  // SameAsTraced's
  mutable uint64_t refused_ = 0;
  mutable int last_error_ = 0;
};

// The reads one walk made through a view (each of at most 8 bytes: the
// fields of frames and code objects), with the values they got: whether
// the same walk would read the same now is then one system call
// (ProcessMemory::SameAsTraced), not a walk's dozen. A walk is a function
// of what it reads, so equal reads mean an equal walk.
struct ReadTrace {
  static constexpr int kMaxReads = 256;
  int reads = 0;
  // False once a read did not fit (too many, or larger than 8 bytes) or
  // failed: the walk cannot be told from its trace.
  bool complete = true;
  uintptr_t address[kMaxReads];
  uint8_t size[kMaxReads];
  uint64_t value[kMaxReads];

  void Clear() {
    reads = 0;
    complete = true;
  }
  void Add(uintptr_t at, const void* bytes, size_t n);
};

// A view that reads `base` in aligned blocks of kBlockBytes and serves reads
// inside a block it holds from there: for one walk of a thread's Python
// frames from outside, whose reads are 8 bytes each, a few fields of each
// frame and of its code object, frames side by side in the interpreter's
// data stack. Each was a process_vm_readv of its own: a quarter of a
// DataLoader worker's helper's CPU. A block is a page (aligned; it never
// crosses one): a process_vm_readv costs ~9 us here whatever its size up
// to a page, so the bigger block halves a walk's calls (code objects are
// malloc'd side by side when a module loads). A block that cannot be read
// whole (an unmapped page) falls back to the read asked for. What it holds
// is as old as the view: make one per walk. With a trace, every read it
// serves is recorded there. Not thread-safe.
class BlockCachedView : public MemoryView {
 public:
  static constexpr size_t kBlockBytes = 4096;
  static constexpr int kBlocks = 8;
  explicit BlockCachedView(const MemoryView& base, ReadTrace* trace = nullptr)
      : base_(base), trace_(trace) {}
  bool Copy(uintptr_t address, void* out, size_t n) const override;
  void BeginReads() const override { base_.BeginReads(); }
  void EndReads() const override { base_.EndReads(); }
  // Reads of the base view made (blocks and fallbacks), for tests.
  uint64_t base_reads() const { return base_reads_; }

 private:
  bool CopyUntraced(uintptr_t address, void* out, size_t n) const;
  struct Block {
    uintptr_t address = 0;
    bool valid = false;
    unsigned char bytes[kBlockBytes];
  };
  const MemoryView& base_;
  ReadTrace* trace_;
  mutable Block blocks_[kBlocks];
  mutable int next_ = 0;  // the block replaced next (round robin)
  mutable uint64_t base_reads_ = 0;
};

}  // namespace dlprof

#endif  // DLPROF_CORE_MEMORY_VIEW_H_
