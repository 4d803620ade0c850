#include "core/memory_view.h"

#include <errno.h>
#include <sys/uio.h>

#include <algorithm>
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

void ReadTrace::Add(uintptr_t at, const void* bytes, size_t n) {
  if (!complete) return;
  if (n > sizeof(uint64_t) || reads >= kMaxReads) {
    complete = false;
    return;
  }
  uint64_t v = 0;
  memcpy(&v, bytes, n);
  address[reads] = at;
  size[reads] = static_cast<uint8_t>(n);
  value[reads] = v;
  ++reads;
}

bool ProcessMemory::SameAsTraced(const ReadTrace& trace) const {
  if (!trace.complete) return false;
  constexpr uintptr_t kPage = BlockCachedView::kBlockBytes;
  uintptr_t pages[kMaxTracePages];
  int count = 0;
  for (int i = 0; i < trace.reads; ++i) {
    const uintptr_t first = trace.address[i] & ~(kPage - 1);
    const uintptr_t last = (trace.address[i] + trace.size[i] - 1) & ~(kPage - 1);
    for (uintptr_t p = first;; p += kPage) {
      if (std::find(pages, pages + count, p) == pages + count) {
        if (count == kMaxTracePages) return false;
        pages[count++] = p;
      }
      if (p == last) break;
    }
  }
  if (count == 0) return true;
  std::sort(pages, pages + count);
  pages_.resize(static_cast<size_t>(count) * kPage);
  iovec local{pages_.data(), pages_.size()};
  iovec remote[kMaxTracePages];
  for (int i = 0; i < count; ++i) remote[i] = iovec{reinterpret_cast<void*>(pages[i]), kPage};
  ssize_t got;
  do {
    got = process_vm_readv(pid_, &local, 1, remote, static_cast<unsigned long>(count), 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(pages_.size())) return false;
  for (int i = 0; i < trace.reads; ++i) {
    unsigned char now[sizeof(uint64_t)];
    for (size_t k = 0; k < trace.size[i]; ++k) {
      const uintptr_t a = trace.address[i] + k;
      const auto at = std::lower_bound(pages, pages + count, a & ~(kPage - 1));
      now[k] = pages_[static_cast<size_t>(at - pages) * kPage + (a & (kPage - 1))];
    }
    uint64_t v = 0;
    memcpy(&v, now, trace.size[i]);
    if (v != trace.value[i]) return false;
  }
  return true;
}

bool BlockCachedView::Copy(uintptr_t address, void* out, size_t n) const {
  const bool ok = CopyUntraced(address, out, n);
  if (trace_ != nullptr) {
    if (ok) {
      trace_->Add(address, out, n);
    } else {
      trace_->complete = false;  // a failed read ends a walk: not told by values
    }
  }
  return ok;
}

bool BlockCachedView::CopyUntraced(uintptr_t address, void* out, size_t n) const {
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
