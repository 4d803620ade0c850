// Reads pprof profile.proto files (gzipped or not) into the Profile model.
#ifndef DLPROF_READERS_PPROF_READER_H_
#define DLPROF_READERS_PPROF_READER_H_

#include <string>

#include "readers/file_bytes.h"
#include "readers/profile.h"

namespace dlprof {

// Appends the samples of the pprof profile at `path` to `profile`.
//
// Processes come back from the labels dlprof writes (reports/pprof_writer.h):
// one Process per distinct (host, pid, role, worker); profiles without them
// (Go, other tools) become one process with pid 0, role "main". `stage` is
// split on '/' into a stage path, `cpu` "off" marks off-CPU samples, `tid`
// the thread. Values are taken from the sample types samples/count,
// cpu/nanoseconds and wall/nanoseconds (count 1 and cpu = period when a
// profile lacks them). Lines become Location frames, innermost first, so
// symbolized input needs no symbolizer; every process gets all mappings.
// Locations without an address (pprof allows that) cannot be keyed by file
// offset and become pseudo locations keyed by their function name.
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
