// _exit() and exec*() interposers (core/exit_exec.cc): the profile ends
// cleanly when a process leaves by _exit() or replaces its image.
#ifndef DLPROF_CORE_EXIT_EXEC_H_
#define DLPROF_CORE_EXIT_EXEC_H_

namespace dlprof {

// Looks up the next definitions of _exit and the exec functions, so that the
// interposers never call dlsym later (they may run in a signal handler).
// Called from the library constructor, whether or not profiling is on.
void ResolveExecFunctions();

}  // namespace dlprof

#endif  // DLPROF_CORE_EXIT_EXEC_H_
