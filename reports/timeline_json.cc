#include "reports/timeline_json.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "reports/json_text.h"
#include "reports/timeline_data.h"

namespace dlprof {
namespace {

// Nanoseconds to the nearest microsecond. Monotonic, so spans that do not
// overlap in ns do not overlap in µs either.
int64_t Us(int64_t ns) { return ns >= 0 ? (ns + 500) / 1000 : -((-ns + 500) / 1000); }

void AppendInts(std::string* out, const std::vector<int64_t>& v) {
  *out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) *out += ',';
    AppendJsonInt(out, v[i]);
  }
  *out += ']';
}

void Key(std::string* out, const char* key) {
  AppendJsonString(out, key);
  *out += ':';
}

// Which spans stay under the cap: the longest, and of those as long as the
// shortest kept, the first ones in track order.
class LongestSpans {
 public:
  LongestSpans(const Timeline& t, size_t max_spans) {
    std::vector<int64_t> durations;
    for (const TimelineProcess& p : t.processes) {
      for (const TimelineTrack& tr : p.tracks) {
        for (const TimelineSpan& s : tr.spans) durations.push_back(s.end_ns - s.begin_ns);
      }
    }
    total_ = durations.size();
    if (total_ <= max_spans) return;
    cut_ = true;
    if (max_spans == 0) return;  // threshold INT64_MAX, no ties: nothing kept
    std::nth_element(durations.begin(), durations.begin() + (max_spans - 1), durations.end(),
                     std::greater<int64_t>());
    threshold_ = durations[max_spans - 1];
    size_t longer = 0;
    for (int64_t d : durations) longer += d > threshold_;
    ties_left_ = max_spans - longer;
  }

  // Called once per span, in track order.
  bool Keep(const TimelineSpan& s) {
    if (!cut_) return true;
    const int64_t d = s.end_ns - s.begin_ns;
    if (d > threshold_) return true;
    if (d == threshold_ && ties_left_ > 0) {
      --ties_left_;
      return true;
    }
    return false;
  }

  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
  bool cut_ = false;
  int64_t threshold_ = INT64_MAX;
  size_t ties_left_ = 0;
};

}  // namespace

std::string TimelineJson(const Profile& p, const Analysis& a, size_t max_spans,
                         size_t max_buffer_points) {
  const Timeline tl = BuildTimeline(p, a);
  const int64_t origin = tl.origin_ns;
  LongestSpans cut(tl, max_spans);
  std::map<uint32_t, int64_t> name_ids;  // stage -> index into names
  std::string names = "[";
  size_t kept = 0;
  int64_t end_us = 0;

  std::vector<const TimelineProcess*> order;
  for (const TimelineProcess& tp : tl.processes) order.push_back(&tp);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* x, const auto* y) { return x->sort_index < y->sort_index; });

  std::string procs = "[";
  for (const TimelineProcess* tp : order) {
    if (procs.size() > 1) procs += ',';
    procs += '{';
    Key(&procs, "process");
    AppendJsonUint(&procs, tp->index);
    procs += ',';
    Key(&procs, "label");
    AppendJsonString(&procs, tp->label);
    procs += ',';
    Key(&procs, "name");
    AppendJsonString(&procs, tp->name);
    procs += ',';
    Key(&procs, "role");
    AppendJsonString(&procs, tp->role);
    procs += ',';
    Key(&procs, "tracks");
    procs += '[';
    for (size_t ti = 0; ti < tp->tracks.size(); ++ti) {
      const TimelineTrack& tr = tp->tracks[ti];
      std::vector<const TimelineSpan*> spans;
      for (const TimelineSpan& s : tr.spans) {
        if (cut.Keep(s)) spans.push_back(&s);
      }
      kept += spans.size();
      // Rows per lane: the deepest kept span's depth + 1.
      std::vector<int64_t> rows(tr.lanes, 0);
      for (const TimelineSpan* s : spans) {
        rows[s->lane] = std::max<int64_t>(rows[s->lane], s->depth + 1);
      }
      std::vector<int64_t> first_row(tr.lanes, 0);
      for (size_t l = 1; l < rows.size(); ++l) first_row[l] = first_row[l - 1] + rows[l - 1];
      std::vector<int64_t> t, d, n, r;
      for (auto* column : {&t, &d, &n, &r}) column->reserve(spans.size());
      int64_t prev = 0;
      for (const TimelineSpan* s : spans) {
        const int64_t b = Us(s->begin_ns - origin), e = Us(s->end_ns - origin);
        t.push_back(b - prev);
        prev = b;
        d.push_back(e - b);
        end_us = std::max(end_us, e);
        if (tr.loop) {
          n.push_back(s->kind == SpanKind::kStep ? s->arg : 0);
        } else {
          auto [it, added] = name_ids.try_emplace(s->stage, static_cast<int64_t>(name_ids.size()));
          if (added) {
            if (names.size() > 1) names += ',';
            AppendJsonString(&names, StageName(p, *s));
          }
          n.push_back(it->second);
        }
        r.push_back(first_row[s->lane] + s->depth);
      }
      if (ti > 0) procs += ',';
      procs += '{';
      Key(&procs, "name");
      AppendJsonString(&procs, tr.name);
      procs += ',';
      Key(&procs, "tid");
      AppendJsonUint(&procs, tr.tid);
      procs += ',';
      Key(&procs, "loop");
      procs += tr.loop ? "true" : "false";
      procs += ',';
      Key(&procs, "source");
      AppendJsonString(&procs, tr.loop ? "intervals" : tr.from_events ? "events" : "samples");
      procs += ',';
      Key(&procs, "rows");
      AppendInts(&procs, rows);
      for (const auto* column : {&t, &d, &n, &r}) {
        procs += ',';
        Key(&procs, column == &t ? "t" : column == &d ? "d" : column == &n ? "n" : "r");
        AppendInts(&procs, *column);
      }
      procs += '}';
    }
    procs += "],";
    Key(&procs, "buffers");
    procs += '[';
    bool first_buffer = true;
    for (const TimelineBuffer& b : tl.buffers) {
      if (b.process != tp->index) continue;
      if (!first_buffer) procs += ',';
      first_buffer = false;
      std::vector<int64_t> t, v;
      int64_t prev = 0;
      for (const BufferSnapshot& s : ThinSnapshots(b.snapshots, max_buffer_points)) {
        const int64_t at = Us(s.time_ns - origin);
        t.push_back(at - prev);
        prev = at;
        v.push_back(static_cast<int64_t>(std::min<uint64_t>(s.size, INT64_MAX)));
        end_us = std::max(end_us, at);
      }
      procs += '{';
      Key(&procs, "name");
      AppendJsonString(&procs, b.name);
      procs += ',';
      Key(&procs, "capacity");
      AppendJsonUint(&procs, b.capacity);
      procs += ',';
      Key(&procs, "t");
      AppendInts(&procs, t);
      procs += ',';
      Key(&procs, "v");
      AppendInts(&procs, v);
      procs += '}';
    }
    procs += "]}";
    const Process& proc = p.processes[tp->index];
    if (proc.end_ns > origin) end_us = std::max(end_us, Us(proc.end_ns - origin));
  }
  procs += ']';
  names += ']';

  std::string out = "{";
  Key(&out, "origin_ns");
  AppendJsonInt(&out, origin);
  out += ',';
  Key(&out, "end_us");
  AppendJsonInt(&out, end_us);
  out += ',';
  Key(&out, "spans");
  AppendJsonUint(&out, kept);
  out += ',';
  Key(&out, "spans_total");
  AppendJsonUint(&out, cut.total());
  out += ',';
  Key(&out, "max_spans");
  AppendJsonUint(&out, max_spans);
  out += ',';
  Key(&out, "short_spans_left_out");
  AppendJsonInt(&out, tl.short_spans_left_out);
  out += ',';
  Key(&out, "names");
  out += names;
  out += ',';
  Key(&out, "processes");
  out += procs;
  out += '}';
  return out;
}

}  // namespace dlprof
