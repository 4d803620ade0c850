// The collector's table of the Python code objects that samples name: each
// code object the signal handler recorded becomes an id, written once in a
// DLPROF_CHUNK_PY_CODES chunk (qualname, file, first line), and each frame a
// stack word with its line (include/dlprof/format.h). Read while the code
// object still exists: the collector drains rings every few tens of ms.
// Not signal-safe; the collector only (the thread, or the collector process
// reading the program's memory from outside: SetMemory).
#ifndef DLPROF_CORE_PYTHON_CODES_H_
#define DLPROF_CORE_PYTHON_CODES_H_

#include <cstdint>
#include <string>
#include <unordered_map>

#include "core/python_code.h"
#include "core/python_exec_index.h"
#include "core/python_frames.h"

namespace dlprof {

class PythonCodeTable {
 public:
  // The stack word (DLPROF_PY_FRAME_BIT | entry | line | id) of one frame as
  // the handler wrote it (code, index and identity words:
  // core/python_frames.h). A code object read before under that address and
  // identity is not read again. One whose address now holds no code object,
  // or another one (freed since the sample, as the interpreter frees a
  // module's code once it ran), becomes the "[unknown python code]" entry,
  // keeping its line and entry mark: a frame is never named after another
  // function, and never dropped (the reader's merge counts the runs) --
  // unless the audit hook noted that code when exec() ran it (a module's, a
  // class body's: core/python_exec_index.h): it is named after the note, line
  // 0. `time_ns` is the sample's (CLOCK_MONOTONIC): notes at that address
  // tell which object was there then.
  uint64_t FrameWord(const PythonRuntime& py, uint64_t code_word, uint64_t index_word,
                     uint64_t identity, int64_t time_ns);

  // Takes the hook's new notes, and once a second forgets those of code gone
  // for a while (collector ticks).
  void TakeExecNotes(const PythonRuntime& py, int64_t now_ns);

  // Where code objects are read: this process's own memory (the default),
  // or the program's from the collector process (core/memory_view.h).
  // `memory` outlives the table.
  void SetMemory(const MemoryView* memory) { memory_ = memory; }

  // The hook's notes, for tests.
  ExecNoteIndex& exec_notes() { return notes_; }

  // The PY_CODES payload of ids not written yet; false when there are none.
  bool TakeChunk(std::string* payload);

  uint64_t unreadable() const { return unreadable_; }
  uint64_t named_by_exec_notes() const { return named_by_notes_; }

 private:
  struct Entry {
    uint32_t id = 0;
    uint64_t identity = 0;
    int64_t read_ns = 0;  // when it was read (CLOCK_MONOTONIC)
    PyCodeInfo info;
  };
  uint32_t AddEntry(const std::string& qualname, const std::string& filename, int first_line);
  void TakeNewNotes();  // from the hook's ring into notes_
  // Bounded: a program that compiles code without end (exec, lambdas in a
  // loop) makes new entries; past the bound the cache starts again (ids go on).
  static constexpr size_t kMaxEntries = 1 << 16;
  std::unordered_map<uintptr_t, Entry> by_address_;
  uint32_t next_id_ = 1;
  uint32_t unknown_id_ = 0;  // the "[unknown python code]" entry, once needed
  std::string pending_;
  uint32_t pending_count_ = 0;
  uint64_t unreadable_ = 0;
  uint64_t named_by_notes_ = 0;
  ExecNoteIndex notes_;
  int64_t last_prune_ns_ = 0;
  const MemoryView* memory_ = &PythonCodeReader::OwnMemoryView();
};

}  // namespace dlprof

#endif  // DLPROF_CORE_PYTHON_CODES_H_
