#include "core/python_codes.h"

#include <dlprof/format.h>

#include <climits>

#include "core/python_codes_seen.h"
#include "core/python_exec_notes.h"
#include "core/signal_handler.h"
#include "core/varint.h"

namespace dlprof {

uint32_t PythonCodeTable::AddEntry(const std::string& qualname, const std::string& filename,
                                   int first_line) {
  const uint32_t id = next_id_++;
  PutVarint(&pending_, id);
  PutBytes(&pending_, qualname);
  PutBytes(&pending_, filename);
  PutVarint(&pending_, static_cast<uint64_t>(first_line > 0 ? first_line : 0));
  ++pending_count_;
  return id;
}

uint64_t PythonCodeTable::FrameWord(const PythonRuntime& py, uint64_t code_word,
                                    uint64_t index_word, uint64_t identity, int64_t time_ns) {
  const uintptr_t code = static_cast<uintptr_t>(code_word & ~kPyEntryBit);
  const uint64_t entry = (code_word & kPyEntryBit) != 0 ? DLPROF_PY_ENTRY_BIT : 0;
  TakeNewNotes();
  // The hook's notes at this address: the one that was there at the sample,
  // and when the next came (then the object there now is another one).
  int64_t next_ns;
  ExecNoteIndex::Note* note = notes_.Before(code, time_ns, &next_ns);
  auto it = by_address_.find(code);
  bool cached = it != by_address_.end() && it->second.identity == identity &&
                // read before the note at the sample's time: an older object's
                (note == nullptr || it->second.read_ns >= note->time_ns) &&
                // read after a note that came after the sample: a newer one's
                it->second.read_ns < next_ns;
  if (!cached && next_ns == INT64_MAX) {
    MarkPyCodeSeen(code, identity);  // samples of it no longer wake the collector
    // Not seen, or another object was there when it was read: read it now,
    // and keep it only if it is still the one the sample saw.
    Entry e;
    PythonCodeReader reader(*py.layout, py.code_type, py.unicode_type, *memory_);
    memory_->BeginReads();
    const bool same =
        identity != 0 && reader.Read(code, &e.info) && reader.Identity(code) == identity;
    memory_->EndReads();
    if (same) {
      if (by_address_.size() >= kMaxEntries) by_address_.clear();
      e.identity = identity;
      e.read_ns = MonotonicNs();
      e.id = AddEntry(e.info.qualname, e.info.filename, e.info.first_line);
      it = by_address_.insert_or_assign(code, std::move(e)).first;
      cached = true;
    }
  }
  if (!cached) {
    // Freed, or replaced, since the sample: named after the hook's note if
    // it is that object's (its identity), never after another code.
    if (note != nullptr && note->identity == identity && identity != 0) {
      if (note->id == 0) note->id = AddEntry(note->qualname, note->filename, note->first_line);
      ++named_by_notes_;
      return DLPROF_PY_FRAME_BIT | entry | note->id;  // line 0: no line table
    }
    ++unreadable_;
    if (unknown_id_ == 0) unknown_id_ = AddEntry("[unknown python code]", "", 0);
    return DLPROF_PY_FRAME_BIT | entry | unknown_id_;
  }
  int line = PythonCodeReader::LineAt(it->second.info, static_cast<int64_t>(index_word));
  if (line < 0 || static_cast<uint64_t>(line) > DLPROF_PY_LINE_MASK) line = 0;
  return DLPROF_PY_FRAME_BIT | entry | static_cast<uint64_t>(line) << DLPROF_PY_LINE_SHIFT |
         it->second.id;
}

void PythonCodeTable::TakeNewNotes() {
  ExecNote n;
  while (TakeExecNote(&n)) notes_.Add(std::move(n));
}

void PythonCodeTable::TakeExecNotes(const PythonRuntime& py, int64_t now_ns) {
  TakeNewNotes();
  constexpr int64_t kPruneEveryNs = 1000000000, kKeepNs = 2000000000;
  if (now_ns - last_prune_ns_ < kPruneEveryNs) return;
  last_prune_ns_ = now_ns;
  PythonCodeReader reader(*py.layout, py.code_type, py.unicode_type, *memory_);
  memory_->BeginReads();
  notes_.Prune(now_ns, kKeepNs, [&](uintptr_t code, uint64_t identity) {
    return reader.LooksLikeLiveCode(code) && reader.Identity(code) == identity;
  });
  memory_->EndReads();
}

bool PythonCodeTable::TakeChunk(std::string* payload) {
  if (pending_count_ == 0) return false;
  payload->clear();
  PutVarint(payload, pending_count_);
  *payload += pending_;
  pending_.clear();
  pending_count_ = 0;
  return true;
}

}  // namespace dlprof
