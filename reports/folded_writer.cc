// stacks.folded: the collapsed-stack format of flamegraph.pl and speedscope,
// "root;...;leaf count" per line, with the stage path as the root frames.
#include <map>
#include <unordered_map>

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

class FoldedWriter : public ReportWriter {
 public:
  // A location's frames, outermost (the real function) first, each followed
  // by ';'. Built once per location.
  const std::string& Fragment(const Profile& p, uint32_t id) const {
    if (fragments_.size() != p.locations.size()) fragments_.assign(p.locations.size(), "");
    std::string& out = fragments_[id];
    if (!out.empty()) return out;
    const Location& loc = p.locations[id];
    if (loc.frames.empty()) {
      char buf[32];
      snprintf(buf, sizeof(buf), "0x%llx;", static_cast<unsigned long long>(loc.address));
      return out = buf;
    }
    for (auto f = loc.frames.rbegin(); f != loc.frames.rend(); ++f) out += CleanFrame(f->function) + ";";
    return out;
  }

  std::string file_name() const override { return "stacks.folded"; }
  std::string Render(const Profile& p, const Analysis&) const override {
    // Sum per (stage path, stack) first: far fewer pairs than samples.
    std::unordered_map<uint64_t, int64_t> counts;
    for (const Sample& s : p.samples) {
      if (s.kind != SampleKind::kCpu || s.count <= 0) continue;
      counts[static_cast<uint64_t>(s.stage_path) << 32 | s.stack] += s.count;
    }
    std::map<std::string, int64_t> folded;
    for (const auto& [pair, count] : counts) {
      Sample s;
      s.stage_path = static_cast<uint32_t>(pair >> 32);
      s.stack = static_cast<uint32_t>(pair);
      std::string line;
      for (uint32_t st : p.stage_paths[s.stage_path]) {
        line += "[stage " + CleanFrame(p.stages[st]) + "];";
      }
      const auto& stack = p.stacks[s.stack];
      for (auto it = stack.rbegin(); it != stack.rend(); ++it) line += Fragment(p, *it);  // root first
      if (line.empty()) line = "[unknown];";
      line.pop_back();
      folded[line] += count;
    }
    fragments_.clear();
    std::string out;
    for (const auto& [stack, count] : folded) out += stack + " " + std::to_string(count) + "\n";
    return out;
  }

 private:
  mutable std::vector<std::string> fragments_;
};

}  // namespace

std::unique_ptr<ReportWriter> MakeFoldedWriter() { return std::make_unique<FoldedWriter>(); }

}  // namespace dlprof
