// Loads whatever the user hands `dlprof report` or `dlprof convert`: run
// folders, DLPROF_OUT folders, .dlprof files, gperftools CPU profiles and
// pprof profiles, into one Profile; then symbolizes it.
#ifndef DLPROF_READERS_INPUT_LOADER_H_
#define DLPROF_READERS_INPUT_LOADER_H_

#include <string>
#include <vector>

#include "readers/file_bytes.h"
#include "readers/profile.h"

namespace dlprof {

// kUnreadable: not a folder nor a regular file within the limits (a FIFO,
// a device, a file too large), or it cannot be opened.
enum class InputKind { kRunFolder, kDlprof, kGperftools, kPprof, kUnknown, kUnreadable };

// What `path` holds, from its type and first bytes. It never blocks: a FIFO
// or a device is kUnreadable, with the reason in *why when given.
InputKind DetectInput(const std::string& path, const FileLimits& limits = FileLimits(),
                      std::string* why = nullptr);

// Adds every input to `profile`. Several runs (folders) get a `host` label on
// their processes (the recorded host name, or the run id where hosts repeat).
// An input that cannot be read at all becomes a warning naming it, and the
// others are read; only when nothing at all could be read does it throw
// std::runtime_error, with that one line. Damage inside a file only adds
// warnings. Files in a run folder are read only if they are regular files
// there (a symbolic link is not followed) within `limits`.
void LoadInputs(const std::vector<std::string>& paths, Profile* profile,
                const FileLimits& limits = FileLimits());

}  // namespace dlprof

#endif  // DLPROF_READERS_INPUT_LOADER_H_
