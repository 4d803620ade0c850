#include "core/memory_view.h"

#include <errno.h>
#include <sys/uio.h>

#include "core/fault_handler.h"
#include "core/safe_load.h"

namespace dlprof {

bool OwnMemory::Copy(uintptr_t address, void* out, size_t n) const {
  return SafeCopy(address, out, n);
}

void OwnMemory::BeginReads() const { OpenFaultsForSafeLoads(); }

void OwnMemory::EndReads() const { CloseFaultsForSafeLoads(FaultsReturnTo::kProcess); }

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

}  // namespace dlprof
