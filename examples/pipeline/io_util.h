// Small POSIX helpers: whole-buffer reads and writes that retry on EINTR and
// short counts, and the clocks the example measures itself with.
#ifndef DLPROF_EXAMPLES_PIPELINE_IO_UTIL_H_
#define DLPROF_EXAMPLES_PIPELINE_IO_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace dlprof_example {

// Writes all `len` bytes. Returns 0, or the errno of the failing write
// (EPIPE when the reader has gone).
int WriteAll(int fd, const void* data, size_t len);

// Reads exactly `len` bytes. Returns len, fewer at end of file, or -1 (errno).
long ReadAll(int fd, void* data, size_t len);

// Creates `path` with `len` bytes (throws std::runtime_error).
void WriteFile(const std::string& path, const void* data, size_t len);

// Puts the calling thread in SCHED_BATCH (see buffer.h); best effort.
void MakeThisABackgroundThread();

// Monotonic wall clock and this thread's CPU time, in seconds.
double WallSeconds();
double ThreadCpuSeconds();

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_IO_UTIL_H_
