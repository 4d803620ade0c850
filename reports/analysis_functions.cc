#include "reports/analysis_functions.h"

#include <algorithm>
#include <map>
#include <set>

namespace dlprof {

namespace {

// Functions only the pipeline's own plumbing runs: naming them would say
// "the DataLoader is slow", which the stage already says.
bool Machinery(const Location& loc, const Frame& f) {
  // "[off-cpu: read]" and the like: made up by dlprof, not a function of the program.
  if (loc.pseudo || (!f.function.empty() && f.function[0] == '[')) return true;
  if (f.unnamed || f.function.empty() || f.function.find("+0x") != std::string::npos) {
    return true;  // unsymbolized
  }
  if (f.python) {
    for (const char* part : {"/torch/utils/data/", "/multiprocessing/", "/threading.py", "/queue.py",
                             "/selectors.py", "/concurrent/futures/"}) {
      if (f.file.find(part) != std::string::npos) return true;
    }
    return false;
  }
  const std::string base = loc.module.substr(loc.module.rfind('/') + 1);
  if (base.rfind("libpython", 0) == 0 || base.rfind("python3", 0) == 0) return true;  // the interpreter
  // dlprof's own: the annotations' wrappers (python/dlprof/_native.c) and the runtime.
  if (base.rfind("libdlprof", 0) == 0 || f.file.find("/dlprof/_native") != std::string::npos ||
      (base.rfind("_native", 0) == 0 && loc.module.find("/dlprof/") != std::string::npos)) {
    return true;
  }
  if (f.function.rfind("__libc_start", 0) == 0) return true;
  for (const char* start : {"_start", "start_thread", "clone3", "clone"}) {
    if (f.function == start) return true;
  }
  return false;
}

// For an io bottleneck, the C library's frames at the leaf of a blocked
// stack are the blocking call's wrapper (read, __libc_read, clock_nanosleep,
// poll), which the stage's "mostly blocked in read()" names already: the
// program's caller of it is what to change.
bool LibcFrame(const Location& loc) {
  const std::string base = loc.module.substr(loc.module.rfind('/') + 1);
  return base.rfind("libc.so", 0) == 0 || base.rfind("libc-", 0) == 0 ||
         base.rfind("libpthread", 0) == 0;
}

struct Acc {
  std::string name, file;
  int start_line = 0;
  double weight = 0;
  double depth_sum = 0;  // frames from the leaf, weighted: which of two is inner
  std::map<int, double> lines;
};

// A trunk function is on (nearly) every whole stack: at least this share of
// them, and within kTrunkOfLargest of the largest share, not on all of them
// because some stacks are cut short (a frame in an object whose unwind rows
// were not decoded yet). A fixed 90% lost the trunk of a run whose stacks
// were cut 10.2% of the time: train.py's `train` (89.8%) was named as the
// culprit above augment_image, which it calls.
constexpr double kTrunkShare = 0.8;
constexpr double kTrunkOfLargest = 0.97;
constexpr double kLeastShare = 0.05;
// The trunk goes down into a callee that holds at least this share of its
// time: "__getitem__" is where the time is spent only in the sense that
// "augment_image", which it calls, is.
constexpr double kCalleeShare = 0.75;

}  // namespace

std::vector<CulpritFunction> BottleneckFunctions(const Profile& profile,
                                                 const std::vector<std::string>& role_of_process,
                                                 const std::string& stage, const std::string& role,
                                                 const std::string& kind, size_t most) {
  std::vector<CulpritFunction> out;
  uint32_t stage_id = 0;  // 0: every sample of the role, in any stage or none
  for (size_t i = 1; i < profile.stages.size() && !stage.empty(); ++i) {
    if (profile.stages[i] == stage) stage_id = static_cast<uint32_t>(i);
  }
  if (!stage.empty() && stage_id == 0) return out;
  const bool io = kind == "io";
  // CPU samples weigh their CPU time; in files without it (all 0), one each.
  bool by_count = true;
  for (const Sample& s : profile.samples) {
    if (s.kind == SampleKind::kCpu && s.cpu_ns > 0) {
      by_count = false;
      break;
    }
  }
  // What a sample weighs for the question asked (0: it does not count): a
  // CPU sample's CPU time, or for an io stage a wall record's blocked time;
  // only samples of the role, and of the stage when one is named.
  auto weight_of = [&](const Sample& s) -> double {
    if (s.process >= role_of_process.size() || role_of_process[s.process] != role) return 0;
    const auto& path = profile.stage_paths[s.stage_path];
    if (stage_id != 0 && (path.empty() || path.back() != stage_id)) return 0;
    if (io && s.kind == SampleKind::kWall) {
      return static_cast<double>(std::max<int64_t>(0, s.wall_ns - s.cpu_ns - s.wait_ns));
    }
    if (!io && s.kind == SampleKind::kCpu) return static_cast<double>(by_count ? s.count : s.cpu_ns);
    return 0;
  };
  // Calls visit(weight, keys) for each sample counted, with its functions'
  // keys (name NUL file) leaf first, each once.
  auto for_each_stack = [&](auto&& visit) {
    std::vector<std::string> keys;
    std::set<std::string> seen;  // once per stack: recursion counts once
    for (const Sample& s : profile.samples) {
      const double weight = weight_of(s);
      if (weight <= 0) continue;
      keys.clear();
      seen.clear();
      for (uint32_t id : profile.stacks[s.stack]) {
        const Location& loc = profile.locations[id];
        for (const Frame& f : loc.frames) {
          if (Machinery(loc, f) || (io && LibcFrame(loc))) {
            keys.emplace_back();  // keeps the depth
            continue;
          }
          std::string key = f.function;
          key.push_back('\0');
          key += f.file;
          keys.push_back(seen.insert(key).second ? std::move(key) : std::string());
        }
      }
      visit(s, weight, keys);
    }
  };
  double total = 0;
  std::map<std::string, Acc> by_function;
  for (const Sample& s : profile.samples) {
    const double weight = weight_of(s);
    if (weight <= 0) continue;
    total += weight;
    std::set<std::string> seen;  // once per stack: recursion counts once
    int depth = 0;
    for (uint32_t id : profile.stacks[s.stack]) {
      const Location& loc = profile.locations[id];
      for (const Frame& f : loc.frames) {
        ++depth;
        if (Machinery(loc, f) || (io && LibcFrame(loc))) continue;
        std::string key = f.function;
        key.push_back('\0');
        key += f.file;
        if (!seen.insert(key).second) continue;
        Acc& a = by_function[key];
        a.name = f.function;
        a.file = f.file;
        if (f.start_line > 0) a.start_line = f.start_line;
        a.weight += weight;
        a.depth_sum += depth * weight;
        if (f.line > 0) a.lines[f.line] += weight;
      }
    }
  }
  if (total <= 0) return out;
  std::vector<const Acc*> ranked;
  const Acc* trunk = nullptr;  // the innermost function on (nearly) every stack
  double largest = 0;
  for (const auto& [key, a] : by_function) largest = std::max(largest, a.weight / total);
  const double trunk_share = std::max(kTrunkShare, kTrunkOfLargest * largest);
  for (const auto& [key, a] : by_function) {
    const double share = a.weight / total;
    if (share >= trunk_share) {
      if (trunk == nullptr || a.depth_sum / a.weight < trunk->depth_sum / trunk->weight) trunk = &a;
    } else if (share >= kLeastShare) {
      ranked.push_back(&a);
    }
  }
  // The trunk goes down while one callee holds most of its time: of a
  // worker's __getitem__ (92% of its CPU) that calls augment_image (83%),
  // augment_image is what to change. Only the trunk: in a library's chain
  // (Image.rotate -> transform -> __transformer) the outer call is the
  // program's, and it stays.
  std::set<const Acc*> visited;  // recursion can nest two functions both ways
  while (trunk != nullptr && visited.insert(trunk).second) {
    std::map<std::string, double> inside;  // callee key -> its weight under the trunk
    const std::string trunk_key = trunk->name + '\0' + trunk->file;
    for_each_stack([&](const Sample&, double weight, const std::vector<std::string>& keys) {
      const auto at = std::find(keys.begin(), keys.end(), trunk_key);
      if (at == keys.end()) return;
      for (auto k = keys.begin(); k != at; ++k) {
        if (!k->empty()) inside[*k] += weight;
      }
    });
    const Acc* callee = nullptr;
    double callee_weight = 0;
    for (const auto& [key, weight] : inside) {
      if (weight < kCalleeShare * trunk->weight) continue;
      const Acc* c = &by_function.at(key);
      // Of callees with the same time, the outer one first: the descent
      // then passes through each of them (augment_image before the
      // ImagingRotate under it), and none is left beside the trunk.
      const bool outer_tie = callee != nullptr && weight == callee_weight &&
                             c->depth_sum / c->weight > callee->depth_sum / callee->weight;
      if (weight > callee_weight || outer_tie) {
        callee = c;
        callee_weight = weight;
      }
    }
    if (callee == nullptr || visited.count(callee)) break;
    ranked.erase(std::remove(ranked.begin(), ranked.end(), callee), ranked.end());
    trunk = callee;
  }
  if (trunk != nullptr) ranked.push_back(trunk);
  std::sort(ranked.begin(), ranked.end(), [](const Acc* x, const Acc* y) {
    if (x->weight != y->weight) return x->weight > y->weight;
    return x->depth_sum / x->weight < y->depth_sum / y->weight;  // the inner one first
  });
  for (const Acc* a : ranked) {
    if (out.size() >= most) break;
    CulpritFunction c;
    c.name = a->name;
    c.file = a->file;
    c.line = a->start_line;
    if (c.line == 0 && !a->lines.empty()) {
      c.line = std::max_element(a->lines.begin(), a->lines.end(), [](const auto& x, const auto& y) {
                 return x.second < y.second;
               })->first;
    }
    c.share = a->weight / total;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace dlprof
