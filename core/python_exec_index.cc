#include "core/python_exec_index.h"

#include <algorithm>
#include <climits>
#include <utility>

namespace dlprof {

void ExecNoteIndex::Add(ExecNote in) {
  if (in.code == 0) return;
  if (count_ >= kMaxNotes) {
    forgotten_ += count_;
    by_address_.clear();
    count_ = 0;
  }
  std::vector<Note>& notes = by_address_[in.code];
  if (!notes.empty()) {
    Note& last = notes.back();
    // The same code run again (or made again alike): the first note says it all.
    if (last.identity == in.identity && last.first_line == in.first_line &&
        last.qualname == in.qualname && last.filename == in.filename) {
      return;
    }
    if (last.gone_ns == 0) last.gone_ns = in.time_ns;  // another code took its place
  }
  Note n;
  n.identity = in.identity;
  n.time_ns = in.time_ns;
  n.first_line = in.first_line;
  n.qualname = std::move(in.qualname);
  n.filename = std::move(in.filename);
  // Notes come in the order their slots were claimed, which is their time
  // order for one thread; keep them sorted for writers on several threads.
  auto at = std::upper_bound(notes.begin(), notes.end(), n.time_ns,
                             [](int64_t t, const Note& e) { return t < e.time_ns; });
  notes.insert(at, std::move(n));
  ++count_;
}

ExecNoteIndex::Note* ExecNoteIndex::Before(uintptr_t code, int64_t time_ns, int64_t* next_ns) {
  *next_ns = INT64_MAX;
  auto it = by_address_.find(code);
  if (it == by_address_.end()) return nullptr;
  std::vector<Note>& notes = it->second;
  auto after = std::upper_bound(notes.begin(), notes.end(), time_ns,
                                [](int64_t t, const Note& e) { return t < e.time_ns; });
  if (after != notes.end()) *next_ns = after->time_ns;
  return after == notes.begin() ? nullptr : &*(after - 1);
}

void ExecNoteIndex::Prune(int64_t now_ns, int64_t keep_ns,
                          const std::function<bool(uintptr_t, uint64_t)>& alive) {
  for (auto it = by_address_.begin(); it != by_address_.end();) {
    std::vector<Note>& notes = it->second;
    Note& last = notes.back();
    if (last.gone_ns == 0 && !alive(it->first, last.identity)) last.gone_ns = now_ns;
    const size_t before = notes.size();
    notes.erase(std::remove_if(notes.begin(), notes.end(),
                               [&](const Note& n) {
                                 return n.gone_ns != 0 && now_ns - n.gone_ns > keep_ns;
                               }),
                notes.end());
    count_ -= before - notes.size();
    it = notes.empty() ? by_address_.erase(it) : std::next(it);
  }
}

}  // namespace dlprof
