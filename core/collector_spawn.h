// Starting the collector helper process so that the profiled program cannot
// observe it (docs/ARCHITECTURE.md, "What is next"): no wait of the program's
// reaps it, its end sends the program no SIGCHLD, no signal to the program's
// process group reaches it, and it holds none of the program's descriptors.
#ifndef DLPROF_CORE_COLLECTOR_SPAWN_H_
#define DLPROF_CORE_COLLECTOR_SPAWN_H_

#include <sys/types.h>

#include <string>

namespace dlprof {

// Starts `path` (an executable, not searched in PATH) with `argv` and `envp`
// (nullptr: an empty environment; the program's own would carry LD_PRELOAD
// of libdlprof into the helper). The helper gets `pass_fd` as its fd 3
// (pass_fd < 0: none), `pass_fd2` as its fd 5 (< 0: none), a pidfd of the
// calling process as fd 4 (none before
// Linux 5.3 or with RLIMIT_NOFILE's hard limit below 5; it polls readable
// once the caller has ended), /dev/null as fds 0-2 and no other fd of the
// caller's. It runs in a new session (not as its leader), with an empty
// signal mask, every signal's disposition at its default (SIG_IGN too) and
// RLIMIT_NOFILE's soft limit raised to the hard one.
// Returns once the helper has exec'd: its pid, or -1 with *error set (if not
// null) when a step before exec failed.
//
// The helper is not the caller's child: an intermediate child (cloned with
// exit signal 0, never exec'd, reaped here by pid) starts it and exits, so it
// is re-parented at once to init or to the nearest PR_SET_CHILD_SUBREAPER.
// No wait of the caller's sees either, and neither's end sends it SIGCHLD,
// SIGCHLD ignored or not. Only where the caller is itself a subreaper is the
// helper adopted by it, as an ordinary child (ReapInvisibleChild reaps it).
//
// Thread-safe. Calls no function that takes a lock (safe in a fork child of
// a multi-threaded process), except to build *error on failure. Blocks every
// signal of the calling thread until the helper has exec'd. errno is kept.
pid_t SpawnInvisibleChild(const char* path, const char* const argv[], const char* const envp[],
                          int pass_fd, std::string* error, int pass_fd2 = -1);

// Under ThreadSanitizer, finds glibc's clone(), which SpawnInvisibleChild
// calls instead of TSan's interceptor (see there); elsewhere nothing. Call
// it at start: a fork child may not use the loader (SpawnInvisibleChild
// resolves it itself if it was not called, for tests). Not signal-safe.
void ResolveLibcClone();

// Reaps child `pid` if it has ended (waitpid(pid, ..., __WALL)), storing its
// wait status in *status if not null. Blocks until it ends only if `wait`.
// Returns whether it was reaped; false also if pid is not a child of this
// process. errno is kept.
bool ReapInvisibleChild(pid_t pid, bool wait, int* status);

}  // namespace dlprof

#endif  // DLPROF_CORE_COLLECTOR_SPAWN_H_
