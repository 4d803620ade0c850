// File descriptors that dlprof keeps open inside the program: kept at
// numbers the program is unlikely to use, and checked by identity before
// every use, because the program owns its fd table. It may close every fd
// above 2 (close_range, as daemons and subprocess launchers do), dup2 onto
// any number, and reuse the numbers for its own pipes and files; dlprof must
// then never write to, read from or close what is now the program's.
#ifndef DLPROF_BACKENDS_PRIVATE_FD_H_
#define DLPROF_BACKENDS_PRIVATE_FD_H_

#include <dirent.h>
#include <stdio.h>
#include <sys/types.h>

namespace dlprof {

struct PrivateFd {
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
  bool valid() const { return fd >= 0; }
};

// Moves `fd` (closing it) to a free number near the top of the program's
// range: the lowest free one from min(soft RLIMIT_NOFILE, 4096) - 64 up
// (the kernel gives programs the lowest free number, so they reach it last;
// 4096 bounds the fd table the kernel must grow for it). Keeps `fd` where it
// is when no such number is free. Records the file's identity. Not
// signal-safe. A negative `fd` gives an invalid PrivateFd.
PrivateFd KeepPrivate(int fd);

// True when p.fd still names the file it was kept for: not closed by the
// program, nor replaced by a file of the program's under the same number.
// One fstat(); this function is safe to call from asynchronous signals.
bool StillPrivate(const PrivateFd& p);

// Closes p.fd if it is still ours, and forgets it either way: a number the
// program took over is left alone. Async-signal-safe.
void ReleasePrivate(PrivateFd* p);

// The lowest number KeepPrivate() tries. Async-signal-safe.
int PrivateFdFloor();

// Descriptors dlprof holds for a moment (a /proc read, a write to its own
// profile). The kernel gives the lowest free number, which is 0, 1 or 2 when
// the program has closed its standard streams (a daemon, `prog 2>&-`):
// dlprof's file would then be the program's stderr, and its writes to fd 2
// would land in dlprof's profile, its reads of fd 0 in a /proc file. These
// open at a number of 3 or more: a low one is moved up (F_DUPFD_CLOEXEC)
// and closed at once, so the program can meet it only in that moment.
// Always O_CLOEXEC. -1 with errno on failure. OpenOwn is async-signal-safe.
int OpenOwn(int dir_fd, const char* path, int flags, mode_t mode = 0);
// The same move for a descriptor made otherwise (perf_event_open): returns
// the descriptor at 3 or above (closing `fd`), or `fd` itself if it is
// there already; -1 with errno if it cannot be moved. Async-signal-safe.
int AboveStdio(int fd);
// The same for stdio and dirent readers (read-only).
FILE* FopenOwn(const char* path);
DIR* OpendirOwn(const char* path);

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_PRIVATE_FD_H_
