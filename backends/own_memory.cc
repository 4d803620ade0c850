#include "backends/own_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

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

}  // namespace dlprof
