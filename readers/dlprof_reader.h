// Reads .dlprof files (include/dlprof/format.h) into the Profile model.
#ifndef DLPROF_READERS_DLPROF_READER_H_
#define DLPROF_READERS_DLPROF_READER_H_

#include <string>
#include <vector>

#include "readers/file_bytes.h"
#include "readers/profile.h"

namespace dlprof {

// Adds the process recorded in `path` to `profile`. Damage never stops it:
// every intact chunk is used and each problem becomes a warning "path: offset
// N: what" in the process's warnings. Returns false (and *error) only when the
// file cannot be read at all or is not a .dlprof file. A file a collector
// process is still writing (its flock) is waited for, 5 s at most.
bool ReadDlprofFile(const std::string& path, Profile* profile, std::string* error,
                    const FileLimits& limits = FileLimits());

// The same for the files of one run, in order. Every file is read before any
// is decoded, so that Profile::samples is sized once for all of them. A file
// that cannot be read (not a regular file, over the size limit), or is not a
// .dlprof file, adds its error to *errors; the others are read. Files
// collector processes are still writing are waited for, 5 s at most in all.
void ReadDlprofFiles(const std::vector<std::string>& paths, Profile* profile,
                     std::vector<std::string>* errors, const FileLimits& limits = FileLimits());

// The same for a file's bytes already in memory; `path` only names them in
// warnings and in Process::file. (The fuzz targets call this.)
bool ReadDlprofBuffer(const std::string& data, const std::string& path, Profile* profile,
                      std::string* error);

// The .dlprof files of a run folder, sorted. `dir` may also be a DLPROF_OUT
// folder, meaning its newest run ("latest", else the newest subfolder).
std::vector<std::string> ListRunFiles(const std::string& dir, std::string* error);

// A short name for an x86-64 syscall number ("read"), or "syscall 123".
std::string SyscallName(uint64_t nr);

}  // namespace dlprof

#endif  // DLPROF_READERS_DLPROF_READER_H_
