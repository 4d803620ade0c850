// _exit() and the exec*() family, interposed so that a process leaving by
// either still ends its profile: a worker that ends with os._exit() (as
// Python's multiprocessing workers do) or that execs a new image is not
// reported as died, and a setitimer timer does not outlive the exec to kill
// the new image with SIGPROF. The program sees the same calls with the same
// results; dlprof waits at most a second for its collector (core/session.h).
//
// glibc's own internal calls (posix_spawn's child, system()) do not go through
// these symbols: they run in a child that shares no session, or in one whose
// profile the next image continues.
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "core/exit_exec.h"
#include "core/hooks.h"
#include "core/python_fork.h"
#include "core/session.h"

namespace dlprof {
namespace {

using ExitFn = void (*)(int);
using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using FexecveFn = int (*)(int, char* const[], char* const[]);
using ExecveatFn = int (*)(int, const char*, char* const[], char* const[], int);

// The next definitions after ours (glibc's, or a sanitizer's interceptor).
std::atomic<ExitFn> g_exit{nullptr};
std::atomic<ExecveFn> g_execve{nullptr}, g_execvpe{nullptr};
std::atomic<ExecvFn> g_execv{nullptr}, g_execvp{nullptr};
std::atomic<FexecveFn> g_fexecve{nullptr};
std::atomic<ExecveatFn> g_execveat{nullptr};

// Runs one exec call with the profile ended around it; re-arms if it returns.
template <typename Call>
int AroundExec(Call call) {
  TakeOwedResumes();  // the collector writes the END: back from a Python fork's pause
  BeforeExec();
  const int rc = call();
  const int saved = errno;
  AfterFailedExec();
  errno = saved;
  return rc;
}

// Calls call(argv, envp) with the argv of an execl-style call (arg0, then the
// variadic arguments up to NULL) built on this frame's stack; with
// env_follows (execle), envp is the pointer after that NULL.
template <typename Call>
int WithListArgs(const char* arg0, va_list ap, bool env_follows, Call call) {
  va_list scan;
  va_copy(scan, ap);
  size_t n = 0;
  if (arg0 != nullptr) {
    n = 1;
    while (va_arg(scan, const char*) != nullptr) ++n;
  }
  char* const* envp = env_follows ? va_arg(scan, char* const*) : nullptr;
  va_end(scan);
  char** argv = static_cast<char**>(alloca((n + 1) * sizeof(char*)));
  if (n > 0) argv[0] = const_cast<char*>(arg0);
  for (size_t i = 1; i < n; ++i) argv[i] = va_arg(ap, char*);
  argv[n] = nullptr;
  return call(argv, envp);
}

}  // namespace

void ResolveExecFunctions() {
  NextDefinition(&g_exit, "_exit");
  NextDefinition(&g_execve, "execve");
  NextDefinition(&g_execvpe, "execvpe");
  NextDefinition(&g_execv, "execv");
  NextDefinition(&g_execvp, "execvp");
  NextDefinition(&g_fexecve, "fexecve");
  NextDefinition(&g_execveat, "execveat");
}


void ProgramQuickExit(int status) {
  TakeOwedResumes();  // the collector writes the END: back from a Python fork's pause
  BeforeQuickExit(status);
  // The next _exit (glibc's, or a sanitizer's, which reports first); if it was
  // never resolved, what glibc's does.
  if (auto f = g_exit.load(std::memory_order_acquire)) f(status);
  for (;;) {
    syscall(SYS_exit_group, status);
    syscall(SYS_exit, status);
  }
}

int ProgramExecve(const char* path, char* const argv[], char* const envp[]) {
  auto f = NextDefinition(&g_execve, "execve");
  return f ? AroundExec([&] { return f(path, argv, envp); }) : NoNextDefinition();
}

int ProgramExecvpe(const char* file, char* const argv[], char* const envp[]) {
  auto f = NextDefinition(&g_execvpe, "execvpe");
  return f ? AroundExec([&] { return f(file, argv, envp); }) : NoNextDefinition();
}

int ProgramExecv(const char* path, char* const argv[]) {
  auto f = NextDefinition(&g_execv, "execv");
  return f ? AroundExec([&] { return f(path, argv); }) : NoNextDefinition();
}

int ProgramExecvp(const char* file, char* const argv[]) {
  auto f = NextDefinition(&g_execvp, "execvp");
  return f ? AroundExec([&] { return f(file, argv); }) : NoNextDefinition();
}

int ProgramFexecve(int fd, char* const argv[], char* const envp[]) {
  auto f = NextDefinition(&g_fexecve, "fexecve");
  return f ? AroundExec([&] { return f(fd, argv, envp); }) : NoNextDefinition();
}

int ProgramExecveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                    int flags) {
  auto f = NextDefinition(&g_execveat, "execveat");
  return f ? AroundExec([&] { return f(dirfd, path, argv, envp, flags); }) : NoNextDefinition();
}

int ExecWithListArgs(const char* arg0, va_list ap, bool env_follows,
                     int (*call)(const char* target, char* const argv[], char* const envp[]),
                     const char* target) {
  return WithListArgs(arg0, ap, env_follows,
                      [&](char** argv, char* const* envp) { return call(target, argv, envp); });
}

}  // namespace dlprof
