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

namespace dlprof {

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

 private:
  pid_t pid_;
  mutable uint64_t refused_ = 0;
  mutable int last_error_ = 0;
};

// A view that reads `base` in aligned blocks of kBlockBytes and serves reads
// inside a block it holds from there: for one walk of a thread's Python
// frames from outside, whose reads are 8 bytes each, a few fields of each
// frame and of its code object, frames side by side in the interpreter's
// data stack. Each was a process_vm_readv of its own: a quarter of a
// DataLoader worker's helper's CPU. A block that cannot be read whole
// (it ends in an unmapped page: blocks never cross pages) falls back to
// the read asked for. What it holds is as old as the view: make one per
// walk. Not thread-safe.
class BlockCachedView : public MemoryView {
 public:
  static constexpr size_t kBlockBytes = 256;
  static constexpr int kBlocks = 8;
  explicit BlockCachedView(const MemoryView& base) : base_(base) {}
  bool Copy(uintptr_t address, void* out, size_t n) const override;
  void BeginReads() const override { base_.BeginReads(); }
  void EndReads() const override { base_.EndReads(); }
  // Reads of the base view made (blocks and fallbacks), for tests.
  uint64_t base_reads() const { return base_reads_; }

 private:
  struct Block {
    uintptr_t address = 0;
    bool valid = false;
    unsigned char bytes[kBlockBytes];
  };
  const MemoryView& base_;
  mutable Block blocks_[kBlocks];
  mutable int next_ = 0;  // the block replaced next (round robin)
  mutable uint64_t base_reads_ = 0;
};

}  // namespace dlprof

#endif  // DLPROF_CORE_MEMORY_VIEW_H_
