// The collector process seen from the program (DLPROF_COLLECTOR=process):
// the helper of issue 11's design (docs/ARCHITECTURE.md, "What is next",
// phase 2), started in place of the collector thread. It attaches to the
// shared arena (core/shared_arena.h), drains it, ticks, writes this
// process's file and ends it after the process is gone (collector/).
#ifndef DLPROF_CORE_COLLECTOR_PROCESS_H_
#define DLPROF_CORE_COLLECTOR_PROCESS_H_

#include <string>

#include "core/collector.h"
#include "core/config.h"
#include "core/profile_file.h"

namespace dlprof {

// Why the helper cannot serve this process, "" if it can. Asked at session
// start, before the unwinder is made: the helper builds no unwind tables
// yet, so a process that asks for them keeps the thread. `python`: the
// process is CPython, whose code objects the helper reads from outside
// (process_vm_readv): it needs a dumpable process, and where Yama's
// ptrace_scope is 1 the program names its helper its ptracer
// (PR_SET_PTRACER) once it is spawned; scope 2 or 3 refuses.
std::string CollectorProcessRefusal(const Config& config, bool python);

// Why a helper this process spawned now would be its own child (it is PID 1
// of its namespace or a child subreaper, or made a process of the program
// one), nullptr if it would not be. Such a process gets the thread, quietly:
// its wait(-1) would see the helper and wait for it for ever. Allocates
// nothing.
const char* HelperWouldBeOurChild();
// The same for a fork child, plus what keeps its helper from serving it:
// credentials the program changed since the start. Allocates nothing.
const char* HelperCannotServeForkChild();
// BeforeCredentialChange (core/session.h): notes that the program changes
// its credentials (a set*id call), for the fork children to come.
void NoteCredentialChange();

// The maps a helper writes are read from outside (/proc/<pid>/maps), which
// a process that is gone has no more: objects it loaded since its helper's
// last read would be missing from its file. These keep the loader's
// generation (core/proc_maps.h) as of that read, so that the exit asks for
// one more while it is needed. Not signal-safe (the loader's counters).
// At the helper's start (it reads the maps first thing).
void NoteLoaderGenerationAtHelperStart();
// In the parent, before a fork (the prepare handler): the child's helper
// reads the maps as they are now.
void NoteLoaderGenerationAtFork();
// In a fork child whose helper started: its maps are those of the fork.
void UseLoaderGenerationOfFork();
// Whether objects were loaded or unloaded since (true if unknown).
bool LoadedObjectsChangedSinceHelperRead();

// Finds dlprof-collector beside this library (dladdr: never in a fork
// child, which may have inherited the loader's lock held). False with *why.
bool FindCollectorProgram(std::string* why);

// Starts the helper for this process, which makes its file at `spec` with
// `c`'s process fields. False with *why when it cannot be started (the
// caller starts the thread). The caller asks HelperWouldBeOurChild first.
// Not signal-safe; safe in a fork child (no lock of the loader's or of
// another thread's).
// `file_at_once`: the helper makes the file before its first tick (a
// process's start: one that execs at once still leaves its file, as with
// the thread); else 50 ms into its life (a fork child: one that execs first,
// as a shell's children do, leaves none).
bool StartCollectorProcess(const Collector& c, const ProfileFileSpec& spec, int snapshot_ms,
                           bool light, bool file_at_once, std::string* why);

// In the parent, at session start: what a fork child's helper is told that
// the child shares with its parent (the run, the configuration, the
// process facts `child_fields` a new collector of the parent's has, less
// those the child sets itself), so that StartCollectorProcessInForkChild
// allocates nothing. Not signal-safe.
void PrepareForkChildArgs(const Collector& child_fields, const ProfileFileSpec& spec,
                          int snapshot_ms, bool light);
// In a fork child: starts its helper with the prepared arguments and its
// own pid, ppid, start time, role "worker" and `worker` id (a child with a
// fact of its own to record, such as a loader lock held at the fork, takes
// the allocating way). Allocates nothing: a fork made
// from a signal handler that interrupted malloc leaves the child's heap
// mid-operation (the child of a single-threaded program gets no lock reset).
// False when nothing was prepared or the spawn failed: then the caller
// takes the allocating way.
bool StartCollectorProcessInForkChild(int worker);

// Whether this process's collector is the helper (it was started).
bool CollectorIsProcess();
// In a fork child: the parent's helper is not this process's.
void ForgetCollectorProcess();
// The program made a process of its a child subreaper (prctl): the helpers
// its processes spawn from now on would be its children; they get the thread.
void NoteChildSubreaper();
// The same, from the program's own prctl (the interposer), which may
// allocate: the processes it execs from now on learn it from DLPROF_REAPER.
void NoteProgramMadeASubreaper();
// Asks the kernel whether this process is a child subreaper now, and notes
// it if so (one prctl): before a fork, for the child's helper. Allocates
// nothing.
void NoteIfChildSubreaper();

}  // namespace dlprof

#endif  // DLPROF_CORE_COLLECTOR_PROCESS_H_
