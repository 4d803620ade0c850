// A whole file in memory, read with as few system calls as it takes, and only
// if it is a regular file of a sane size: an input may be a FIFO (a hang), a
// device or a sparse file of many GB (memory exhausted).
#ifndef DLPROF_READERS_FILE_BYTES_H_
#define DLPROF_READERS_FILE_BYTES_H_

#include <cstdint>
#include <string>

namespace dlprof {

// The largest input file read by default (`dlprof report --max-file-size`).
// A .dlprof file grows ~10 bytes a sample: 4 GiB is hundreds of millions of
// samples, far past any real run, and still fits in memory to be decoded.
inline constexpr uint64_t kDefaultMaxInputBytes = uint64_t{4} << 30;

struct FileLimits {
  uint64_t max_bytes = kDefaultMaxInputBytes;
  // false: a symbolic link is refused (O_NOFOLLOW). For the files found in a
  // run folder, where the runtime writes none; a path given by the user is
  // followed.
  bool follow_symlinks = true;
};

// Opens `path` to read without blocking (a FIFO or a device opens at once)
// and returns the descriptor of a regular file no larger than the limit,
// with its size in *size; otherwise -1 and *error "path: why; not read"
// ("not a regular file (a FIFO)", "20.0 GiB, over the 4.0 GiB limit...").
int OpenRegularFile(const std::string& path, const FileLimits& limits, uint64_t* size,
                    std::string* error);

// Reads the regular file at `path` into *out, sized from fstat and filled by
// read() until end of file (a file still being appended to is read to where
// it ends then, up to the limit). The readers decode from memory:
// std::istreambuf_iterator costs several ns a byte, this is a copy. On
// failure returns false and sets *error to one line naming the file:
// OpenRegularFile's, "path: read error: why" or "path: cannot allocate ...".
bool ReadWholeFile(const std::string& path, std::string* out, std::string* error,
                   const FileLimits& limits = FileLimits());

// "20.0 GiB", "512 KiB", "17 bytes".
std::string ByteSize(uint64_t bytes);

}  // namespace dlprof

#endif  // DLPROF_READERS_FILE_BYTES_H_
