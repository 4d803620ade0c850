// dlprof's own lines on the program's stderr ("dlprof: ... profiling off").
// They go to fd 2 only while it is still the file it was when the library
// started: a program whose stderr was closed (`prog 2>&-`, a daemon) may
// open its own log as fd 2, and dlprof's line would be in it. Then the line
// is dropped (what it says is in the profile too).
#ifndef DLPROF_CORE_STDERR_LINES_H_
#define DLPROF_CORE_STDERR_LINES_H_

#include <cstddef>

namespace dlprof {

// Notes what fd 2 is (or that it is closed). Called first at library start.
void RememberStderr();

// Writes `size` bytes to fd 2 if it is the remembered file. One fstat() and
// one write(): async-signal-safe, no allocation.
void WriteStderrLine(const char* line, size_t size);

}  // namespace dlprof

#endif  // DLPROF_CORE_STDERR_LINES_H_
