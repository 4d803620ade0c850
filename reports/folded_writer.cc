// stacks.folded: the collapsed-stack format of flamegraph.pl and speedscope,
// "root;...;leaf count" per line, with the stage path as the root frames.
// stacks.offcpu.folded: the same for blocked time, from the wall records
// of blocked threads, in microseconds: the stack each thread blocked in,
// "[off-cpu: read]" as its leaf (only that frame where no stack was read).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reports/dense_index.h"
#include "reports/report_writer.h"
#include "reports/utf8.h"

namespace dlprof {
namespace {

// Folded frames are separated by ';' and a line ends at its last space, before
// the count: a frame may not hold ';' or a line break, but keeps its spaces
// ("Augment(Image const&, int)"), as flamegraph.pl, inferno and speedscope
// split at the last space only. The file is UTF-8 text: invalid bytes become
// U+FFFD, tabs and line breaks a space, other control characters '?'.
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
    else if (cp == '\n' || cp == '\r' || cp == '\t') out += ' ';
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
  explicit FoldedWriter(bool offcpu) : offcpu_(offcpu) {}

  // A location's frames, outermost (the real function) first, each followed
  // by ';'. Built once per location, and only for the lines written.
  const std::string& Fragment(const Profile& p, uint32_t id) const {
    std::string& out = fragments_[id];
    if (!out.empty()) return out;
    const Location& loc = p.locations[id];
    if (loc.frames.empty()) return out = CleanFrame(UnsymbolizedName(loc)) + ";";
    for (auto f = loc.frames.rbegin(); f != loc.frames.rend(); ++f) out += FoldedFrame(*f) + ";";
    return out;
  }
  // Its size, without keeping it: a location on a line that is left out
  // costs no memory.
  uint64_t FragmentSize(const Profile& p, uint32_t id) const {
    uint32_t& size = fragment_sizes_[id];
    if (size != 0) return size - 1;
    const Location& loc = p.locations[id];
    uint64_t n = 0;
    if (loc.frames.empty()) n = CleanFrame(UnsymbolizedName(loc)).size() + 1;
    for (const Frame& f : loc.frames) n += FoldedFrame(f).size() + 1;
    size = static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX - 1) + 1);
    return n;
  }

  std::string file_name() const override {
    return offcpu_ ? "stacks.offcpu.folded" : "stacks.folded";
  }
  std::vector<std::string> warnings() const override { return warnings_; }
  std::string Render(const Profile& p, const Analysis&) const override {
    warnings_.clear();
    // Sum per (stage path, stack) first: far fewer pairs than samples.
    DenseIndex<uint64_t, U64Hash> pairs;
    std::vector<int64_t> counts;
    for (const Sample& s : p.samples) {
      int64_t count = 0;
      if (!offcpu_ && s.kind == SampleKind::kCpu) {
        count = s.count;
      } else if (offcpu_ && s.kind == SampleKind::kWall && !s.on_cpu) {
        count = (s.wall_ns - s.cpu_ns - s.wait_ns) / 1000;  // blocked, in us
      }
      if (count <= 0) continue;
      bool added;
      const uint32_t i = pairs.Intern(static_cast<uint64_t>(s.stage_path) << 32 | s.stack, &added);
      if (added) counts.push_back(0);
      counts[i] += count;
    }
    // Each line repeats its stage path's names and its stack's frames, so a
    // small input can ask for a huge file (a long name 16 deep on thousands
    // of stacks). Past the budget the lines with the fewest samples are
    // left out, their samples summed on one line that says so.
    std::vector<std::string> stage_names(p.stages.size());
    for (size_t i = 0; i < p.stages.size(); ++i) stage_names[i] = "[stage " + CleanFrame(p.stages[i]) + "];";
    fragments_.assign(p.locations.size(), "");
    fragment_sizes_.assign(p.locations.size(), 0);
    const uint64_t budget = FoldedBudget(p.input_bytes, offcpu_);
    std::vector<uint64_t> sizes(pairs.size());
    uint64_t total = 0;
    for (size_t i = 0; i < pairs.size(); ++i) {
      uint64_t n = 22;  // " count\n"
      for (uint32_t st : p.stage_paths[static_cast<uint32_t>(pairs.keys()[i] >> 32)]) {
        n += stage_names[st].size();
      }
      for (uint32_t loc : p.stacks[static_cast<uint32_t>(pairs.keys()[i])]) n += FragmentSize(p, loc);
      sizes[i] = n;
      total += n;
    }
    std::vector<uint32_t> kept(pairs.size());
    for (size_t i = 0; i < kept.size(); ++i) kept[i] = static_cast<uint32_t>(i);
    int64_t left_out_samples = 0;
    if (total > budget) {
      std::stable_sort(kept.begin(), kept.end(),
                       [&](uint32_t a, uint32_t b) { return counts[a] > counts[b]; });
      uint64_t used = 0;
      size_t n = 0;
      while (n < kept.size() && used + sizes[kept[n]] <= budget) used += sizes[kept[n++]];
      for (size_t i = n; i < kept.size(); ++i) left_out_samples += counts[kept[i]];
      warnings_.push_back(file_name() + ": " + std::to_string(kept.size() - n) + " of " +
                          std::to_string(kept.size()) + " (stage path, stack) lines left out, their " +
                          std::to_string(left_out_samples) + (offcpu_ ? " us" : " samples") +
                          " on one \"" + LeftOut() +
                          "\" line: all of them would take " + ByteCount(total) + ", past " +
                          ByteCount(budget) + " (" +
                          std::to_string(kOutputBytesPerInputByte / BudgetShare(offcpu_)) +
                          " times the input's bytes plus " +
                          ByteCount(kOutputSlackBytes / BudgetShare(offcpu_)) + ")");
      kept.resize(n);
    }
    // One line per pair, then sorted; pairs that fold to the same text (two
    // addresses in one function) become one line with their counts summed.
    std::vector<std::pair<std::string, int64_t>> lines;
    lines.reserve(kept.size() + 1);
    for (uint32_t i : kept) {
      const uint32_t stage_path = static_cast<uint32_t>(pairs.keys()[i] >> 32);
      const uint32_t stack_id = static_cast<uint32_t>(pairs.keys()[i]);
      std::string line;
      line.reserve(sizes[i]);
      for (uint32_t st : p.stage_paths[stage_path]) line += stage_names[st];
      const auto& stack = p.stacks[stack_id];
      for (auto it = stack.rbegin(); it != stack.rend(); ++it) line += Fragment(p, *it);  // root first
      if (line.empty()) line = "[unknown];";
      line.pop_back();
      lines.emplace_back(std::move(line), counts[i]);
    }
    if (left_out_samples > 0) lines.emplace_back(LeftOut(), left_out_samples);
    fragments_.clear();
    fragment_sizes_.clear();
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
  std::string LeftOut() const { return "[stacks left out: past " + file_name() + "'s budget]"; }

  // Half the budget of all outputs (readers/profile.h) for stacks.folded,
  // an eighth for stacks.offcpu.folded (wall records are run-length encoded:
  // far fewer lines): the rest is for the other files.
  static uint64_t BudgetShare(bool offcpu) { return offcpu ? 8 : 2; }
  static uint64_t FoldedBudget(uint64_t input_bytes, bool offcpu) {
    return OutputBudget(input_bytes) / BudgetShare(offcpu);
  }
  static std::string ByteCount(uint64_t n) {
    return n >= (uint64_t{1} << 20) ? std::to_string(n >> 20) + " MiB" : std::to_string(n) + " bytes";
  }

  mutable std::vector<std::string> fragments_;
  mutable std::vector<uint32_t> fragment_sizes_;  // 1 + size, 0: not measured yet
  mutable std::vector<std::string> warnings_;
  const bool offcpu_;
};

}  // namespace

std::unique_ptr<ReportWriter> MakeFoldedWriter() { return std::make_unique<FoldedWriter>(false); }
std::unique_ptr<ReportWriter> MakeOffCpuFoldedWriter() {
  return std::make_unique<FoldedWriter>(true);
}

}  // namespace dlprof
