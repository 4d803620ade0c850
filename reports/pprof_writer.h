// Writes a Profile as pprof's profile.proto, readable by `go tool pprof`.
#ifndef DLPROF_REPORTS_PPROF_WRITER_H_
#define DLPROF_REPORTS_PPROF_WRITER_H_

#include <string>
#include <vector>

#include "readers/profile.h"

namespace dlprof {

// The serialized profile.proto, uncompressed.
//
// Sample types are samples/count, cpu/nanoseconds and wall/nanoseconds (the
// last is 0 for CPU samples); cpu is the default. Samples that share process,
// thread, stack, stage path, on/off CPU and kind are summed into one. Labels:
// `stage` (StagePathName, omitted when empty), `role`, `cpu` ("on"/"off"),
// `host` (when set), and the numbers `pid`, `tid` and `worker` (omitted when
// < 0). Numeric labels carry their key as unit: pprof drops a 0 without one.
// Function names are shown short as pprof shows C++ ("ns::F" for
// "ns::F(int) const"); system_name keeps the full name. One Mapping per distinct module; locations
// keep their runtime address and their frames as Lines (innermost first), so pprof needs no
// binaries.
//
// The tables (strings, functions, mappings, locations) come before the
// samples, so a truncated file still resolves every sample it holds.
//
// `roles`, when given, is the `role` label of each process (indexed like
// profile.processes: the roles `dlprof report`'s analysis decided, see
// ProcessRole in reports/analysis.h); else each process's recorded role.
std::string EncodePprof(const Profile& profile, const std::vector<std::string>& roles = {});

// Writes EncodePprof(profile, roles) gzipped to `path` (the form pprof expects
// on disk). Throws std::runtime_error naming the path when it cannot be written.
void WritePprof(const Profile& profile, const std::string& path,
                const std::vector<std::string>& roles = {});
// The same, gzipped onto an open descriptor (`dlprof convert -o -`); `fd`
// stays open.
void WritePprofToFd(const Profile& profile, int fd, const std::vector<std::string>& roles = {});

}  // namespace dlprof

#endif  // DLPROF_REPORTS_PPROF_WRITER_H_
