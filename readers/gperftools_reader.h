// Reads gperftools' legacy binary CPU profiles (CPUPROFILE=...) into the
// Profile model, so existing profiles can be merged, symbolized and converted.
//
// The format (gperftools docs/cpuprofile-fileformat.html), in machine words:
//   header   0, 3, 0, sampling period in microseconds, 0
//   records  count, depth, pc[0] .. pc[depth-1]    (pc[0] is the leaf)
//   trailer  0, 1, 0
// followed by the text of the process's /proc/self/maps.
#ifndef DLPROF_READERS_GPERFTOOLS_READER_H_
#define DLPROF_READERS_GPERFTOOLS_READER_H_

#include <string>

#include "readers/file_bytes.h"
#include "readers/profile.h"

namespace dlprof {

// True when `bytes` (the start of a file, 40 bytes suffice) begins with the
// header above in any of the word sizes and byte orders ReadGperftools reads.
bool LooksLikeGperftoolsProfile(const std::string& bytes);

// Appends the profile at `path` to `profile` as one process: pid 0 (the
// format does not record it), role "main", hz from the period, mappings from
// the memory map (executable ones, build-ids read from the files now on disk
// when they have one), one sample per record with cpu_ns = count × period.
// Locations are keyed by module and file offset, unsymbolized: run the
// Symbolizer (every pc after the leaf is a return address, which
// Symbolizer::SymbolizeProfile infers from the stacks).
//
// 64-bit and 32-bit words, little- and big-endian, are detected from the
// header. A truncated or corrupt file keeps every complete record before the
// fault and adds one warning "path: offset N: what" to the process and to
// profile->warnings. Throws std::runtime_error naming the path when the file
// cannot be read or does not start with a gperftools CPU profile header.
void ReadGperftools(const std::string& path, Profile* profile, const FileLimits& limits = FileLimits());

// The same for a file's bytes already in memory; `path` only names them in
// warnings and in Process::file. (The fuzz targets call this.)
void ReadGperftoolsBuffer(const std::string& bytes, const std::string& path, Profile* profile);

}  // namespace dlprof

#endif  // DLPROF_READERS_GPERFTOOLS_READER_H_
