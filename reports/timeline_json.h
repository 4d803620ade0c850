// report.html's timeline: reports/timeline_data.h's tracks as compact JSON
// text (columnar arrays, interned names, integer microseconds), drawn by
// reports/html/timeline.js.
#ifndef DLPROF_REPORTS_TIMELINE_JSON_H_
#define DLPROF_REPORTS_TIMELINE_JSON_H_

#include <cstddef>
#include <string>

#include "readers/profile.h"
#include "reports/analysis.h"

namespace dlprof {

// Past this many spans the timeline keeps the longest and says how many it
// left out; past this many points a buffer's occupancy is thinned.
constexpr size_t kMaxTimelineSpans = 400000;
constexpr size_t kMaxTimelineBufferPoints = 20000;

// A JSON object:
//   {"origin_ns", "end_us", "names": [stage names],
//    "spans", "spans_total", "max_spans", "short_spans_left_out",
//    "processes": [{"process" (index into the page's processes), "label",
//                   "name", "role",
//                   "tracks": [{"name", "tid", "loop", "source", "rows",
//                               "t", "d", "n", "r"}],
//                   "buffers": [{"name", "capacity", "t", "v"}]}]}
// Processes come in the order trace.json sorts them (the training process,
// then the workers by id). A track's columns hold one entry per span, by
// begin: "t" its begin in µs from the previous span's begin (the first from
// origin_ns), "d" its duration in µs, "n" the index of its stage name (a
// loop track: its step number, 0 for a data wait), "r" its row, the rows
// being each lane's depths one after the other ("rows": rows per lane). A
// buffer's "t" is the same kind of delta, "v" its size.
// Names are the program's: only valid UTF-8 is kept (U+FFFD for the rest).
std::string TimelineJson(const Profile& profile, const Analysis& analysis,
                         size_t max_spans = kMaxTimelineSpans,
                         size_t max_buffer_points = kMaxTimelineBufferPoints);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_TIMELINE_JSON_H_
