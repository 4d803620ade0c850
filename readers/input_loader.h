// Loads whatever the user hands `dlprof report` or `dlprof convert`: run
// folders, DLPROF_OUT folders, .dlprof files, gperftools CPU profiles and
// pprof profiles, into one Profile; then symbolizes it.
#ifndef DLPROF_READERS_INPUT_LOADER_H_
#define DLPROF_READERS_INPUT_LOADER_H_

#include <string>
#include <vector>

#include "readers/profile.h"

namespace dlprof {

enum class InputKind { kRunFolder, kDlprof, kGperftools, kPprof, kUnknown };

// What `path` holds, from its type and first bytes.
InputKind DetectInput(const std::string& path);

// Adds every input to `profile`. Several runs (folders) get a `host` label on
// their processes (the recorded host name, or the run id where hosts repeat).
// Throws std::runtime_error with one clear line when an input cannot be read
// at all; damage inside a file only adds warnings.
void LoadInputs(const std::vector<std::string>& paths, Profile* profile);

}  // namespace dlprof

#endif  // DLPROF_READERS_INPUT_LOADER_H_
