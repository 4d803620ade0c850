// trace.json: the Chrome trace event format (JSON object form), for Perfetto
// and chrome://tracing. One process track per profiled process; per thread, a
// track of stage spans and, for the training loop, a track of steps and data
// waits; buffer occupancy as counters. Only complete ("X") events, so there is
// no begin without an end, and events on one track always nest.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "reports/json_text.h"
#include "reports/report_writer.h"

namespace dlprof {
namespace {

using nlohmann::json;

// Real thread ids stay below 2^22 (pid_max); tracks dlprof makes up (steps,
// overlapping spans) get ids from here, which never collide with them.
constexpr int64_t kSyntheticTidBase = 1000000000;

struct Span {
  int64_t begin_ns = 0, end_ns = 0;
  std::string name;
  const char* cat = "";
  // What "args" holds: {"samples":arg,"source":"samples"}, {"source":"events"},
  // {"step":arg}, or nothing.
  enum class Args : uint8_t { kNone, kSamples, kEvents, kStep } args = Args::kNone;
  int64_t arg = 0;
};

struct Track {
  std::string name;  // thread_name of its first lane
  int64_t tid = 0;   // of its first lane
  int64_t sort_index = 0;
  std::vector<Span> spans;
};

// An event and its JSON text, rendered when it is made: 100k json objects
// would hold an allocation per member until the end.
struct Event {
  double ts = 0;  // µs from the origin
  int order = 0;  // ties: longer spans first so that viewers nest them
  double dur = 0;
  std::string text;
};

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A metadata ("M") event: few per track, so built as a json value.
Event Meta(const json& j) { return {0, 0, 0, Dump(j)}; }

double Us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// The time a sample stands for, ending at its time stamp.
int64_t Covers(const Sample& s, const Process& p) {
  int64_t ns = s.kind == SampleKind::kWall ? s.wall_ns : s.cpu_ns;
  if (ns <= 0) ns = p.hz > 0 ? 1000000000LL / p.hz : 10000000;
  return ns;
}

// Stage spans of one thread derived from its samples, CPU samples and wall
// ticks merged in time order: the CPU samples resolve short stages while the
// thread runs, the wall ticks carry it through off-CPU stretches. Runs of
// consecutive samples with the same stage path become nested spans, one per
// path level. A gap of more than twice the sampling period (the wall tick's
// where the thread has them) ends every open span.
// A thread's sample-derived spans beyond this many keep only the longest:
// a trace with millions of events is too big for the viewers to load.
constexpr size_t kMaxDerivedSpansPerThread = 50000;

void SpansFromSamples(const Profile& p, std::vector<const Sample*> samples, Track* out,
                      int64_t* dropped) {
  Track local;
  Track* track = &local;
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
        Span s;
        s.begin_ns = o.begin;
        s.end_ns = at;
        s.name = p.stages[o.stage];
        s.cat = "stage";
        s.args = Span::Args::kSamples;
        s.arg = o.samples;
        track->spans.push_back(std::move(s));
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
  if (local.spans.size() > kMaxDerivedSpansPerThread) {
    auto longer = [](const Span& x, const Span& y) {
      return x.end_ns - x.begin_ns > y.end_ns - y.begin_ns;
    };
    std::nth_element(local.spans.begin(), local.spans.begin() + kMaxDerivedSpansPerThread,
                     local.spans.end(), longer);
    *dropped += static_cast<int64_t>(local.spans.size() - kMaxDerivedSpansPerThread);
    local.spans.resize(kMaxDerivedSpansPerThread);
  }
  for (Span& sp : local.spans) out->spans.push_back(std::move(sp));
}

class TraceWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "trace.json"; }

  std::string Render(const Profile& p, const Analysis& a) const override {
    const int64_t origin = Origin(p);
    std::vector<Event> meta, events;

    // Process ids as in the profile, unless several merged runs reuse one.
    std::vector<int64_t> trace_pid(p.processes.size());
    std::set<int64_t> used;
    for (size_t i = 0; i < p.processes.size(); ++i) {
      int64_t pid = p.processes[i].pid;
      if (pid <= 0 || !used.insert(pid).second) {
        pid = kSyntheticTidBase + static_cast<int64_t>(i);
        used.insert(pid);
      }
      trace_pid[i] = pid;
    }

    // Tracks per process, keyed by (thread, kind): kind 0 stages, 1 steps.
    std::vector<std::map<std::pair<uint32_t, int>, Track>> tracks(p.processes.size());
    auto track = [&](uint32_t proc, uint32_t tid, int kind) -> Track& {
      Track& t = tracks[proc][{tid, kind}];
      if (t.name.empty()) {
        const bool main_thread = static_cast<int>(tid) == p.processes[proc].pid;
        std::string thread =
            main_thread ? "main thread " + std::to_string(tid) : "thread " + std::to_string(tid);
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
        Span s;
        s.begin_ns = iv.begin_ns;
        s.end_ns = iv.end_ns;
        s.name = iv.stage < p.stages.size() ? p.stages[iv.stage] : "?";
        s.cat = "stage";
        s.args = Span::Args::kEvents;
        track(iv.process, iv.tid, 0).spans.push_back(std::move(s));
      }
    }
    std::map<std::pair<uint32_t, uint32_t>, std::vector<const Sample*>> by_thread;
    for (const Sample& s : p.samples) {
      if (s.process >= p.processes.size() || has_stage_events.count({s.process, s.tid})) continue;
      by_thread[{s.process, s.tid}].push_back(&s);
    }
    int64_t spans_dropped = 0;
    for (auto& [key, samples] : by_thread) {
      SpansFromSamples(p, std::move(samples), &track(key.first, key.second, 0), &spans_dropped);
    }

    // Steps and data waits, numbered per thread in time order.
    std::vector<const Interval*> loop;
    for (const Interval& iv : p.intervals) {
      if (iv.process < p.processes.size() && iv.kind != IntervalKind::kStage &&
          iv.end_ns >= iv.begin_ns) {
        loop.push_back(&iv);
      }
    }
    std::stable_sort(loop.begin(), loop.end(), [](const Interval* x, const Interval* y) {
      return x->begin_ns < y->begin_ns;
    });
    std::map<std::pair<uint32_t, uint32_t>, int> step_number;
    for (const Interval* iv : loop) {
      Span s;
      s.begin_ns = iv->begin_ns;
      s.end_ns = iv->end_ns;
      if (iv->kind == IntervalKind::kStep) {
        int n = ++step_number[{iv->process, iv->tid}];
        s.name = "step " + std::to_string(n);
        s.cat = "step";
        s.args = Span::Args::kStep;
        s.arg = n;
      } else {
        s.name = "data wait";
        s.cat = "wait";
      }
      track(iv->process, iv->tid, 1).spans.push_back(std::move(s));
    }

    // Processes, then their tracks; a track whose spans overlap without
    // nesting spills into extra lanes, each its own thread row.
    int64_t synthetic = kSyntheticTidBase;
    for (size_t i = 0; i < p.processes.size(); ++i) {
      const Process& proc = p.processes[i];
      const int64_t pid = trace_pid[i];
      const std::string& role = ProcessRole(p, a, i);  // the analysis's, as summary.json has it
      std::string label =
          role == "worker" ? (proc.worker >= 0 ? "worker " + std::to_string(proc.worker) : "worker")
                           : role;
      std::string name = label + " (pid " + std::to_string(proc.pid) + ")";
      if (!proc.command.empty()) name += " " + proc.command;
      if (!proc.host.empty()) name += " @" + proc.host;
      meta.push_back(Meta(
          {{"name", "process_name"},
           {"ph", "M"},
           {"ts", 0},
           {"pid", pid},
           {"tid", 0},
           {"args",
            {{"name", name}, {"role", role}, {"worker", proc.worker}, {"pid", proc.pid}}}}));
      meta.push_back(Meta({{"name", "process_labels"},
                           {"ph", "M"},
                           {"ts", 0},
                           {"pid", pid},
                           {"tid", 0},
                           {"args", {{"labels", "role=" + role}}}}));
      // The training process first, then the workers by id, then the rest.
      const int64_t sort = role == "main"     ? 0
                           : role == "worker" ? 1 + std::max(proc.worker, -1) + 1
                                              : int64_t{1} << 30;
      meta.push_back(Meta({{"name", "process_sort_index"},
                           {"ph", "M"},
                           {"ts", 0},
                           {"pid", pid},
                           {"tid", 0},
                           {"args", {{"sort_index", sort}}}}));
      for (auto& [key, t] : tracks[i]) {
        const bool steps = key.second == 1;
        t.tid = steps ? synthetic++ : key.first;
        EmitTrack(origin, pid, &t, &synthetic, &meta, &events);
      }
    }

    // Buffer occupancy: one counter per buffer, in its process.
    for (const BufferSeries& b : p.buffers) {
      if (b.process >= p.processes.size()) continue;
      std::string name = "buffer " + b.name;
      if (b.capacity > 0) name += " (capacity " + std::to_string(b.capacity) + ")";
      // The members after "args" are the same for every snapshot.
      std::string tail = "},\"cat\":\"buffer\",\"name\":";
      AppendJsonString(&tail, name);
      tail += ",\"ph\":\"C\",\"pid\":";
      AppendJsonInt(&tail, trace_pid[b.process]);
      tail += ",\"tid\":";
      AppendJsonInt(&tail, trace_pid[b.process]);
      tail += ",\"ts\":";
      std::vector<BufferSnapshot> snaps = b.snapshots;
      std::stable_sort(snaps.begin(), snaps.end(),
                       [](const auto& x, const auto& y) { return x.time_ns < y.time_ns; });
      for (const BufferSnapshot& s : snaps) {
        Event e;
        e.ts = Us(s.time_ns - origin);
        e.text = "{\"args\":{\"size\":";
        AppendJsonUint(&e.text, s.size);
        e.text += tail;
        AppendJsonDouble(&e.text, e.ts);
        e.text += '}';
        events.push_back(std::move(e));
      }
    }

    std::stable_sort(events.begin(), events.end(), [](const Event& x, const Event& y) {
      if (x.ts != y.ts) return x.ts < y.ts;
      if (x.dur != y.dur) return x.dur > y.dur;
      return x.order < y.order;
    });

    // Streamed rather than one json value: big profiles have millions of events.
    std::string out = "{\"traceEvents\":[\n";
    size_t bytes = out.size() + 512;
    for (const std::vector<Event>* list : {&meta, &events}) {
      for (const Event& e : *list) bytes += e.text.size() + 2;
    }
    out.reserve(bytes);
    bool first = true;
    for (const std::vector<Event>* list : {&meta, &events}) {
      for (const Event& e : *list) {
        if (!first) out += ",\n";
        first = false;
        out += e.text;
      }
    }
    json other = {{"generator", "dlprof"},
                  {"origin_monotonic_ns", origin},
                  {"severity", a.verdict.severity},
                  {"data_wait_fraction", a.verdict.data_wait_fraction},
                  {"bottleneck_stage", a.verdict.bottleneck_stage},
                  {"short_stage_spans_left_out", spans_dropped}};
    out += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":";
    out += Dump(other);
    out += "}\n";
    return out;
  }

 private:
  // The earliest time in the profile: every time stamp is relative to it.
  static int64_t Origin(const Profile& p) {
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

  static void EmitTrack(int64_t origin, int64_t pid, Track* t, int64_t* synthetic,
                        std::vector<Event>* meta, std::vector<Event>* events) {
    std::stable_sort(t->spans.begin(), t->spans.end(), [](const Span& x, const Span& y) {
      if (x.begin_ns != y.begin_ns) return x.begin_ns < y.begin_ns;
      return x.end_ns > y.end_ns;
    });
    struct Lane {
      int64_t tid;
      std::vector<int64_t> open_ends;
    };
    std::vector<Lane> lanes;
    auto name_lane = [&](const Lane& lane, size_t index) {
      std::string name = t->name;
      if (index > 0) name += " (overlapping " + std::to_string(index) + ")";
      meta->push_back(Meta({{"name", "thread_name"},
                            {"ph", "M"},
                            {"ts", 0},
                            {"pid", pid},
                            {"tid", lane.tid},
                            {"args", {{"name", name}}}}));
      meta->push_back(Meta(
          {{"name", "thread_sort_index"},
           {"ph", "M"},
           {"ts", 0},
           {"pid", pid},
           {"tid", lane.tid},
           {"args", {{"sort_index", t->sort_index * 16 + static_cast<int64_t>(index)}}}}));
    };
    lanes.push_back({t->tid, {}});
    name_lane(lanes[0], 0);
    int order = 0;
    for (Span& s : t->spans) {
      size_t l = 0;
      for (;; ++l) {
        if (l == lanes.size()) {
          lanes.push_back({(*synthetic)++, {}});
          name_lane(lanes.back(), l);
        }
        auto& ends = lanes[l].open_ends;
        while (!ends.empty() && ends.back() <= s.begin_ns) ends.pop_back();
        if (ends.empty() || ends.back() >= s.end_ns) break;
      }
      lanes[l].open_ends.push_back(s.end_ns);
      Event e;
      e.ts = Us(s.begin_ns - origin);
      e.dur = Us(s.end_ns - s.begin_ns);
      e.order = order++;
      // Members in the order json's sorted keys put them.
      std::string& j = e.text;
      j += '{';
      switch (s.args) {
        case Span::Args::kNone: break;
        case Span::Args::kSamples:
          j += "\"args\":{\"samples\":";
          AppendJsonInt(&j, s.arg);
          j += ",\"source\":\"samples\"},";
          break;
        case Span::Args::kEvents: j += "\"args\":{\"source\":\"events\"},"; break;
        case Span::Args::kStep:
          j += "\"args\":{\"step\":";
          AppendJsonInt(&j, s.arg);
          j += "},";
          break;
      }
      j += "\"cat\":";
      AppendJsonString(&j, s.cat);
      j += ",\"dur\":";
      AppendJsonDouble(&j, e.dur);
      j += ",\"name\":";
      AppendJsonString(&j, s.name);
      j += ",\"ph\":\"X\",\"pid\":";
      AppendJsonInt(&j, pid);
      j += ",\"tid\":";
      AppendJsonInt(&j, lanes[l].tid);
      j += ",\"ts\":";
      AppendJsonDouble(&j, e.ts);
      j += '}';
      events->push_back(std::move(e));
    }
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeTraceWriter() { return std::make_unique<TraceWriter>(); }

}  // namespace dlprof
