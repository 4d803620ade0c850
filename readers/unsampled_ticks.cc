#include "readers/unsampled_ticks.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <vector>

namespace dlprof {
namespace {

struct Boundary {
  int64_t t;
  bool enter;  // else an exit
  uint32_t stage;
};

// One stretch of a gap with one stage path.
struct Piece {
  uint32_t path;
  int64_t begin, end;
};

// Shares `total` periods among the pieces in proportion to their length
// (largest remainder, so the shares add up exactly).
std::vector<int64_t> Shares(const std::vector<Piece>& pieces, int64_t total) {
  int64_t wall = 0;
  for (const Piece& p : pieces) wall += p.end - p.begin;
  std::vector<int64_t> shares(pieces.size(), 0);
  if (wall <= 0) return shares;
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const double exact = static_cast<double>(total) * static_cast<double>(pieces[i].end - pieces[i].begin) /
                         static_cast<double>(wall);
    shares[i] = static_cast<int64_t>(exact);
    given += shares[i];
    remainders.emplace_back(exact - static_cast<double>(shares[i]), i);
  }
  std::sort(remainders.begin(), remainders.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total && k < remainders.size(); ++k, ++given) ++shares[remainders[k].second];
  return shares;
}

}  // namespace

int64_t ShareUnsampledTicks(Profile* profile, uint32_t process, int64_t period_ns) {
  if (period_ns <= 0) return 0;
  std::unordered_map<uint32_t, std::vector<Boundary>> boundaries;
  for (const Interval& iv : profile->intervals) {
    if (iv.process != process || iv.kind != IntervalKind::kStage || iv.stage == 0) continue;
    boundaries[iv.tid].push_back({iv.begin_ns, true, iv.stage});
    boundaries[iv.tid].push_back({iv.end_ns, false, iv.stage});
  }
  if (boundaries.empty()) return 0;
  std::unordered_map<uint32_t, std::vector<size_t>> samples;
  // Where the collector's wall ticks saw the thread blocked: [begin, end).
  std::unordered_map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> blocked;
  for (size_t i = 0; i < profile->samples.size(); ++i) {
    const Sample& s = profile->samples[i];
    if (s.process != process || !boundaries.count(s.tid)) continue;
    if (s.kind == SampleKind::kCpu) samples[s.tid].push_back(i);
    if (s.kind == SampleKind::kWall && !s.on_cpu) blocked[s.tid].emplace_back(s.time_ns - s.wall_ns, s.time_ns);
  }
  for (auto& [tid, spans] : blocked) std::sort(spans.begin(), spans.end());
  auto blocked_in = [&](uint32_t tid, int64_t begin, int64_t end) {
    auto it = blocked.find(tid);
    if (it == blocked.end()) return false;
    for (const auto& [b, e] : it->second) {  // few: runs of ticks
      if (b >= end) break;
      if (e > begin) return true;
    }
    return false;
  };
  std::map<std::vector<uint32_t>, uint32_t> path_ids;
  for (uint32_t i = 0; i < profile->stage_paths.size(); ++i) path_ids.emplace(profile->stage_paths[i], i);
  auto intern = [&](const std::vector<uint32_t>& path) {
    auto [it, added] = path_ids.emplace(path, 0);
    if (added) it->second = profile->InternStagePath(path);
    return it->second;
  };
  uint32_t pseudo_stack = 0;
  std::vector<Sample> added;
  int64_t moved_total = 0;
  for (auto& [tid, list] : boundaries) {
    // Exits before enters at the same instant: a stage left and another
    // entered in one call of the clock.
    std::sort(list.begin(), list.end(), [](const Boundary& a, const Boundary& b) {
      return a.t != b.t ? a.t < b.t : (!a.enter && b.enter);
    });
    std::vector<size_t>& order = samples[tid];
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return profile->samples[a].time_ns < profile->samples[b].time_ns;
    });
    for (size_t k = 1; k < order.size(); ++k) {
      const Sample prev = profile->samples[order[k - 1]];
      Sample& s = profile->samples[order[k]];
      const int64_t wall = s.time_ns - prev.time_ns;
      if (s.count <= 1 || wall <= 0) continue;  // a lone period: it was sampled where it ended
      // Off CPU for much of the gap: if the wall ticks saw it blocked, that
      // wall time is not CPU time, and the blocked stage must not gain by it
      // (without such a tick the lost time was a wait for a core).
      if (static_cast<double>(s.count) * static_cast<double>(period_ns) < 0.8 * static_cast<double>(wall) &&
          blocked_in(tid, prev.time_ns, s.time_ns)) {
        continue;
      }
      auto first = std::upper_bound(list.begin(), list.end(), prev.time_ns,
                                    [](int64_t t, const Boundary& b) { return t < b.t; });
      if (first == list.end() || first->t >= s.time_ns) continue;  // no change of stage
      std::vector<uint32_t> path = profile->stage_paths[prev.stage_path];
      std::vector<Piece> pieces;
      int64_t at = prev.time_ns;
      for (auto b = first; b != list.end() && b->t < s.time_ns; ++b) {
        if (b->t > at) pieces.push_back({intern(path), at, b->t});
        at = b->t;
        if (b->enter) {
          path.push_back(b->stage);
        } else {
          auto last = std::find(path.rbegin(), path.rend(), b->stage);
          if (last != path.rend()) path.erase(std::next(last).base(), path.end());
        }
      }
      pieces.push_back({intern(path), at, s.time_ns});
      // Events lost (a full ring) or a path deeper than the runtime keeps:
      // the walk does not arrive where the sample is, so nothing is moved.
      if (pieces.back().path != s.stage_path) continue;
      // All of its periods, its own included: the period that ended at the
      // sample began before it, maybe in another stage.
      const std::vector<int64_t> shares = Shares(pieces, s.count);
      int64_t moved = 0;
      for (size_t i = 0; i < pieces.size(); ++i) {
        if (shares[i] == 0 || pieces[i].path == s.stage_path) continue;
        if (pseudo_stack == 0) {
          Location loc;
          loc.pseudo = true;
          loc.frames.push_back({"[in the kernel: stack not sampled]", "", 0});
          pseudo_stack = profile->InternStack({profile->InternLocation(loc)});
        }
        Sample share;
        share.process = process;
        share.tid = tid;
        share.stack = pseudo_stack;
        share.stage_path = pieces[i].path;
        share.kind = SampleKind::kCpu;
        share.time_ns = pieces[i].begin + (pieces[i].end - pieces[i].begin) / 2;
        share.count = shares[i];
        share.cpu_ns = shares[i] * period_ns;
        added.push_back(share);
        moved += shares[i];
      }
      // What is left is its own path's share; none (a sample a tick after
      // a long system call in another stage) leaves no record of it.
      s.count -= moved;
      s.cpu_ns = s.count * period_ns;
      moved_total += moved;
    }
  }
  profile->samples.erase(std::remove_if(profile->samples.begin(), profile->samples.end(),
                                        [&](const Sample& s) {
                                          return s.process == process && s.kind == SampleKind::kCpu &&
                                                 s.count == 0;
                                        }),
                         profile->samples.end());
  profile->samples.insert(profile->samples.end(), added.begin(), added.end());
  return moved_total;
}

}  // namespace dlprof
