#include "readers/tick_cpu_split.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <vector>

namespace dlprof {
namespace {

// A stretch's samples must stand for this much CPU time (16 periods at
// 100 Hz) before the next stretch begins.
constexpr int64_t kMinSampledNs = 160000000;

struct Stretch {
  std::vector<size_t> records;  // wall records, by time
  int64_t begin = 0, end = 0;   // (begin, end]
};

struct PathShare {
  int64_t ticks = 0;    // CPU the ticks gave it
  int64_t sampled = 0;  // CPU its samples stand for
  int64_t latest = 0;   // its last sample's time
};

}  // namespace

int64_t SplitTickCpuBySamples(Profile* profile, uint32_t process, uint32_t running_stack) {
  std::unordered_map<uint32_t, std::vector<std::pair<int64_t, size_t>>> cpu, walls;
  for (size_t i = 0; i < profile->samples.size(); ++i) {
    const Sample& s = profile->samples[i];
    if (s.process != process) continue;
    if (s.kind == SampleKind::kCpu && s.cpu_ns > 0) cpu[s.tid].emplace_back(s.time_ns, i);
    if (s.kind == SampleKind::kWall && s.wall_ns > 0) walls[s.tid].emplace_back(s.time_ns, i);
  }
  std::vector<Sample> added;
  int64_t moved_total = 0;
  for (auto& [tid, records] : walls) {
    auto found = cpu.find(tid);
    if (found == cpu.end()) continue;
    auto& samples = found->second;
    std::sort(samples.begin(), samples.end());
    std::sort(records.begin(), records.end());
    // Stretches of records holding kMinSampledNs of samples or more (the last
    // takes what is left): a stretch shares its CPU time by its samples.
    std::vector<Stretch> stretches(1);
    auto next_sample = samples.begin();
    int64_t periods_cpu = 0;
    for (const auto& [time, index] : records) {
      const Sample& r = profile->samples[index];
      Stretch& st = stretches.back();
      if (st.records.empty()) st.begin = r.time_ns - r.wall_ns;
      st.records.push_back(index);
      st.end = r.time_ns;
      while (next_sample != samples.end() && next_sample->first <= r.time_ns) {
        if (next_sample->first > st.begin) periods_cpu += profile->samples[next_sample->second].cpu_ns;
        ++next_sample;
      }
      if (periods_cpu >= kMinSampledNs) {
        stretches.emplace_back();
        periods_cpu = 0;
      }
    }
    if (stretches.back().records.empty()) stretches.pop_back();
    for (const Stretch& st : stretches) {
      std::map<uint32_t, PathShare> paths;
      int64_t clocks = 0, sampled = 0;
      for (size_t index : st.records) {
        const Sample& r = profile->samples[index];
        paths[r.stage_path].ticks += r.cpu_ns;
        clocks += r.cpu_ns;
      }
      auto first = std::upper_bound(samples.begin(), samples.end(), std::make_pair(st.begin, SIZE_MAX));
      for (auto s = first; s != samples.end() && s->first <= st.end; ++s) {
        const Sample& c = profile->samples[s->second];
        PathShare& p = paths[c.stage_path];
        p.sampled += c.cpu_ns;
        p.latest = std::max(p.latest, c.time_ns);
        sampled += c.cpu_ns;
      }
      if (clocks <= 0 || sampled <= 0) continue;
      // Each path gets what its samples stand for (all of the clocks' time,
      // shared by them, when they stand for more); what the samples did not
      // see (kernel time, mostly in the stage the thread waited in) is
      // shared as the ticks shared it.
      const double scale = sampled > clocks ? static_cast<double>(clocks) / static_cast<double>(sampled) : 1.0;
      const double unseen = std::max(0.0, static_cast<double>(clocks) - static_cast<double>(sampled) * scale);
      for (auto& [path, p] : paths) {
        const double target = static_cast<double>(p.sampled) * scale +
                              unseen * static_cast<double>(p.ticks) / static_cast<double>(clocks);
        const int64_t delta = std::llround(target) - p.ticks;
        if (delta < 0) {
          // Taken from each of its records in proportion to their CPU time,
          // with its on-CPU wall time.
          const double keep = static_cast<double>(p.ticks + delta) / static_cast<double>(p.ticks);
          for (size_t index : st.records) {
            Sample& r = profile->samples[index];
            if (r.stage_path != path || r.cpu_ns <= 0) continue;
            const int64_t take = r.cpu_ns - std::llround(static_cast<double>(r.cpu_ns) * keep);
            r.cpu_ns -= take;
            r.wall_ns -= take;
            r.wait_ns = std::min(r.wait_ns, std::max<int64_t>(0, r.wall_ns - r.cpu_ns));
            moved_total += take;
          }
        } else if (delta > 0) {
          Sample share;
          share.process = process;
          share.tid = tid;
          share.stack = running_stack;
          share.stage_path = path;
          share.kind = SampleKind::kWall;
          share.on_cpu = true;
          share.time_ns = p.latest > 0 ? p.latest : st.end;  // where its samples were
          share.count = 0;
          share.cpu_ns = delta;
          share.wall_ns = delta;
          added.push_back(share);
        }
      }
    }
  }
  profile->samples.insert(profile->samples.end(), added.begin(), added.end());
  return moved_total;
}

}  // namespace dlprof
