// The executable mappings of this process with their GNU build-ids, recorded
// so the reporter can symbolize offline, even after the process is gone.
#ifndef DLPROF_CORE_PROC_MAPS_H_
#define DLPROF_CORE_PROC_MAPS_H_

#include <link.h>
#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dlprof {

struct MapEntry {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  std::string path;
  std::string build_id;  // raw bytes
};

// Parses /proc/self/maps (executable, file-backed mappings only) and attaches
// build-ids read from the loaded objects' PT_NOTE segments in memory.
// When the loader is busy (TryIterateLoadedObjects): false, with *out
// untouched, to try again later; or, with `last_chance`, the mappings
// without build-ids.
bool ReadExecutableMappings(std::vector<MapEntry>* out, bool last_chance = false);

// The scheduler state letter of thread `tid` of this process ('R', 'S', 'D',
// 'Z', ...) from /proc/self/task/<tid>/stat, through a descriptor held for
// the read; 0 when it cannot be read (the thread is gone). Readable even by
// a non-dumpable process. Not signal-safe. `pid`: of that process instead
// (the collector process reads the program from outside).
char ThreadState(int tid, pid_t pid = 0);

// Thread `tid`'s CPU clock (the kernel's encoding of a per-thread
// CPUCLOCK_SCHED clock), readable by clock_gettime from any thread of the
// process.
clockid_t ThreadCpuClock(pid_t tid);
// That clock's time in ns, -1 when the thread is gone. Not signal-safe.
int64_t ThreadCpuNs(pid_t tid);

// Changes whenever an object is loaded or unloaded (dl_iterate_phdr's counters).
// False when the loader was busy (TryIterateLoadedObjects).
bool LoadedObjectsGeneration(uint64_t* generation);
// The same, without waiting for dlprof's own lock of the loader calls either
// (false when it is held): for code that may run inside a signal handler
// that interrupted a holder of that lock on this thread (an exit() from a
// SIGTERM handler that landed in fork()'s prepare handler).
bool LoadedObjectsGenerationNoWait(uint64_t* generation);

// glibc's loader guards its list of loaded objects with a recursive mutex
// (_rtld_global._dl_load_write_lock) that dl_iterate_phdr() takes, and fork()
// does not reset it (it resets _dl_load_lock). A child forked while another
// thread held it (inside dlopen, dlclose or dl_iterate_phdr) inherits it held
// for good: there, any dl_iterate_phdr() hangs, libunwind's lookups from the
// signal handler and the maps above included.
//
// FindLoaderLock() finds that mutex at start, by looking inside a
// dl_iterate_phdr() callback for the one recursive mutex in _rtld_global that
// the calling thread holds; if that does not single one out, nothing here
// changes behaviour. Not signal-safe.
void FindLoaderLock();
// In a fork child: true when the loader lock came over held.
bool LoaderLockInheritedHeld();

// libdlprof also exports dl_iterate_phdr(), which libunwind calls on a cache
// miss. Called from the profiling signal handler (t_in_unwind set), it never
// waits for the loader lock: if another thread holds it (that thread may be
// in dlopen, waiting for a malloc lock the interrupted thread holds: a
// deadlock), the lookup fails and the stack is cut there, counted in
// LoaderBusyLookups(). Everywhere else it is glibc's.
extern __thread bool t_in_unwind __attribute__((tls_model("initial-exec")));
// The interposer's work (core/hooks.cc). This function is safe to call from
// asynchronous signals when t_in_unwind is set (it then only tries the lock).
int ProgramDlIteratePhdr(int (*callback)(struct dl_phdr_info*, size_t, void*), void* data);
uint64_t LoaderBusyLookups();
// dlprof's own threads (the collector: the maps, the cfi tables) walk the
// loaded objects only through this. It never waits for the loader's lock:
// false, without calling `callback`, when another thread holds it (the
// caller tries again later). And a fork() never copies the process while it
// runs: LockForFork takes its lock (LockLoaderCallsForFork), so a child
// never inherits the loader's lock held by a dlprof thread, which would hang
// the program there at its first dlopen (a DataLoader worker importing a
// module). Without the loader's lock found (FindLoaderLock) it waits for it.
// Not signal-safe. Exceptions from `callback` pass through, locks released.
bool TryIterateLoadedObjects(int (*callback)(dl_phdr_info*, size_t, void*), void* data);
void LockLoaderCallsForFork();
void UnlockLoaderCallsAfterFork();
void ResetLoaderCallsInForkChild();
// From now on this process never calls dl_iterate_phdr (the maps come from
// /proc/self/maps alone, without build-ids; the generation stays put).
void MarkLoaderUnusable();

}  // namespace dlprof

#endif  // DLPROF_CORE_PROC_MAPS_H_
