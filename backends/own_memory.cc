#include "backends/own_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "backends/private_fd.h"

namespace dlprof {

namespace {
std::atomic<bool> g_vm_readv_refused{false};

size_t CopyThroughProcSelfMem(void* to, uintptr_t from, size_t size) {
  const int fd = OpenOwn(AT_FDCWD, "/proc/self/mem", O_RDONLY);
  if (fd < 0) return 0;
  size_t copied = 0;
  while (copied < size) {
    const ssize_t got = pread(fd, static_cast<char*>(to) + copied, size - copied,
                              static_cast<off_t>(from + copied));
    if (got <= 0) break;
    copied += static_cast<size_t>(got);
  }
  close(fd);
  return copied;
}
}  // namespace

size_t CopyOwnMemory(void* to, uintptr_t from, size_t size) {
  size_t copied = 0;
  while (copied < size && !g_vm_readv_refused.load(std::memory_order_relaxed)) {
    iovec local{static_cast<char*>(to) + copied, size - copied};
    iovec remote{reinterpret_cast<void*>(from + copied), size - copied};
    const ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got > 0) {
      copied += static_cast<size_t>(got);
      continue;
    }
    if (got < 0 && (errno == EPERM || errno == ENOSYS)) {
      g_vm_readv_refused.store(true, std::memory_order_relaxed);
      break;
    }
    return copied;  // the memory ends here
  }
  if (copied < size && g_vm_readv_refused.load(std::memory_order_relaxed)) {
    copied += CopyThroughProcSelfMem(static_cast<char*>(to) + copied, from + copied, size - copied);
  }
  return copied;
}

bool CopyOwnWords(const uintptr_t* addresses, int count, uintptr_t* out) {
  constexpr int kBatch = 1024;  // IOV_MAX
  iovec local[kBatch], remote[kBatch];
  for (int done = 0; done < count;) {
    if (g_vm_readv_refused.load(std::memory_order_relaxed)) return false;
    const int n = std::min(count - done, kBatch);
    for (int i = 0; i < n; ++i) {
      local[i] = iovec{&out[done + i], sizeof(uintptr_t)};
      remote[i] = iovec{reinterpret_cast<void*>(addresses[done + i]), sizeof(uintptr_t)};
    }
    const ssize_t got = process_vm_readv(getpid(), local, n, remote, n, 0);
    if (got < 0 && (errno == EPERM || errno == ENOSYS)) {
      g_vm_readv_refused.store(true, std::memory_order_relaxed);
    }
    if (got != static_cast<ssize_t>(n * sizeof(uintptr_t))) return false;
    done += n;
  }
  return true;
}

}  // namespace dlprof
