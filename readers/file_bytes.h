// A whole file in memory, read with as few system calls as it takes.
#ifndef DLPROF_READERS_FILE_BYTES_H_
#define DLPROF_READERS_FILE_BYTES_H_

#include <string>

namespace dlprof {

// Reads the file at `path` into *out, sized from fstat and filled by read()
// until end of file (a file still being appended to is read to where it ends
// then). The readers decode from memory: std::istreambuf_iterator costs
// several ns a byte, this is a copy. On failure returns false and sets *error
// to "path: cannot open: why" or "path: read error: why".
bool ReadWholeFile(const std::string& path, std::string* out, std::string* error);

}  // namespace dlprof

#endif  // DLPROF_READERS_FILE_BYTES_H_
