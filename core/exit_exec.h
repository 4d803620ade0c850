// _exit() and exec*() interposers (core/exit_exec.cc): the profile ends
// cleanly when a process leaves by _exit() or replaces its image.
#ifndef DLPROF_CORE_EXIT_EXEC_H_
#define DLPROF_CORE_EXIT_EXEC_H_

#include <stdarg.h>

namespace dlprof {

// Looks up the next definitions of _exit and the exec functions, so that the
// interposers never call dlsym later (they may run in a signal handler).
// Called from the library constructor, whether or not profiling is on.
void ResolveExecFunctions();

// The interposers' work (core/hooks.cc). _exit first has the collector end
// the profile (bounded, core/session.h BeforeQuickExit); each exec ends it
// before the call and resumes it if the call returns. Each forwards to the
// next definition with the same arguments, and errno is the call's own.
// ProgramQuickExit is safe to call from asynchronous signals.
[[noreturn]] void ProgramQuickExit(int status);
int ProgramExecve(const char* path, char* const argv[], char* const envp[]);
int ProgramExecvpe(const char* file, char* const argv[], char* const envp[]);
int ProgramExecv(const char* path, char* const argv[]);
int ProgramExecvp(const char* file, char* const argv[]);
int ProgramFexecve(int fd, char* const argv[], char* const envp[]);
int ProgramExecveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                    int flags);
// An execl-style call: argv is arg0 and the variadic arguments up to NULL
// (then envp, with env_follows), built on the stack, then call(target, argv,
// envp) (envp is NULL without env_follows).
int ExecWithListArgs(const char* arg0, va_list ap, bool env_follows,
                     int (*call)(const char* target, char* const argv[], char* const envp[]),
                     const char* target);

}  // namespace dlprof

#endif  // DLPROF_CORE_EXIT_EXEC_H_
