#include "core/python_codes.h"

#include <dlprof/format.h>

#include "core/varint.h"

namespace dlprof {

uint64_t PythonCodeTable::FrameWord(const PythonRuntime& py, uint64_t code_word,
                                    uint64_t index_word) {
  const uintptr_t code = static_cast<uintptr_t>(code_word & ~kPyEntryBit);
  const bool entry = (code_word & kPyEntryBit) != 0;
  PythonCodeReader reader(*py.layout, py.code_type);
  auto it = by_address_.find(code);
  if (it != by_address_.end() && it->second.drain != drain_) {
    if (reader.StillSame(code, it->second.info)) {
      it->second.drain = drain_;
    } else {
      // Another object there now. The sample was taken while its code
      // object was alive: if the address holds no code object at all, that
      // was the one last seen there (typically: the interpreter freed it
      // at exit, before the last drain). If it holds another, that one is
      // read below.
      Entry fresh;
      if (!reader.Read(code, &fresh.info)) {
        it->second.drain = drain_;
      } else {
        by_address_.erase(it);
        it = by_address_.end();
      }
    }
  }
  if (it == by_address_.end()) {
    Entry e;
    if (!reader.Read(code, &e.info)) {
      ++unreadable_;
      return 0;
    }
    if (by_address_.size() >= kMaxEntries) by_address_.clear();
    e.id = next_id_++;
    e.drain = drain_;
    PutVarint(&pending_, e.id);
    PutBytes(&pending_, e.info.qualname);
    PutBytes(&pending_, e.info.filename);
    PutVarint(&pending_, static_cast<uint64_t>(e.info.first_line > 0 ? e.info.first_line : 0));
    ++pending_count_;
    it = by_address_.emplace(code, std::move(e)).first;
  }
  const int64_t index = static_cast<int64_t>(index_word);
  int line = PythonCodeReader::LineAt(it->second.info, index);
  if (line < 0 || static_cast<uint64_t>(line) > DLPROF_PY_LINE_MASK) line = 0;
  return DLPROF_PY_FRAME_BIT | (entry ? DLPROF_PY_ENTRY_BIT : 0) |
         static_cast<uint64_t>(line) << DLPROF_PY_LINE_SHIFT | it->second.id;
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
