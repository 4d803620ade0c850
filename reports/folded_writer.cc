// stacks.folded: the collapsed-stack format of flamegraph.pl and speedscope,
// "root;...;leaf count" per line, with the stage path as the root frames.
#include <algorithm>
#include <utility>
#include <vector>

#include "reports/dense_index.h"
#include "reports/report_writer.h"
#include "reports/utf8.h"

namespace dlprof {
namespace {

// Folded frames are separated by ';' and end at the space before the count:
// neither may appear inside a frame, nor may a newline. The file is UTF-8
// text (flamegraph.pl turns it into SVG, speedscope decodes it): invalid
// bytes become U+FFFD, control characters '?'.
std::string CleanFrame(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t bad = 0;
    const size_t n = Utf8At(s, i, &cp, &bad);
    if (n == 0) {
      out += "\xef\xbf\xbd";
      i += bad;
      continue;
    }
    if (cp == ';') out += ':';
    else if (cp == '\n' || cp == '\r' || cp == '\t' || cp == ' ') out += '_';
    else if (IsTerminalControl(cp)) out += '?';
    else out.append(s, i, n);
    i += n;
  }
  return out.empty() ? "?" : out;
}

// A frame as stacks.folded shows it: its function, or for a Python frame
// "qualname (file.py:12)" (FrameDisplayName), the space and parentheses
// kept: flamegraph.pl and speedscope split a line at its last space only,
// and the rest is cleaned as any name is.
std::string FoldedFrame(const Frame& f) {
  const std::string source = f.python ? PythonFrameSource(f) : "";
  if (source.empty()) return CleanFrame(f.function);
  return CleanFrame(f.function) + " (" + CleanFrame(source) + ")";
}

class FoldedWriter : public ReportWriter {
 public:
  // A location's frames, outermost (the real function) first, each followed
  // by ';'. Built once per location.
  const std::string& Fragment(const Profile& p, uint32_t id) const {
    if (fragments_.size() != p.locations.size()) fragments_.assign(p.locations.size(), "");
    std::string& out = fragments_[id];
    if (!out.empty()) return out;
    const Location& loc = p.locations[id];
    if (loc.frames.empty()) return out = CleanFrame(UnsymbolizedName(loc)) + ";";
    for (auto f = loc.frames.rbegin(); f != loc.frames.rend(); ++f) out += FoldedFrame(*f) + ";";
    return out;
  }

  std::string file_name() const override { return "stacks.folded"; }
  std::string Render(const Profile& p, const Analysis&) const override {
    // Sum per (stage path, stack) first: far fewer pairs than samples.
    DenseIndex<uint64_t, U64Hash> pairs;
    std::vector<int64_t> counts;
    for (const Sample& s : p.samples) {
      if (s.kind != SampleKind::kCpu || s.count <= 0) continue;
      bool added;
      const uint32_t i = pairs.Intern(static_cast<uint64_t>(s.stage_path) << 32 | s.stack, &added);
      if (added) counts.push_back(0);
      counts[i] += s.count;
    }
    // One line per pair, then sorted; pairs that fold to the same text (two
    // addresses in one function) become one line with their counts summed.
    std::vector<std::pair<std::string, int64_t>> lines;
    lines.reserve(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      const uint32_t stage_path = static_cast<uint32_t>(pairs.keys()[i] >> 32);
      const uint32_t stack_id = static_cast<uint32_t>(pairs.keys()[i]);
      std::string line;
      for (uint32_t st : p.stage_paths[stage_path]) {
        line += "[stage ";
        line += CleanFrame(p.stages[st]);
        line += "];";
      }
      const auto& stack = p.stacks[stack_id];
      for (auto it = stack.rbegin(); it != stack.rend(); ++it) line += Fragment(p, *it);  // root first
      if (line.empty()) line = "[unknown];";
      line.pop_back();
      lines.emplace_back(std::move(line), counts[i]);
    }
    fragments_.clear();
    std::sort(lines.begin(), lines.end());
    std::string out;
    size_t bytes = 0;
    for (const auto& line : lines) bytes += line.first.size() + 22;  // " count\n"
    out.reserve(bytes);
    for (size_t i = 0; i < lines.size();) {
      int64_t count = 0;
      size_t j = i;
      for (; j < lines.size() && lines[j].first == lines[i].first; ++j) count += lines[j].second;
      out += lines[i].first;
      out += ' ';
      out += std::to_string(count);
      out += '\n';
      i = j;
    }
    return out;
  }

 private:
  mutable std::vector<std::string> fragments_;
};

}  // namespace

std::unique_ptr<ReportWriter> MakeFoldedWriter() { return std::make_unique<FoldedWriter>(); }

}  // namespace dlprof
