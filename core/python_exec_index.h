// The collector's index of the audit hook's notes (core/python_exec_notes.h)
// by code address, in time order. A sampled code object the collector can no
// longer read is named after the note made at its address at or before the
// sample, if that note has the sample's identity: a module's code freed and
// the next module's made at its address, with a name and file object made
// where the first one's were, has the same identity (issue 12, session 20),
// and only the time tells them apart. A note made at the address after the
// sample also says the object there now is not the sampled one.
// Not signal-safe; the collector thread only.
#ifndef DLPROF_CORE_PYTHON_EXEC_INDEX_H_
#define DLPROF_CORE_PYTHON_EXEC_INDEX_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/python_exec_notes.h"

namespace dlprof {

class ExecNoteIndex {
 public:
  struct Note {
    uint64_t identity = 0;
    int64_t time_ns = 0;
    int64_t gone_ns = 0;  // when the collector first found the code gone (0: not yet)
    int first_line = 0;
    std::string qualname, filename;
    uint32_t id = 0;  // its PY_CODES entry, once a frame used it
  };

  // Adds a note (the collector takes them from the ring; tests add their own).
  void Add(ExecNote note);

  // The latest note at `code` made at or before `time_ns` (nullptr: none),
  // and in *next_ns the time of the first one made after it (INT64_MAX: none).
  Note* Before(uintptr_t code, int64_t time_ns, int64_t* next_ns);

  // Forgets the notes of code gone for more than `keep_ns` (replaced by a
  // later note, or `alive(code, identity)` false since then): a sample of it
  // waits in a ring for a tick or two, not seconds. Bounded: past kMaxNotes
  // every note is forgotten (counted).
  void Prune(int64_t now_ns, int64_t keep_ns, const std::function<bool(uintptr_t, uint64_t)>& alive);

  size_t size() const { return count_; }
  uint64_t forgotten() const { return forgotten_; }

  static constexpr size_t kMaxNotes = 1 << 15;

 private:
  std::unordered_map<uintptr_t, std::vector<Note>> by_address_;
  size_t count_ = 0;
  uint64_t forgotten_ = 0;
};

}  // namespace dlprof

#endif  // DLPROF_CORE_PYTHON_EXEC_INDEX_H_
