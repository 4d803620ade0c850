// The timeline of a profile, as trace.json and report.html's timeline both
// draw it: per process, one track of stage spans per thread and one of the
// training loop's steps and data waits, and each buffer's occupancy.
#ifndef DLPROF_REPORTS_TIMELINE_DATA_H_
#define DLPROF_REPORTS_TIMELINE_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "readers/profile.h"
#include "reports/analysis.h"

namespace dlprof {

enum class SpanKind : uint8_t { kStage, kStep, kWait };

struct TimelineSpan {
  int64_t begin_ns = 0, end_ns = 0;  // CLOCK_MONOTONIC, as in the profile
  SpanKind kind = SpanKind::kStage;
  uint32_t stage = 0;  // kStage: index into Profile::stages (StageName: "?" past its end)
  // kStage from samples: the samples it spans; kStep: the step's number on
  // its thread, from 1; else 0.
  int64_t arg = 0;
  // Spans of a track that overlap without nesting spill into extra lanes;
  // depth is how many spans of the lane enclose this one.
  uint32_t lane = 0, depth = 0;
};

struct TimelineTrack {
  uint32_t tid = 0;
  bool loop = false;         // steps and data waits, else stage spans
  bool from_events = false;  // stage spans from the detailed mode's enter/exit events
  std::string name;          // "main thread 12", "steps & data waits (thread 12)"
  int64_t sort_index = 0;    // within the process
  uint32_t lanes = 1;
  // By begin, the longer of two spans that begin together first: so an
  // enclosing span always comes before the spans it encloses.
  std::vector<TimelineSpan> spans;
};

struct TimelineBuffer {
  uint32_t process = 0;  // index into Profile::processes
  std::string name;      // "buffer prefetch (capacity 8)"
  uint64_t capacity = 0;
  std::vector<BufferSnapshot> snapshots;  // by time
};

struct TimelineProcess {
  uint32_t index = 0;                 // into Profile::processes
  std::string role;                   // the analysis's, as summary.json has it
  std::string label;                  // "main", "worker 3"
  std::string name;                   // label, pid, command and host
  int64_t sort_index = 0;             // the training process first, then the workers by id
  std::vector<TimelineTrack> tracks;  // by (tid, stages before loop)
};

struct Timeline {
  int64_t origin_ns = 0;                   // the earliest time in the profile
  std::vector<TimelineProcess> processes;  // as Profile::processes
  std::vector<TimelineBuffer> buffers;     // as Profile::buffers, those of a known process
  // Sample-derived stage spans left out: past kMaxDerivedSpansPerThread a
  // thread keeps its longest.
  int64_t short_spans_left_out = 0;
};

// A thread's sample-derived spans beyond this many keep only the longest: a
// trace with millions of events is too big for the viewers to load.
constexpr size_t kMaxDerivedSpansPerThread = 50000;

// Stage spans come from the detailed mode's exact enter/exit events where a
// thread has them, else from its samples (runs of samples with the same stage
// path); steps and waits from the loop's intervals, numbered per thread.
Timeline BuildTimeline(const Profile& profile, const Analysis& analysis);

// At most about `max_points` of `by_time` (snapshots in time order): past
// that, the lowest and the highest size of each of max_points / 2 time
// buckets, in time order, so that empty and full stretches survive.
std::vector<BufferSnapshot> ThinSnapshots(const std::vector<BufferSnapshot>& by_time,
                                          size_t max_points);

// A stage span's name: its stage's, or "?" for an index the profile lacks.
const std::string& StageName(const Profile& profile, const TimelineSpan& span);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_TIMELINE_DATA_H_
