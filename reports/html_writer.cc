// report.html: one self-contained page (inline CSS and JS, no network) that
// shows the verdict first, then the evidence: step times, buffer occupancy,
// a timeline of every thread, stages, processes, a flame graph, and the
// profiler's own cost.
//
// The page is reports/html/report.{html,css,js}, embedded at build time
// (reports/html/embed.cmake). This file only turns the Profile and Analysis
// into one JSON document that the page's script renders with textContent, so
// no name from the profiled program is ever parsed as HTML.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "reports/analysis_json.h"
#include "reports/dense_index.h"
#include "reports/html_page.h"
#include "reports/report_writer.h"
#include "reports/timeline_data.h"
#include "reports/timeline_json.h"

namespace dlprof {
namespace html_templates {
// Generated from reports/html/ by embed.cmake.
extern const char kReportHtml[];
extern const unsigned long kReportHtmlSize;
extern const char kReportCss[];
extern const unsigned long kReportCssSize;
extern const char kReportJs[];
extern const unsigned long kReportJsSize;
extern const char kTimelineJs[];
extern const unsigned long kTimelineJsSize;
}  // namespace html_templates

namespace {

using nlohmann::json;

// Flame graphs past this many nodes merge their smallest frames into their
// callers: the page stays small and fast for big profiles.
constexpr size_t kMaxFlameNodes = 20000;
// Charts past this many steps or buffer snapshots are drawn from buckets.
constexpr size_t kMaxSteps = 2000;
constexpr size_t kMaxBufferPoints = 2000;

double Round(double v, double scale = 1e6) { return std::round(v * scale) / scale; }

// Node kinds, as the page colours them.
enum FrameKind : int { kStageFrame = 0, kFunction = 1, kUnsymbolized = 2, kPseudo = 3, kPython = 4 };

// The calling-context tree of some samples, stage path first, aggregated
// here so that the page holds one node per distinct path rather than one per
// sample. Self values are kept per process so that the page can filter by
// process and role without the samples.
class FlameTree {
 public:
  FlameTree() { nodes_.push_back({0, Name("all"), kPseudo, {}}); }

  uint32_t Child(uint32_t parent, const std::string& name, int kind) {
    return ChildById(parent, Name(name), kind);
  }

  // The same, for a name already interned with Name(): no string hashing.
  uint32_t ChildById(uint32_t parent, uint32_t id, int kind) {
    bool added;
    // Node 0 is the root; every other node is the child one key made.
    const uint32_t node = 1 + index_.Intern((static_cast<uint64_t>(parent) << 32) | id, &added);
    if (added) nodes_.push_back({parent, id, kind, {}});
    return node;
  }

  void AddSelf(uint32_t node, uint32_t process, int64_t value) {
    auto& self = nodes_[node].self;
    for (auto& [proc, v] : self) {
      if (proc == process) {
        v += value;
        return;
      }
    }
    self.push_back({process, value});
  }

  // Columnar JSON: parent, name (into names), kind, self as flat
  // [process, value, ...]. Parents come before their children.
  json ToJson(size_t max_nodes) const {
    const size_t n = nodes_.size();
    std::vector<int64_t> total(n, 0);
    std::vector<int> depth(n, 0);
    for (size_t i = 1; i < n; ++i) depth[i] = depth[nodes_[i].parent] + 1;
    for (size_t i = n; i-- > 0;) {
      for (const auto& [proc, v] : nodes_[i].self) total[i] += v;
      if (i > 0) total[nodes_[i].parent] += total[i];
    }
    // Keep the heaviest nodes: a caller weighs at least as much as its callees
    // and is shallower, so it sorts first and the kept nodes form a tree.
    std::vector<uint32_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
    std::vector<bool> keep(n, true);
    if (n > max_nodes) {
      std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        if (total[a] != total[b]) return total[a] > total[b];
        return depth[a] < depth[b];
      });
      std::fill(keep.begin(), keep.end(), false);
      for (size_t i = 0; i < max_nodes; ++i) keep[order[i]] = true;
    }
    // A dropped node's samples go to its nearest kept caller.
    std::vector<std::vector<std::pair<uint32_t, int64_t>>> self(n);
    std::vector<uint32_t> kept_ancestor(n, 0);
    for (size_t i = 0; i < n; ++i) {
      kept_ancestor[i] = keep[i] ? static_cast<uint32_t>(i) : kept_ancestor[nodes_[i].parent];
      auto& dst = self[kept_ancestor[i]];
      for (const auto& [proc, v] : nodes_[i].self) {
        auto it = std::find_if(dst.begin(), dst.end(), [p = proc](auto& e) { return e.first == p; });
        if (it == dst.end())
          dst.push_back({proc, v});
        else
          it->second += v;
      }
    }
    std::vector<int64_t> new_index(n, -1);
    json parent = json::array(), name = json::array(), kind = json::array(), selfs = json::array();
    std::unordered_map<uint32_t, uint32_t> name_index;
    json names = json::array();
    int64_t next = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!keep[i]) continue;
      new_index[i] = next++;
      parent.push_back(i == 0 ? -1 : new_index[nodes_[i].parent]);
      auto [it, inserted] = name_index.try_emplace(nodes_[i].name, names.size());
      if (inserted) names.push_back(names_[nodes_[i].name]);
      name.push_back(it->second);
      kind.push_back(nodes_[i].kind);
      json s = json::array();
      for (const auto& [proc, v] : self[i]) {
        s.push_back(proc);
        s.push_back(v);
      }
      selfs.push_back(std::move(s));
    }
    return {{"names", std::move(names)}, {"parent", std::move(parent)}, {"name", std::move(name)},
            {"kind", std::move(kind)},   {"self", std::move(selfs)},    {"total", total[0]},
            {"nodes_before_cut", n},     {"truncated", n > max_nodes}};
  }

  bool empty() const { return nodes_.size() == 1; }

  uint32_t Name(const std::string& s) {
    auto [it, inserted] = name_ids_.try_emplace(s, static_cast<uint32_t>(names_.size()));
    if (inserted) names_.push_back(s);
    return it->second;
  }

 private:
  struct Node {
    uint32_t parent;
    uint32_t name;
    int kind;
    std::vector<std::pair<uint32_t, int64_t>> self;  // process -> value
  };
  std::vector<Node> nodes_;
  DenseIndex<uint64_t, U64Hash> index_;  // (parent, name) -> node - 1
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> name_ids_;
};

// The flame-graph frames of each location (outermost first) and of each
// stage, as name ids of one tree, computed once per location.
class FrameNames {
 public:
  FrameNames(const Profile& p, FlameTree* tree) : p_(p), tree_(tree), locs_(p.locations.size()) {}

  const std::vector<std::pair<uint32_t, int>>& Location(uint32_t id) {
    auto& out = locs_[id];
    if (!out.empty()) return out;
    const dlprof::Location& loc = p_.locations[id];
    if (loc.frames.empty()) {
      out.push_back({tree_->Name(UnsymbolizedName(loc)), kUnsymbolized});
      return out;
    }
    for (auto f = loc.frames.rbegin(); f != loc.frames.rend(); ++f) {  // outermost first
      // A Python frame: "qualname (file.py:12)", as in stacks.folded.
      const std::string name = FrameDisplayName(*f);
      out.push_back({tree_->Name(name.empty() ? "?" : name),
                     loc.pseudo ? kPseudo : f->python ? kPython : kFunction});
    }
    return out;
  }

 private:
  const Profile& p_;
  FlameTree* tree_;
  std::vector<std::vector<std::pair<uint32_t, int>>> locs_;
};

// Appends a sample's stage path and native stack, root first, below the root.
uint32_t AddPath(const Profile& p, const Sample& s, FlameTree* tree, FrameNames* names) {
  uint32_t node = 0;
  if (s.stage_path < p.stage_paths.size()) {
    for (uint32_t st : p.stage_paths[s.stage_path]) {
      node = tree->Child(node, st < p.stages.size() ? p.stages[st] : "?", kStageFrame);
    }
  }
  if (s.stack >= p.stacks.size()) return node;
  const auto& stack = p.stacks[s.stack];
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {  // leaf first in the model
    if (*it >= p.locations.size()) continue;
    for (const auto& [name, kind] : names->Location(*it)) node = tree->ChildById(node, name, kind);
  }
  return node;
}

json FlameJson(const Profile& p) {
  // CPU samples: where the CPU time goes, by stage and function.
  FlameTree cpu, wall;
  FrameNames cpu_names(p, &cpu), wall_names(p, &wall);
  // Millions of samples share a few thousand (stage path, stack) pairs: walk
  // each pair's frames once and remember its leaf node.
  DenseIndex<uint64_t, U64Hash> cpu_pairs, wall_pairs, wait_pairs;  // wait: by stage path
  std::vector<uint32_t> cpu_leaf, wall_leaf, wait_leaf;  // by pair
  auto key = [](const Sample& s, bool on_cpu) {
    return (static_cast<uint64_t>(s.stage_path) << 33) | (static_cast<uint64_t>(s.stack) << 1) |
           (on_cpu ? 1 : 0);
  };
  for (const Sample& s : p.samples) {
    if (s.process >= p.processes.size()) continue;
    if (s.kind == SampleKind::kCpu) {
      if (s.count <= 0) continue;
      bool added;
      const uint32_t pair = cpu_pairs.Intern(key(s, true), &added);
      if (added) {
        uint32_t node = AddPath(p, s, &cpu, &cpu_names);
        if (node == 0 || (s.stack < p.stacks.size() && p.stacks[s.stack].empty())) {
          node = cpu.Child(node, "[no stack]", kPseudo);
        }
        cpu_leaf.push_back(node);
      }
      cpu.AddSelf(cpu_leaf[pair], s.process, s.count);
    } else if (s.wall_ns > 0) {
      // Wall ticks: where the threads' time goes, on and off CPU, in µs.
      bool added;
      const uint32_t pair = wall_pairs.Intern(key(s, s.on_cpu), &added);
      if (added) {
        uint32_t node = AddPath(p, s, &wall, &wall_names);
        // The runtime's pseudo frame ("[off-cpu: read]") says where, when it has one.
        if (s.stack >= p.stacks.size() || p.stacks[s.stack].empty()) {
          node = wall.Child(node, s.on_cpu ? "[on-cpu]" : "[off-cpu]", kPseudo);
        }
        wall_leaf.push_back(node);
      }
      // Three states: a record's wait for a core is its own frame under the
      // stage path, the rest goes to the state its ticks saw.
      const int64_t wait_us = s.wait_ns / 1000;
      wall.AddSelf(wall_leaf[pair], s.process, std::max<int64_t>(1, (s.wall_ns - s.wait_ns) / 1000));
      if (wait_us > 0) {
        const uint32_t wpair = wait_pairs.Intern(s.stage_path, &added);
        if (added) {
          Sample path_only = s;
          path_only.stack = 0;
          wait_leaf.push_back(
              wall.Child(AddPath(p, path_only, &wall, &wall_names), "[waiting for a core]", kPseudo));
        }
        wall.AddSelf(wait_leaf[wpair], s.process, wait_us);
      }
    }
  }
  json views = json::array();
  if (!cpu.empty() || wall.empty()) {
    json v = cpu.ToJson(kMaxFlameNodes);
    v["id"] = "cpu";
    v["title"] = "CPU samples";
    v["unit"] = "samples";
    views.push_back(std::move(v));
  }
  if (!wall.empty()) {
    json v = wall.ToJson(kMaxFlameNodes);
    v["id"] = "wall";
    v["title"] = "Wall time (all states)";  // running, waiting for a core, blocked: its frames say
    v["unit"] = "us";
    views.push_back(std::move(v));
  }
  return views;
}

json StepsJson(const StepStats& s) {
  json j = {{"count", s.count},
            {"warmup_dropped", s.warmup_dropped},
            {"baseline_count", s.baseline_count},
            {"median_s", Round(s.median_s)},
            {"p90_s", Round(s.p90_s)},
            {"p99_s", Round(s.p99_s)},
            {"mean_s", Round(s.mean_s)},
            {"data_wait_median_s", Round(s.data_wait_median_s)},
            {"data_wait_p90_s", Round(s.data_wait_p90_s)},
            {"data_wait_fraction", Round(s.data_wait_fraction)},
            {"baseline_median_s", Round(s.baseline_median_s)},
            {"distortion", Round(s.distortion)}};
  // Per step, or per bucket of consecutive steps when there are too many to draw.
  const size_t n = std::min(s.step_s.size(), s.wait_s.size());
  const size_t per = n > kMaxSteps ? (n + kMaxSteps - 1) / kMaxSteps : 1;
  json step = json::array(), wait = json::array();
  for (size_t i = 0; i < n; i += per) {
    double st = 0, w = 0;
    size_t k = 0;
    for (; k < per && i + k < n; ++k) st += s.step_s[i + k], w += s.wait_s[i + k];
    step.push_back(Round(st / k));
    wait.push_back(Round(w / k));
  }
  j["step_s"] = std::move(step);
  j["wait_s"] = std::move(wait);
  j["steps_per_bar"] = per;
  return j;
}

json BuffersJson(const Profile& p, const Analysis& a) {
  json out = json::array();
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const BufferSeries& b = p.buffers[i];
    json j;
    if (i < a.buffers.size()) {
      const BufferStats& s = a.buffers[i];
      j = {{"mean_occupancy", Round(s.mean_occupancy)},
           {"empty_fraction", Round(s.empty_fraction)},
           {"full_fraction", Round(s.full_fraction)}};
    }
    j["name"] = b.name;
    j["capacity"] = b.capacity;
    j["process"] = b.process;
    j["snapshots"] = b.snapshots.size();
    // Seconds from the profile's start, size; thinned (ThinSnapshots).
    std::vector<BufferSnapshot> snaps = b.snapshots;
    std::stable_sort(snaps.begin(), snaps.end(),
                     [](const auto& x, const auto& y) { return x.time_ns < y.time_ns; });
    json pts = json::array();
    auto push = [&](const BufferSnapshot& s) {
      pts.push_back(Round((s.time_ns - a.start_ns) / 1e9));
      pts.push_back(s.size);
    };
    for (const BufferSnapshot& s : ThinSnapshots(snaps, kMaxBufferPoints)) push(s);
    j["points"] = std::move(pts);
    out.push_back(std::move(j));
  }
  return out;
}

json DataJson(const Profile& p, const Analysis& a) {
  // summary.json's content, with the detail only a page can draw on top.
  json j = AnalysisJson(a);
  j["verdict"]["worker_imbalance"] = Round(a.verdict.worker_imbalance);
  j["verdict"]["slowest_worker"] = a.verdict.slowest_worker;
  j["steps"] = StepsJson(a.steps);
  j["buffers"] = BuffersJson(p, a);
  // Indexed like Profile::processes: flame graph self values refer to them.
  j["processes"] = json::array();
  for (size_t i = 0; i < p.processes.size(); ++i) {
    const Process& proc = p.processes[i];
    json pj = {{"pid", proc.pid},       {"ppid", proc.ppid},       {"role", ProcessRole(p, a, i)},
               {"worker", proc.worker}, {"command", proc.command}, {"host", proc.host},
               {"hz", proc.hz},         {"mode", proc.mode}};
    if (i < a.processes.size()) {
      const ProcessStats& s = a.processes[i];
      pj.update({{"samples", s.samples},
                 {"dropped", s.dropped},
                 {"cpu_s", Round(s.cpu_s)},
                 {"wall_s", Round(s.wall_s)},
                 {"busy_fraction", Round(s.busy_fraction)},
                 {"recorded_role", s.recorded_role},
                 {"role_basis", s.role_basis},
                 {"complete", s.complete},
                 {"end", s.end_reason},
                 {"handler_s", Round(s.handler_s)},
                 {"collector_s", Round(s.collector_s)},
                 {"unwinder", s.unwinder},
                 {"timer", s.timer},
                 {"collector", s.collector}});
      if (!s.python_frames.empty()) pj["python_frames"] = s.python_frames;
    }
    j["processes"].push_back(std::move(pj));
  }
  j["cost"] = std::move(j["profiler"]);
  j.erase("profiler");
  j["flame"] = FlameJson(p);
  j["max_flame_nodes"] = kMaxFlameNodes;
  return j;
}

class HtmlWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "report.html"; }
  std::string Render(const Profile& p, const Analysis& a) const override {
    using namespace html_templates;
    std::string page(kReportHtml, kReportHtmlSize);
    std::string css(kReportCss, kReportCssSize);
    // timeline.js first: it only defines window.dlprofTimeline, which
    // report.js draws inside its own error handling.
    std::string js = std::string(kTimelineJs, kTimelineJsSize) + "\n" +
                     std::string(kReportJs, kReportJsSize);
    // Our own code, but a stray "</" would end its element early.
    if (js.find("</") != std::string::npos || css.find("</") != std::string::npos) {
      throw std::runtime_error("report.js or report.css contains \"</\"");
    }
    // Names come from the profiled program: replace bytes that are not UTF-8.
    std::string doc = DataJson(p, a).dump(-1, ' ', false, json::error_handler_t::replace);
    // The timeline, made as text (up to kMaxTimelineSpans spans), is the
    // object's last member.
    doc.pop_back();  // the object's '}'
    doc += ",\"timeline\":" + TimelineJson(p, a) + "}";
    const std::string data = ScriptSafe(doc);
    // Data last: it is the only part that can be large, and may hold anything.
    ReplaceOnce(&page, "/*DLPROF_CSS*/", css, "report.html");
    ReplaceOnce(&page, "/*DLPROF_JS*/", js, "report.html");
    ReplaceOnce(&page, "/*DLPROF_DATA*/", data, "report.html");
    return page;
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeHtmlWriter() { return std::make_unique<HtmlWriter>(); }

}  // namespace dlprof
