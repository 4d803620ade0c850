// trace.json (and trace.json.gz): the Chrome trace event format (JSON object
// form), for Perfetto. One process track per profiled process; per thread, a
// track of stage spans and, for the training loop, a track of steps and data
// waits; buffer occupancy as counters. Only complete ("X") events, so there is
// no begin without an end, and events on one track always nest. The tracks
// and spans are reports/timeline_data.h's, which report.html draws too.
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>

#include "reports/json_text.h"
#include "reports/output_file.h"
#include "reports/report_writer.h"
#include "reports/timeline_data.h"

namespace dlprof {
namespace {

using nlohmann::json;

// Real thread ids stay below 2^22 (pid_max); tracks dlprof makes up (steps,
// overlapping spans) get ids from here, which never collide with them.
constexpr int64_t kSyntheticTidBase = 1000000000;

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

class TraceWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "trace.json"; }

  // trace.json, and the same bytes gzipped beside it: Perfetto opens both,
  // and a long detailed run's trace is tens of MB.
  void Write(const Profile& p, const Analysis& a, const std::string& dir) const override {
    const std::string text = Render(p, a);
    WriteFileOrThrow(dir + "/" + file_name(), text);
    WriteGzipFile(dir + "/" + file_name() + ".gz", text);
  }

  std::string Render(const Profile& p, const Analysis& a) const override {
    const Timeline timeline = BuildTimeline(p, a);
    const int64_t origin = timeline.origin_ns;
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

    // Processes, then their tracks; a track whose spans overlap without
    // nesting spills into extra lanes, each its own thread row.
    int64_t synthetic = kSyntheticTidBase;
    for (const TimelineProcess& tp : timeline.processes) {
      const Process& proc = p.processes[tp.index];
      const int64_t pid = trace_pid[tp.index];
      meta.push_back(Meta({{"name", "process_name"},
                           {"ph", "M"},
                           {"ts", 0},
                           {"pid", pid},
                           {"tid", 0},
                           {"args",
                            {{"name", tp.name},
                             {"role", tp.role},
                             {"worker", proc.worker},
                             {"pid", proc.pid}}}}));
      meta.push_back(Meta({{"name", "process_labels"},
                           {"ph", "M"},
                           {"ts", 0},
                           {"pid", pid},
                           {"tid", 0},
                           {"args", {{"labels", "role=" + tp.role}}}}));
      meta.push_back(Meta({{"name", "process_sort_index"},
                           {"ph", "M"},
                           {"ts", 0},
                           {"pid", pid},
                           {"tid", 0},
                           {"args", {{"sort_index", tp.sort_index}}}}));
      for (const TimelineTrack& t : tp.tracks) {
        const int64_t tid = t.loop ? synthetic++ : t.tid;
        EmitTrack(p, origin, pid, tid, t, &synthetic, &meta, &events);
      }
    }

    // Buffer occupancy: one counter per buffer, in its process.
    for (const TimelineBuffer& b : timeline.buffers) {
      // The members after "args" are the same for every snapshot.
      std::string tail = "},\"cat\":\"buffer\",\"name\":";
      AppendJsonString(&tail, b.name);
      tail += ",\"ph\":\"C\",\"pid\":";
      AppendJsonInt(&tail, trace_pid[b.process]);
      tail += ",\"tid\":";
      AppendJsonInt(&tail, trace_pid[b.process]);
      tail += ",\"ts\":";
      for (const BufferSnapshot& s : b.snapshots) {
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
                  {"short_stage_spans_left_out", timeline.short_spans_left_out}};
    out += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":";
    out += Dump(other);
    out += "}\n";
    return out;
  }

 private:
  // A track's spans as "X" events, one thread row per lane (the first
  // lane's tid is `tid`, the others get synthetic ones).
  static void EmitTrack(const Profile& p, int64_t origin, int64_t pid, int64_t tid,
                        const TimelineTrack& t, int64_t* synthetic, std::vector<Event>* meta,
                        std::vector<Event>* events) {
    std::vector<int64_t> lane_tid(t.lanes);
    for (uint32_t l = 0; l < t.lanes; ++l) {
      lane_tid[l] = l == 0 ? tid : (*synthetic)++;
      std::string name = t.name;
      if (l > 0) name += " (overlapping " + std::to_string(l) + ")";
      meta->push_back(Meta({{"name", "thread_name"},
                            {"ph", "M"},
                            {"ts", 0},
                            {"pid", pid},
                            {"tid", lane_tid[l]},
                            {"args", {{"name", name}}}}));
      meta->push_back(
          Meta({{"name", "thread_sort_index"},
                {"ph", "M"},
                {"ts", 0},
                {"pid", pid},
                {"tid", lane_tid[l]},
                {"args", {{"sort_index", t.sort_index * 16 + static_cast<int64_t>(l)}}}}));
    }
    int order = 0;
    for (const TimelineSpan& s : t.spans) {
      Event e;
      e.ts = Us(s.begin_ns - origin);
      e.dur = Us(s.end_ns - s.begin_ns);
      e.order = order++;
      // Members in the order json's sorted keys put them.
      std::string& j = e.text;
      j += '{';
      const char* cat = "stage";
      switch (s.kind) {
        case SpanKind::kStage:
          if (t.from_events) {
            j += "\"args\":{\"source\":\"events\"},";
          } else {
            j += "\"args\":{\"samples\":";
            AppendJsonInt(&j, s.arg);
            j += ",\"source\":\"samples\"},";
          }
          break;
        case SpanKind::kStep:
          cat = "step";
          j += "\"args\":{\"step\":";
          AppendJsonInt(&j, s.arg);
          j += "},";
          break;
        case SpanKind::kWait: cat = "wait"; break;
      }
      j += "\"cat\":";
      AppendJsonString(&j, cat);
      j += ",\"dur\":";
      AppendJsonDouble(&j, e.dur);
      j += ",\"name\":";
      switch (s.kind) {
        case SpanKind::kStage: AppendJsonString(&j, StageName(p, s)); break;
        case SpanKind::kStep: AppendJsonString(&j, "step " + std::to_string(s.arg)); break;
        case SpanKind::kWait: AppendJsonString(&j, "data wait"); break;
      }
      j += ",\"ph\":\"X\",\"pid\":";
      AppendJsonInt(&j, pid);
      j += ",\"tid\":";
      AppendJsonInt(&j, lane_tid[s.lane]);
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
