// Copies of this process's own memory that cannot fault: for the collector's
// reads of memory another thread may unmap meanwhile (an object dlclose'd
// while its unwind tables are decoded, the stack of a thread that exits
// while it is walked).
#ifndef DLPROF_BACKENDS_OWN_MEMORY_H_
#define DLPROF_BACKENDS_OWN_MEMORY_H_

#include <cstddef>
#include <cstdint>

namespace dlprof {

// Copies [from, from + size) to `to` and returns the bytes copied: fewer
// where the memory ends or is unmapped, 0 if none. process_vm_readv, or,
// once a seccomp profile has refused it (container runtimes without
// CAP_SYS_PTRACE may: EPERM, ENOSYS), a pread of /proc/self/mem through a
// descriptor held for the call only. Not async-signal-safe (it may open a
// file); for the collector's thread.
size_t CopyOwnMemory(void* to, uintptr_t from, size_t size);

// The words at `count` addresses, in one process_vm_readv per 1024 of them
// (scattered words cost one call, not one each). False when any could not
// be read, or the call is refused (no /proc/self/mem fallback here: the
// caller has another way). Not async-signal-safe; for the collector.
bool CopyOwnWords(const uintptr_t* addresses, int count, uintptr_t* out);

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_OWN_MEMORY_H_
