#include "core/python_codes.h"

#include <dlprof/format.h>

#include "core/fault_handler.h"
#include "core/python_codes_seen.h"
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
                                    uint64_t index_word, uint64_t identity) {
  const uintptr_t code = static_cast<uintptr_t>(code_word & ~kPyEntryBit);
  const uint64_t entry = (code_word & kPyEntryBit) != 0 ? DLPROF_PY_ENTRY_BIT : 0;
  auto it = by_address_.find(code);
  if (it == by_address_.end() || it->second.identity != identity) {
    MarkPyCodeSeen(code, identity);  // samples of it no longer wake the collector
    // Not seen, or another object was there when it was read: read it now,
    // and keep it only if it is still the one the sample saw.
    Entry e;
    PythonCodeReader reader(*py.layout, py.code_type, py.unicode_type);
    // SafeLoads, on the collector (which blocks every signal).
    OpenFaultsForSafeLoads();
    const bool same = identity != 0 && reader.Read(code, &e.info) &&
                      PyCodeIdentity(code, *py.layout) == identity;
    CloseFaultsForSafeLoads(FaultsReturnTo::kProcess);
    if (!same) {
      ++unreadable_;
      if (unknown_id_ == 0) unknown_id_ = AddEntry("[unknown python code]", "", 0);
      return DLPROF_PY_FRAME_BIT | entry | unknown_id_;
    }
    if (by_address_.size() >= kMaxEntries) by_address_.clear();
    e.identity = identity;
    e.id = AddEntry(e.info.qualname, e.info.filename, e.info.first_line);
    it = by_address_.insert_or_assign(code, std::move(e)).first;
  }
  int line = PythonCodeReader::LineAt(it->second.info, static_cast<int64_t>(index_word));
  if (line < 0 || static_cast<uint64_t>(line) > DLPROF_PY_LINE_MASK) line = 0;
  return DLPROF_PY_FRAME_BIT | entry | static_cast<uint64_t>(line) << DLPROF_PY_LINE_SHIFT |
         it->second.id;
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
