// dlprof's own lines on the program's stderr ("dlprof: ... profiling off").
// They go to fd 2 only while it is still the file it was when the library
// started: a program whose stderr was closed (`prog 2>&-`, a daemon) may
// open its own log as fd 2, and dlprof's line would be in it. Then the line
// is dropped (what it says is in the profile too).
#ifndef DLPROF_CORE_STDERR_LINES_H_
#define DLPROF_CORE_STDERR_LINES_H_

#include <sys/types.h>

#include <cstddef>

namespace dlprof {

// Notes what fd 2 is (or that it is closed). Called first at library start.
void RememberStderr();

// Writes `size` bytes to fd 2 if it is the remembered file. One fstat() and
// one write(): async-signal-safe, no allocation. (In the collector process,
// once WriteStderrLinesToProgram: to the program's fd 2, not async-signal-
// safe.)
void WriteStderrLine(const char* line, size_t size);

// The remembered stderr's identity, for the collector process; false when
// fd 2 was closed at start.
bool RememberedStderr(unsigned long long* dev, unsigned long long* ino);

// In the collector process: dlprof's lines go to program `pid`'s fd 2,
// opened through /proc/<pid>/fd/2 for each line, while it is the file
// `dev`/`ino` (the program's stderr when its library started), as the
// program's own lines would. Not to a regular file the program writes
// without O_APPEND: a line appended there would be overwritten, and partly
// left after the program's next write. The helper holds no descriptor of
// the program's in between.
void WriteStderrLinesToProgram(pid_t pid, unsigned long long dev, unsigned long long ino);

}  // namespace dlprof

#endif  // DLPROF_CORE_STDERR_LINES_H_
