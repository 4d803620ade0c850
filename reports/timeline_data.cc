#include "reports/timeline_data.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

namespace dlprof {
namespace {

// The time a sample stands for, ending at its time stamp.
int64_t Covers(const Sample& s, const Process& p) {
  int64_t ns = s.kind == SampleKind::kWall ? s.wall_ns : s.cpu_ns;
  if (ns <= 0) ns = p.hz > 0 ? 1000000000LL / p.hz : 10000000;
  return ns;
}

int64_t Origin(const Profile& p) {
  int64_t t = INT64_MAX;
  for (const Process& proc : p.processes) {
    if (proc.start_ns > 0) t = std::min(t, proc.start_ns);
  }
  for (const Sample& s : p.samples) {
    if (s.process < p.processes.size()) {
      t = std::min(t, s.time_ns - Covers(s, p.processes[s.process]));
    }
  }
  for (const Interval& iv : p.intervals) t = std::min(t, iv.begin_ns);
  for (const BufferSeries& b : p.buffers) {
    for (const BufferSnapshot& s : b.snapshots) t = std::min(t, s.time_ns);
  }
  return t == INT64_MAX ? 0 : t;
}

// Stage spans of one thread derived from its samples, CPU samples and wall
// ticks merged in time order: the CPU samples resolve short stages while the
// thread runs, the wall ticks carry it through off-CPU stretches. Runs of
// consecutive samples with the same stage path become nested spans, one per
// path level. A gap of more than twice the sampling period (the wall tick's
// where the thread has them) ends every open span.
void SpansFromSamples(const Profile& p, std::vector<const Sample*> samples, TimelineTrack* out,
                      int64_t* dropped) {
  std::vector<TimelineSpan> spans;
  std::stable_sort(samples.begin(), samples.end(),
                   [](const Sample* x, const Sample* y) { return x->time_ns < y->time_ns; });
  // The wall tick period: recorded by the runtime, else (older files, one
  // record per tick) the median wall time of a record.
  int64_t tick = 0;
  if (!samples.empty()) {
    const auto& fields = p.processes[samples.front()->process].fields;
    if (auto it = fields.find("snapshot_ms"); it != fields.end()) {
      tick = std::max(0LL, std::atoll(it->second.c_str())) * 1000000LL;
    }
  }
  std::vector<int64_t> ticks;
  for (const Sample* s : samples) {
    if (tick == 0 && s->kind == SampleKind::kWall && s->wall_ns > 0) ticks.push_back(s->wall_ns);
  }
  if (!ticks.empty()) {
    std::nth_element(ticks.begin(), ticks.begin() + ticks.size() / 2, ticks.end());
    tick = ticks[ticks.size() / 2];
  }
  struct Open {
    uint32_t stage;
    int64_t begin;
    int64_t samples;
  };
  std::vector<Open> open;
  auto close_from = [&](size_t level, int64_t at) {
    while (open.size() > level) {
      const Open& o = open.back();
      if (at > o.begin) {
        TimelineSpan s;
        s.begin_ns = o.begin;
        s.end_ns = at;
        s.stage = o.stage;
        s.arg = o.samples;
        spans.push_back(s);
      }
      open.pop_back();
    }
  };
  int64_t last = INT64_MIN;
  for (const Sample* s : samples) {
    const Process& proc = p.processes[s->process];
    const int64_t covers = Covers(*s, proc);
    int64_t from = s->time_ns - covers;
    if (last != INT64_MIN) {
      if (s->time_ns - last > 2 * std::max(covers, tick)) {
        close_from(0, last);
      } else {
        from = last;
      }
    }
    const auto& path = p.stage_paths[s->stage_path];
    size_t common = 0;
    while (common < open.size() && common < path.size() && open[common].stage == path[common]) {
      ++common;
    }
    close_from(common, from);
    for (size_t i = open.size(); i < path.size(); ++i) open.push_back({path[i], from, 0});
    for (Open& o : open) ++o.samples;  // records: wall ticks carry no CPU sample count
    last = s->time_ns;
  }
  if (last != INT64_MIN) close_from(0, last);
  if (spans.size() > kMaxDerivedSpansPerThread) {
    auto longer = [](const TimelineSpan& x, const TimelineSpan& y) {
      return x.end_ns - x.begin_ns > y.end_ns - y.begin_ns;
    };
    std::nth_element(spans.begin(), spans.begin() + kMaxDerivedSpansPerThread, spans.end(), longer);
    *dropped += static_cast<int64_t>(spans.size() - kMaxDerivedSpansPerThread);
    spans.resize(kMaxDerivedSpansPerThread);
  }
  out->spans.insert(out->spans.end(), spans.begin(), spans.end());
}

// Sorts a track's spans and gives each its lane and depth: a span nests in
// the lane's innermost open span that encloses it, else goes to the next lane.
void AssignLanes(TimelineTrack* t) {
  std::stable_sort(t->spans.begin(), t->spans.end(),
                   [](const TimelineSpan& x, const TimelineSpan& y) {
                     if (x.begin_ns != y.begin_ns) return x.begin_ns < y.begin_ns;
                     return x.end_ns > y.end_ns;
                   });
  std::vector<std::vector<int64_t>> open_ends(1);  // per lane
  for (TimelineSpan& s : t->spans) {
    size_t l = 0;
    for (;; ++l) {
      if (l == open_ends.size()) open_ends.emplace_back();
      auto& ends = open_ends[l];
      while (!ends.empty() && ends.back() <= s.begin_ns) ends.pop_back();
      if (ends.empty() || ends.back() >= s.end_ns) break;
    }
    s.lane = static_cast<uint32_t>(l);
    s.depth = static_cast<uint32_t>(open_ends[l].size());
    open_ends[l].push_back(s.end_ns);
  }
  t->lanes = static_cast<uint32_t>(open_ends.size());
}

}  // namespace

std::vector<BufferSnapshot> ThinSnapshots(const std::vector<BufferSnapshot>& snaps,
                                          size_t max_points) {
  if (snaps.size() <= max_points) return snaps;
  std::vector<BufferSnapshot> out;
  const int64_t t0 = snaps.front().time_ns, t1 = snaps.back().time_ns;
  const size_t buckets = std::max<size_t>(1, max_points / 2);
  const double width = std::max<double>(1, static_cast<double>(t1 - t0) / buckets);
  size_t i0 = 0;
  while (i0 < snaps.size()) {
    size_t bucket = static_cast<size_t>((snaps[i0].time_ns - t0) / width);
    size_t lo = i0, hi = i0, k = i0;
    for (; k < snaps.size() && static_cast<size_t>((snaps[k].time_ns - t0) / width) == bucket;
         ++k) {
      if (snaps[k].size < snaps[lo].size) lo = k;
      if (snaps[k].size > snaps[hi].size) hi = k;
    }
    out.push_back(snaps[std::min(lo, hi)]);
    if (lo != hi) out.push_back(snaps[std::max(lo, hi)]);
    i0 = k;
  }
  return out;
}

const std::string& StageName(const Profile& p, const TimelineSpan& s) {
  static const std::string kUnknown = "?";
  return s.stage < p.stages.size() ? p.stages[s.stage] : kUnknown;
}

Timeline BuildTimeline(const Profile& p, const Analysis& a) {
  Timeline out;
  out.origin_ns = Origin(p);

  // Tracks per process, keyed by (thread, kind): kind 0 stages, 1 steps.
  std::vector<std::map<std::pair<uint32_t, int>, TimelineTrack>> tracks(p.processes.size());
  auto track = [&](uint32_t proc, uint32_t tid, int kind) -> TimelineTrack& {
    TimelineTrack& t = tracks[proc][{tid, kind}];
    if (t.name.empty()) {
      const bool main_thread = static_cast<int>(tid) == p.processes[proc].pid;
      std::string thread =
          main_thread ? "main thread " + std::to_string(tid) : "thread " + std::to_string(tid);
      t.tid = tid;
      t.loop = kind == 1;
      t.name = kind == 0 ? thread : "steps & data waits (" + thread + ")";
      t.sort_index = static_cast<int64_t>(main_thread ? 0 : tid) * 4 + kind;
    }
    return t;
  };

  // Stage spans: the detailed mode's exact enter/exit events where a thread
  // has them, else derived from its samples.
  std::set<std::pair<uint32_t, uint32_t>> has_stage_events;
  for (const Interval& iv : p.intervals) {
    if (iv.process >= p.processes.size() || iv.end_ns < iv.begin_ns) continue;
    if (iv.kind == IntervalKind::kStage) {
      has_stage_events.insert({iv.process, iv.tid});
      TimelineSpan s;
      s.begin_ns = iv.begin_ns;
      s.end_ns = iv.end_ns;
      s.stage = iv.stage;
      TimelineTrack& t = track(iv.process, iv.tid, 0);
      t.from_events = true;
      t.spans.push_back(s);
    }
  }
  std::map<std::pair<uint32_t, uint32_t>, std::vector<const Sample*>> by_thread;
  for (const Sample& s : p.samples) {
    if (s.process >= p.processes.size() || has_stage_events.count({s.process, s.tid})) continue;
    by_thread[{s.process, s.tid}].push_back(&s);
  }
  for (auto& [key, samples] : by_thread) {
    SpansFromSamples(p, std::move(samples), &track(key.first, key.second, 0),
                     &out.short_spans_left_out);
  }

  // Steps and data waits, numbered per thread in time order.
  std::vector<const Interval*> loop;
  for (const Interval& iv : p.intervals) {
    if (iv.process < p.processes.size() && iv.kind != IntervalKind::kStage &&
        iv.end_ns >= iv.begin_ns) {
      loop.push_back(&iv);
    }
  }
  std::stable_sort(loop.begin(), loop.end(),
                   [](const Interval* x, const Interval* y) { return x->begin_ns < y->begin_ns; });
  std::map<std::pair<uint32_t, uint32_t>, int> step_number;
  for (const Interval* iv : loop) {
    TimelineSpan s;
    s.begin_ns = iv->begin_ns;
    s.end_ns = iv->end_ns;
    if (iv->kind == IntervalKind::kStep) {
      s.kind = SpanKind::kStep;
      s.arg = ++step_number[{iv->process, iv->tid}];
    } else {
      s.kind = SpanKind::kWait;
    }
    track(iv->process, iv->tid, 1).spans.push_back(s);
  }

  for (size_t i = 0; i < p.processes.size(); ++i) {
    const Process& proc = p.processes[i];
    TimelineProcess tp;
    tp.index = static_cast<uint32_t>(i);
    tp.role = ProcessRole(p, a, i);
    tp.label = tp.role == "worker"
                   ? (proc.worker >= 0 ? "worker " + std::to_string(proc.worker) : "worker")
                   : tp.role;
    tp.name = tp.label + " (pid " + std::to_string(proc.pid) + ")";
    if (!proc.command.empty()) tp.name += " " + proc.command;
    if (!proc.host.empty()) tp.name += " @" + proc.host;
    tp.sort_index = tp.role == "main"     ? 0
                    : tp.role == "worker" ? 1 + std::max(proc.worker, -1) + 1
                                          : int64_t{1} << 30;
    for (auto& [key, t] : tracks[i]) {
      AssignLanes(&t);
      tp.tracks.push_back(std::move(t));
    }
    out.processes.push_back(std::move(tp));
  }

  for (const BufferSeries& b : p.buffers) {
    if (b.process >= p.processes.size()) continue;
    TimelineBuffer tb;
    tb.process = b.process;
    tb.name = "buffer " + b.name;
    if (b.capacity > 0) tb.name += " (capacity " + std::to_string(b.capacity) + ")";
    tb.capacity = b.capacity;
    tb.snapshots = b.snapshots;
    std::stable_sort(tb.snapshots.begin(), tb.snapshots.end(),
                     [](const auto& x, const auto& y) { return x.time_ns < y.time_ns; });
    out.buffers.push_back(std::move(tb));
  }
  return out;
}

}  // namespace dlprof
