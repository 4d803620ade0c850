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
  if (trace.reads == 0) return true;
  // The reads by address, gathered into spans (a read joins the span before
  // it when it starts within kJoinBytes of its end): one piece of one
  // process_vm_readv each, a few bytes to a few hundred, not whole pages.
  constexpr uintptr_t kJoinBytes = 256;
  int order[ReadTrace::kMaxReads];
  for (int i = 0; i < trace.reads; ++i) order[i] = i;
  std::sort(order, order + trace.reads,
            [&](int x, int y) { return trace.address[x] < trace.address[y]; });
  iovec remote[kMaxTraceSpans];
  size_t offset[ReadTrace::kMaxReads];  // of each read in the local copy
  int spans = 0;
  size_t total = 0;
  uintptr_t lo = 0, hi = 0;
  for (int k = 0; k < trace.reads; ++k) {
    const int i = order[k];
    const uintptr_t a = trace.address[i], end = a + trace.size[i];
    if (spans > 0 && a >= lo && a <= hi + kJoinBytes) {
      hi = std::max(hi, end);
    } else {
      if (spans > 0) {
        remote[spans - 1] = iovec{reinterpret_cast<void*>(lo), hi - lo};
        total += hi - lo;
      }
      if (spans == kMaxTraceSpans) return false;
      ++spans;
      lo = a;
      hi = end;
    }
    offset[i] = total + (a - lo);
  }
  remote[spans - 1] = iovec{reinterpret_cast<void*>(lo), hi - lo};
  total += hi - lo;
  if (total > kMaxTraceBytes) return false;
  copy_.resize(total);
  iovec local{copy_.data(), total};
  ssize_t got;
  do {
    got = process_vm_readv(pid_, &local, 1, remote, static_cast<unsigned long>(spans), 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(total)) return false;
  for (int i = 0; i < trace.reads; ++i) {
    uint64_t v = 0;
    memcpy(&v, copy_.data() + offset[i], trace.size[i]);
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
