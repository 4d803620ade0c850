// The memory dlprof's signal handler and its collector share, in one place
// that another process can map: a memfd, mapped MAP_SHARED in extents. This
// is phase 1 of the collector outside the program (docs/ARCHITECTURE.md,
// "The shared arena"): the collector thread reads it today; a collector
// process will map the same memfd at the same addresses, so the structures
// in it keep their pointers, and what the handler committed stays readable
// after the program is gone (SIGKILL).
//
// Shared memory stays shared across fork(), so a fork child must get its own
// copy before it writes: ArenaPrivatizeInForkChild, first thing in the
// atfork child handler. A child made without atfork handlers (_Fork, a raw
// fork syscall) never gets one; ArenaOwned() is false there, and dlprof's
// code that writes the arena from the program's threads checks it first.
#ifndef DLPROF_CORE_SHARED_ARENA_H_
#define DLPROF_CORE_SHARED_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace dlprof {

// What a fork child gets of an extent.
enum class AtFork {
  kCopy,  // a copy of what was written (tables: slots, their counters, names)
  kZero,  // fresh zeroed pages: contents the child discards anyway (rings)
};

// `bytes` (rounded up to whole pages) of zeroed arena memory, kept for the
// rest of the process (never unmapped: a late signal may still write it).
// From the memfd while it works; private anonymous memory where memfd_create
// or MADV_WIPEONFORK is refused (then ArenaShared() is false: a collector
// process cannot be used, the collector thread can). nullptr if no memory.
// Thread-safe (a lock); not async-signal-safe.
void* ArenaMap(size_t bytes, AtFork at_fork);

// As ArenaMap, for what a process can do without (the cfi region): shared
// memory or nothing (nullptr), never a private extent, which would make the
// whole arena unreadable from a collector process.
void* ArenaMapShared(size_t bytes, AtFork at_fork);

// True when every extent so far is shared memory (a memfd).
bool ArenaShared();

// Whether `bytes` more can come from the memfd: its size counts against
// RLIMIT_FSIZE (a memfd is a file), and an extent that does not fit is
// private, which makes the whole arena unreadable from a collector process.
// For optional extents (the cfi region) that a process can do without.
bool ArenaCanGrow(size_t bytes);

// False in a child made by a fork that ran no atfork handler, until
// ArenaPrivatizeInForkChild: its extents are still its parent's memory.
// One load. This function is safe to call from asynchronous signals.
bool ArenaOwned();

// In a fork child, while it has one thread and before anything writes the
// arena: moves every extent to a memfd of the child's own, at the same
// address (of kCopy extents the pages ever written are copied, kZero ones
// are fresh). On failure the child's extents become private anonymous
// memory, so they are still its own. Registered as an atfork child handler
// when the arena is made; later calls in the same child do nothing.
// Not async-signal-safe.
void ArenaPrivatizeInForkChild();

// Where each structure in the arena starts, for a process that attaches
// to it. Set by the structure's maker once it exists.
enum class ArenaRoot : int {
  kSlots,        // core/thread_registry.cc SlotTable
  kAnnotations,  // core/annotations.cc Tables
  kSession,      // SessionState::Data
  kMailbox,      // Mailbox::Data
  kCodesSeen,    // core/python_codes_seen.cc
  kExecNotes,    // core/python_exec_notes.cc Ring
  kCfi,          // backends/cfi_region.h CfiRegion (a collector process's tables)
  kCount,
};
void ArenaSetRoot(ArenaRoot root, const void* p);
// nullptr until set (or, after ArenaAttach, until the program set it).
const void* ArenaRootOf(ArenaRoot root);

// In another process (the collector process, phase 2; tests): maps the
// arena whose memfd is `fd` (a descriptor of its own: passed at spawn, or
// opened through /proc/<pid>/fd) at the addresses it has in the program,
// so that the pointers inside it hold here too, and adopts its header for
// ArenaRootOf. False with *error when the memfd is not an arena, or an
// address is already taken in this process (a new exec gets a new layout).
// Not async-signal-safe.
bool ArenaAttach(int fd, std::string* error);
// The memfd's descriptor in this process, to hand to a collector process
// (its number is dlprof's, high and checked by identity); -1 when the arena
// is not shared (ArenaShared()) or the program took the number.
int ArenaSharedFd();
// Where the memfd can be opened again (a new descriptor, or -1) once the
// program has closed or taken dlprof's number (close_range, dup2): the
// collector process holds it too. Without it the arena's next extent is
// private, and a collector process must stop there.
void ArenaSetReopen(int (*reopen)());

// After ArenaAttach: whether [p, p + bytes) lies in extents mapped here,
// mapping those the program added since the last look when it does not.
// A structure the program made after that look (a new thread's ring) has
// its extent counted before it is published, so once the structure is seen
// its extent can be mapped; where it cannot, the structure is not to be
// read. Always true in the program itself (not attached). Not
// async-signal-safe.
bool ArenaReadable(const void* p, size_t bytes);

// After ArenaAttach: maps the extents the program added since. False with
// *error as for ArenaAttach, or when the program added a private extent
// (ArenaShared() turned false there): nothing in it can be read here.
bool ArenaAttachNewExtents(std::string* error);

// Whether a fork's copy of the arena (the atfork prepare handler's) may be
// under way in the program: what it has not copied yet must not change
// (a collector process frees cfi tables only when none is). A sequentially
// consistent read of a count the copy raises before it starts and lowers
// after. Not async-signal-safe in spirit (the helper's), though it is one
// load.
bool ArenaForkCopyUnderway();

struct ArenaUsage {
  int extents = 0;
  size_t bytes = 0;  // mapped, not necessarily touched
  bool shared = false;
};
ArenaUsage ArenaUsageNow();

}  // namespace dlprof

#endif  // DLPROF_CORE_SHARED_ARENA_H_
