// stacks.folded: the collapsed-stack format of flamegraph.pl and speedscope,
// "root;...;leaf count" per line, with the stage path as the root frames.
#include <map>

#include "reports/report_writer.h"

namespace dlprof {
namespace {

// Folded frames are separated by ';' and end at the space before the count:
// neither may appear inside a frame, nor may a newline.
std::string CleanFrame(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == ';') out += ':';
    else if (c == '\n' || c == '\r' || c == '\t' || c == ' ') out += '_';
    else out += c;
  }
  return out.empty() ? "?" : out;
}

class FoldedWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "stacks.folded"; }
  std::string Render(const Profile& p, const Analysis&) const override {
    std::map<std::string, int64_t> folded;
    for (const Sample& s : p.samples) {
      if (s.kind != SampleKind::kCpu || s.count <= 0) continue;
      std::string line;
      for (uint32_t st : p.stage_paths[s.stage_path]) {
        line += "[stage " + CleanFrame(p.stages[st]) + "];";
      }
      const auto& stack = p.stacks[s.stack];
      for (auto it = stack.rbegin(); it != stack.rend(); ++it) {  // root first
        const Location& loc = p.locations[*it];
        if (loc.frames.empty()) {
          char buf[32];
          snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(loc.address));
          line += buf;
          line += ';';
          continue;
        }
        // Frames are innermost first: the outermost (real) function comes first here.
        for (auto f = loc.frames.rbegin(); f != loc.frames.rend(); ++f) {
          line += CleanFrame(f->function) + ";";
        }
      }
      if (line.empty()) line = "[unknown];";
      line.pop_back();
      folded[line] += s.count;
    }
    std::string out;
    for (const auto& [stack, count] : folded) out += stack + " " + std::to_string(count) + "\n";
    return out;
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeFoldedWriter() { return std::make_unique<FoldedWriter>(); }

}  // namespace dlprof
