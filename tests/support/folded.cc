#include "folded.h"

namespace dlprof::testing {

bool IsFoldedLine(std::string_view line) {
  const size_t space = line.rfind(' ');
  if (space == std::string_view::npos || space == 0) return false;
  const std::string_view count = line.substr(space + 1);
  if (count.empty() || count[0] < '1' || count[0] > '9') return false;
  for (char c : count) {
    if (c < '0' || c > '9') return false;
  }
  std::string_view frames = line.substr(0, space);
  if (frames.find('\n') != std::string_view::npos) return false;
  for (;;) {
    const size_t semi = frames.find(';');
    if (semi == 0) return false;  // an empty frame
    if (semi == std::string_view::npos) return true;
    frames.remove_prefix(semi + 1);
    if (frames.empty()) return false;  // ends in ';'
  }
}

bool HasFoldedChain(std::string_view folded, std::string_view root,
                    std::initializer_list<std::string_view> frames) {
  while (!folded.empty()) {
    const size_t end = folded.find('\n');
    const std::string_view line = folded.substr(0, end);
    folded.remove_prefix(end == std::string_view::npos ? folded.size() : end + 1);
    if (line.substr(0, root.size()) != root) continue;
    size_t at = root.size();
    bool all = true;
    for (std::string_view f : frames) {
      const size_t found = line.find(f, at);
      if (found == std::string_view::npos) {
        all = false;
        break;
      }
      at = found + f.size();
    }
    if (all) return true;
  }
  return false;
}

}  // namespace dlprof::testing
