#include "core/memory_view.h"

#include <errno.h>
#include <sys/uio.h>

#include <cstring>

#include "core/fault_handler.h"
#include "core/safe_load.h"

namespace dlprof {

bool OwnMemory::Copy(uintptr_t address, void* out, size_t n) const {
  return SafeCopy(address, out, n);
}

void OwnMemory::BeginReads() const { OpenFaultsForSafeLoads(); }

void OwnMemory::EndReads() const { CloseFaultsForSafeLoads(FaultsReturnTo::kProcess); }

size_t CopyFromProcess(pid_t pid, void* to, uintptr_t from, size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec local{static_cast<char*>(to) + done, n - done};
    iovec remote{reinterpret_cast<void*>(from + done), n - done};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

bool ProcessMemory::Copy(uintptr_t address, void* out, size_t n) const {
  if (n == 0) return true;
  iovec local{out, n};
  iovec remote{reinterpret_cast<void*>(address), n};
  const ssize_t got = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (got == static_cast<ssize_t>(n)) return true;
  if (got < 0) {
    last_error_ = errno;
    if (errno == EPERM) ++refused_;
  }
  return false;  // (a partial read: a page past the object's end was not there)
}

bool BlockCachedView::Copy(uintptr_t address, void* out, size_t n) const {
  const uintptr_t block = address & ~static_cast<uintptr_t>(kBlockBytes - 1);
  if (n == 0 || n > kBlockBytes || address + n < address || address + n > block + kBlockBytes) {
    ++base_reads_;
    return base_.Copy(address, out, n);  // not inside one block
  }
  for (const Block& b : blocks_) {
    if (b.valid && b.address == block) {
      memcpy(out, b.bytes + (address - block), n);
      return true;
    }
  }
  Block& b = blocks_[next_];
  ++base_reads_;
  if (!base_.Copy(block, b.bytes, kBlockBytes)) {
    // Part of the block unreadable: the bytes asked for may still be.
    b.valid = false;
    ++base_reads_;
    return base_.Copy(address, out, n);
  }
  b.address = block;
  b.valid = true;
  next_ = (next_ + 1) % kBlocks;
  memcpy(out, b.bytes + (address - block), n);
  return true;
}

}  // namespace dlprof
