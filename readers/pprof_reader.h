// Reads pprof profile.proto files (gzipped or not) into the Profile model.
#ifndef DLPROF_READERS_PPROF_READER_H_
#define DLPROF_READERS_PPROF_READER_H_

#include <string>

#include "readers/file_bytes.h"
#include "readers/profile.h"

namespace dlprof {

// The comment by which a profile names the dlprof run it comes from
// ("run: <run id>"); reports/pprof_writer.cc writes one per run.
constexpr char kPprofRunComment[] = "run: ";

// Appends the samples of the pprof profile at `path` to `profile`.
//
// Processes come back from the labels dlprof writes (reports/pprof_writer.h):
// one Process per distinct (host, pid, role, worker); profiles without them
// (Go, other tools) become one process with pid 0, role "main". A profile
// that names one run (kPprofRunComment) sets each process's "run_id" field,
// and its processes join those of the same run and labels read before from
// another pprof file: the CPU profile and the wall profile of one report
// give back one set of processes.
//
// `stage` is split on '/' into a stage path, `cpu` "off" marks off-CPU
// samples, `tid` the thread. Values are taken from the sample types
// samples/count, cpu/nanoseconds and wall/nanoseconds (count 1 and cpu =
// period when a profile lacks them). A sample of dlprof's wall profile
// (period type wall), or else one with wall time and no CPU time, is a wall
// tick (SampleKind::kWall): its count the ticks, cpu/nanoseconds and
// wait/nanoseconds the CPU and wait within its wall time.
//
// Lines become Location frames, innermost first, so symbolized input needs
// no symbolizer; every process gets all mappings. Locations without an
// address (pprof allows that) cannot be keyed by file offset and become
// pseudo locations keyed by their function name.
//
// Corrupt or truncated input is not fatal: each complete sample decoded
// before the fault is kept, and one warning "path: offset N: what" (offset
// into the decompressed protobuf, plus the compressed offset for a gzip
// fault) goes to profile->warnings and to each process read from the file.
// Throws std::runtime_error naming the path only when it cannot be read.
void ReadPprof(const std::string& path, Profile* profile, const FileLimits& limits = FileLimits());

// The same for a file's bytes (gzipped or not) already in memory; `path` only
// names them in warnings and in Process::file. (The fuzz targets call this.)
void ReadPprofBuffer(std::string bytes, const std::string& path, Profile* profile);

}  // namespace dlprof

#endif  // DLPROF_READERS_PPROF_READER_H_
