// Writes a Profile as pprof's profile.proto, readable by `go tool pprof`.
#ifndef DLPROF_REPORTS_PPROF_WRITER_H_
#define DLPROF_REPORTS_PPROF_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "readers/profile.h"

namespace dlprof {

// Which samples a profile holds. pprof prints every sample of a profile in
// `-traces` and counts it in `-tags`, whatever its value, so CPU samples and
// wall-clock ticks go to two profiles: in one, the ticks showed as samples of
// 0 ns in the default cpu view.
enum class PprofView {
  kCpu,   // CPU samples: samples/count and cpu/nanoseconds (the default type)
  kWall,  // wall-clock ticks of every thread, running (cpu=on) or blocked
          // (cpu=off): samples/count (ticks), wall/nanoseconds (the default
          // type), and of that wall time cpu/nanoseconds the thread ran and
          // wait/nanoseconds it was runnable but waiting for a core
};

// The ticks a wall record stands for: one as the dlprof reader makes them
// (count 0), or its count as read back from a wall profile.
inline int64_t WallTicks(const Sample& s) { return s.count > 0 ? s.count : 1; }

// Whether `s` goes into `view`: a CPU sample, or a wall tick of some wall
// time (one of none would print as a sample of 0 in pprof's -traces).
bool InPprofView(const Sample& s, PprofView view);
// The samples/count total of `view` (what pprof's -sample_index=samples sums).
int64_t PprofSampleCount(const Profile& profile, PprofView view);

// The serialized profile.proto of `view`, uncompressed.
//
// Samples that share process,
// thread, stack, stage path, on/off CPU and kind are summed into one. Labels:
// `stage` (StagePathName, omitted when empty), `role`, `cpu` ("on"/"off"),
// `host` (when set), and the numbers `pid`, `tid` and `worker` (omitted when
// < 0). Numeric labels carry their key as unit: pprof drops a 0 without one.
// Function names are shown short as pprof shows C++ ("ns::F" for
// "ns::F(int) const"); system_name keeps the full name. Only the locations
// the view's samples use are written, with one Mapping per distinct module
// (the main executable's first); locations keep their runtime address and
// their frames as Lines (innermost first), so pprof needs no binaries.
//
// The tables (strings, functions, mappings, locations) come before the
// samples, so a truncated file still resolves every sample it holds.
// Comments: the writer and version, what the view holds, "run: <id>" for each
// run id of the processes (kPprofRunComment), and the main process's command.
//
// `roles`, when given, is the `role` label of each process (indexed like
// profile.processes: the roles `dlprof report`'s analysis decided, see
// ProcessRole in reports/analysis.h); else each process's recorded role.
std::string EncodePprof(const Profile& profile, PprofView view = PprofView::kCpu,
                        const std::vector<std::string>& roles = {});

// Writes EncodePprof(profile, view, roles) gzipped to `path` (the form pprof
// expects on disk). Throws std::runtime_error naming the path when it cannot
// be written.
void WritePprof(const Profile& profile, const std::string& path, PprofView view = PprofView::kCpu,
                const std::vector<std::string>& roles = {});
// The same, gzipped onto an open descriptor (`dlprof convert -o -`); `fd`
// stays open.
void WritePprofToFd(const Profile& profile, int fd, PprofView view = PprofView::kCpu,
                    const std::vector<std::string>& roles = {});

}  // namespace dlprof

#endif  // DLPROF_REPORTS_PPROF_WRITER_H_
