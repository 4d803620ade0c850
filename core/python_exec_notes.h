// What the audit hook (core/python_exec_hook.cc) saw of the code objects the
// program ran with exec() (each module's code, at import) and of the class
// bodies among their constants: names, file and first line, read on the
// program's thread while the code lives. A module's code is freed once its
// import ran, often before the collector reads it; the collector then names
// its samples from these notes (core/python_exec_index.h).
//
// The hand-off is dlprof's own mmap'd memory (no malloc on the program's
// heap): a bounded ring of fixed slots, many writers (a compare-and-swap to
// claim one), one reader, the collector. A full ring drops the note and
// counts it; a writer never waits.
#ifndef DLPROF_CORE_PYTHON_EXEC_NOTES_H_
#define DLPROF_CORE_PYTHON_EXEC_NOTES_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace dlprof {

// One note as the collector takes it.
struct ExecNote {
  uintptr_t code = 0;
  uint64_t identity = 0;  // PyCodeIdentity's, as the handler computes it
  int64_t time_ns = 0;    // CLOCK_MONOTONIC, before the code ran
  int first_line = 0;
  std::string qualname, filename;
};

// Bytes of names a slot holds (qualname and file name together); a longer
// pair is dropped, not cut.
constexpr size_t kExecNoteTextBytes = 472;

// Maps the ring, once per process (a fork child inherits it). False when it
// cannot. Any thread.
bool StartExecNotes();

// In the collector process: the program's ring, at `arena_ring` (its
// arena root, as StartExecNotes set it), is the one TakeExecNote reads.
// False (nothing changes) for nullptr.
bool UseExecNotesAt(void* arena_ring);

// Writes one note; false (counted) when the ring is full, the names do not
// fit, or StartExecNotes has not run. No allocation, no lock, no system call;
// any thread (the hook's: the program's, holding the GIL).
bool PutExecNote(uintptr_t code, uint64_t identity, int64_t time_ns, int first_line,
                 const char* qualname, size_t qualname_bytes, const char* filename,
                 size_t filename_bytes);

// The reader (the collector only): the next note written, in the order the
// slots were claimed. False when there is none yet (or the next slot is still
// being written: it is taken on a later call).
bool TakeExecNote(ExecNote* out);

// Whether the ring holds at least half its slots unread: the writer wakes
// the collector then rather than drop notes.
bool ExecNotesFilling();

// DLPROF_PY_EXEC_HOOK=0 (a diagnostic): the module gets no hook
// (core/python_exec_hook.cc). Before any Python code imports it.
void DisableExecHook();

uint64_t ExecNotesWritten();
uint64_t ExecNotesDropped();

}  // namespace dlprof

#endif  // DLPROF_CORE_PYTHON_EXEC_NOTES_H_
