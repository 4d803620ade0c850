// Every libc function libdlprof interposes, and nothing else: the whole
// surface where dlprof steps between the program and glibc, one thin
// forwarder each (async-profiler keeps its hooks.cpp the same way). The work
// lives with the module that owns it (see core/hooks.h); a call dlprof has no
// business with goes straight to the next definition.
#include "core/hooks.h"

#include <grp.h>
#include <pty.h>
#include <link.h>
#include <stdarg.h>
#include <unistd.h>

#include <dlprof/dlprof.h>  // DLPROF_EXPORT

#include "core/exit_exec.h"
#include "core/proc_maps.h"
#include "core/signals.h"

// Same attributes as glibc's declarations give them.
extern "C" int dlprof_own_pthread_create(pthread_t*, const pthread_attr_t*, void* (*)(void*),
                                         void*) noexcept
    __attribute__((alias("pthread_create"), visibility("hidden"), nonnull(1, 3)));
extern "C" int dlprof_own_sigaction(int, const struct sigaction*, struct sigaction*) noexcept
    __attribute__((alias("sigaction"), visibility("hidden")));

namespace dlprof {

PthreadCreateFn OwnPthreadCreateAddress() { return dlprof_own_pthread_create; }
SigactionFn OwnSigactionAddress() { return dlprof_own_sigaction; }

}  // namespace dlprof

// --- threads ---

extern "C" DLPROF_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                                            void* (*fn)(void*), void* arg) {
  return dlprof::ProgramPthreadCreate(thread, attr, fn, arg);
}

// --- signals ---

extern "C" DLPROF_EXPORT int sigaction(int signo, const struct sigaction* __restrict act,
                                       struct sigaction* __restrict old) noexcept {
  return dlprof::ProgramSigactionCall(signo, act, old);
}

extern "C" DLPROF_EXPORT void (*signal(int signo, void (*handler)(int)) noexcept)(int) {
  return dlprof::ProgramSignalCall(signo, handler);
}

// A thread that blocks SIGPROF is not sampled while it does (core/session.h
// AfterProgramMask).
extern "C" DLPROF_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  return dlprof::ProgramSigmaskCall(how, set, old, true,
                                    reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}
extern "C" DLPROF_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  return dlprof::ProgramSigmaskCall(how, set, old, false,
                                    reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

// --- processes ---

extern "C" DLPROF_EXPORT pid_t fork() { return dlprof::ProgramFork(); }
extern "C" DLPROF_EXPORT pid_t forkpty(int* amaster, char* name, const struct termios* termp,
                                       const struct winsize* winp) noexcept {
  return dlprof::ProgramForkpty(amaster, name, termp, winp);
}

// --- leaving the image: _exit and exec ---

extern "C" DLPROF_EXPORT void _exit(int status) { dlprof::ProgramQuickExit(status); }
extern "C" DLPROF_EXPORT void _Exit(int status) { dlprof::ProgramQuickExit(status); }

extern "C" DLPROF_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return dlprof::ProgramExecve(path, argv, envp);
}
extern "C" DLPROF_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return dlprof::ProgramExecvpe(file, argv, envp);
}
extern "C" DLPROF_EXPORT int execv(const char* path, char* const argv[]) {
  return dlprof::ProgramExecv(path, argv);
}
extern "C" DLPROF_EXPORT int execvp(const char* file, char* const argv[]) {
  return dlprof::ProgramExecvp(file, argv);
}
extern "C" DLPROF_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  return dlprof::ProgramFexecve(fd, argv, envp);
}
extern "C" DLPROF_EXPORT int execveat(int dirfd, const char* path, char* const argv[],
                                      char* const envp[], int flags) {
  return dlprof::ProgramExecveat(dirfd, path, argv, envp, flags);
}

// The list forms build their argv on the stack and go through the vector forms.
extern "C" DLPROF_EXPORT int execl(const char* path, const char* arg0, ...) {
  va_list ap;
  va_start(ap, arg0);
  const int rc = dlprof::ExecWithListArgs(
      arg0, ap, false, [](const char* p, char* const a[], char* const*) { return execv(p, a); },
      path);
  va_end(ap);
  return rc;
}
extern "C" DLPROF_EXPORT int execlp(const char* file, const char* arg0, ...) {
  va_list ap;
  va_start(ap, arg0);
  const int rc = dlprof::ExecWithListArgs(
      arg0, ap, false, [](const char* f, char* const a[], char* const*) { return execvp(f, a); },
      file);
  va_end(ap);
  return rc;
}
extern "C" DLPROF_EXPORT int execle(const char* path, const char* arg0, ...) {
  va_list ap;
  va_start(ap, arg0);
  const int rc = dlprof::ExecWithListArgs(
      arg0, ap, true,
      [](const char* p, char* const a[], char* const* e) { return execve(p, a, e); }, path);
  va_end(ap);
  return rc;
}

// --- calls that need a single-threaded process, or change what dlprof may do ---

// unshare(CLONE_NEWUSER) and setns into a user namespace refuse a process
// with more than one thread (EINVAL): the collector thread steps out for
// the call (core/session.h PauseCollector).
extern "C" DLPROF_EXPORT int unshare(int flags) noexcept {
  return dlprof::ProgramUnshare(flags);
}
extern "C" DLPROF_EXPORT int setns(int fd, int nstype) noexcept {
  return dlprof::ProgramSetns(fd, nstype);
}

// prctl: a seccomp filter makes dlprof step aside first; PR_SET_TSC takes
// the calling thread out of sampling.
extern "C" DLPROF_EXPORT int prctl(int option, ...) noexcept {
  va_list ap;
  va_start(ap, option);
  unsigned long args[4];
  for (unsigned long& a : args) a = va_arg(ap, unsigned long);
  va_end(ap);
  return dlprof::ProgramPrctl(option, args[0], args[1], args[2], args[3]);
}

// syscall(): only SYS_seccomp is dlprof's business (libseccomp installs its
// filters that way); everything else passes with its six arguments. The
// variadic ABI says nothing of how many the caller passed: the sixth comes
// from the caller's stack whether it passed it or not, as in glibc's own
// syscall(), a word that is always there (the return address's neighbour).
// Not instrumented under ASan, which calls that read an underflow of the
// caller's frame (syscall(SYS_read, fd, buf, 1)).
extern "C" DLPROF_EXPORT __attribute__((no_sanitize_address)) long syscall(long number,
                                                                           ...) noexcept {
  va_list ap;
  va_start(ap, number);
  long args[6];
  for (long& a : args) a = va_arg(ap, long);
  va_end(ap);
  return dlprof::ProgramSyscall(number, args[0], args[1], args[2], args[3], args[4], args[5]);
}

// --- credentials: the profile file stays open across a privilege drop, and
// the collector thread leaves glibc's setxid broadcast ---

extern "C" DLPROF_EXPORT int setuid(uid_t uid) noexcept { return dlprof::ProgramSetuid(uid); }
extern "C" DLPROF_EXPORT int seteuid(uid_t uid) noexcept { return dlprof::ProgramSeteuid(uid); }
extern "C" DLPROF_EXPORT int setreuid(uid_t r, uid_t e) noexcept {
  return dlprof::ProgramSetreuid(r, e);
}
extern "C" DLPROF_EXPORT int setresuid(uid_t r, uid_t e, uid_t s) noexcept {
  return dlprof::ProgramSetresuid(r, e, s);
}
extern "C" DLPROF_EXPORT int setgid(gid_t gid) noexcept { return dlprof::ProgramSetgid(gid); }
extern "C" DLPROF_EXPORT int setegid(gid_t gid) noexcept { return dlprof::ProgramSetegid(gid); }
extern "C" DLPROF_EXPORT int setregid(gid_t r, gid_t e) noexcept {
  return dlprof::ProgramSetregid(r, e);
}
extern "C" DLPROF_EXPORT int setresgid(gid_t r, gid_t e, gid_t s) noexcept {
  return dlprof::ProgramSetresgid(r, e, s);
}
extern "C" DLPROF_EXPORT int setgroups(size_t n, const gid_t* groups) noexcept {
  return dlprof::ProgramSetgroups(n, groups);
}

extern "C" DLPROF_EXPORT int chroot(const char* path) noexcept { return dlprof::ProgramChroot(path); }

// --- descriptors ---

// libunwind's memory-validation pipe would take the program's lowest fd
// numbers (backends/unwinder.h LibunwindCalledFrom): moved high.
extern "C" DLPROF_EXPORT int pipe2(int fds[2], int flags) noexcept {
  return dlprof::ProgramPipe2(fds, flags, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}
extern "C" DLPROF_EXPORT int pipe(int fds[2]) noexcept {
  return dlprof::ProgramPipe2(fds, 0, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

// --- the loader (libunwind's lookups from the signal handler) ---

extern "C" DLPROF_EXPORT __attribute__((no_sanitize("address"))) int dl_iterate_phdr(
    int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  return dlprof::ProgramDlIteratePhdr(callback, data);
}
