// Where dlprof touches the program: every libc function that libdlprof
// exports in place of glibc's is defined in core/hooks.cc, in one thin
// forwarder each. What each one does is declared next to its work, here.
#ifndef DLPROF_CORE_HOOKS_H_
#define DLPROF_CORE_HOOKS_H_

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

struct termios;
struct winsize;

#include <atomic>

namespace dlprof {

// The next definition of `name` after libdlprof's (glibc's, or a
// sanitizer's interceptor), looked up once and cached in *slot. dlsym is
// not signal-safe: each module resolves its slots at start (its Resolve*
// function); from then on this is one atomic load.
template <typename Fn>
Fn NextDefinition(std::atomic<Fn>* slot, const char* name) {
  Fn f = slot->load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    slot->store(f, std::memory_order_release);
  }
  return f;
}

// What an interposer returns when there is no next definition: -1, ENOSYS.
inline int NoNextDefinition() {
  errno = ENOSYS;
  return -1;
}

// libdlprof's own pthread_create and sigaction, by addresses no other
// definition can interpose (hidden aliases, bound at link time): dlprof
// compares them with what the global lookup finds to learn whether another
// definition (a sanitizer's interceptor) comes first.
using PthreadCreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
PthreadCreateFn OwnPthreadCreateAddress();
SigactionFn OwnSigactionAddress();

// pthread_create (core/session_threads.cc): registers the new thread before its
// start routine runs, except dlprof's own threads.
int ProgramPthreadCreate(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                         void* arg);

// sigaction and signal (core/signals.cc; see core/signals.h for the view the
// program gets of the signals dlprof owns).
int ProgramSigactionCall(int signo, const struct sigaction* act, struct sigaction* old);
void (*ProgramSignalCall(int signo, void (*handler)(int)))(int);

// unshare, setns, prctl and syscall (core/process_calls.cc): see hooks.cc.
int ProgramUnshare(int flags);
int ProgramSetns(int fd, int nstype);
int ProgramPrctl(int option, unsigned long a2, unsigned long a3, unsigned long a4,
                 unsigned long a5);
// a0-a5: the six words after the number, as the caller passed them (by
// value: under ASan the interposer's frame, which is not instrumented, may
// lie where a stale redzone was, and a read of it there is reported).
// This function is safe to call from asynchronous signals once resolved.
long ProgramSyscall(long number, long a0, long a1, long a2, long a3, long a4, long a5);
// Looks up the next unshare, setns, prctl and syscall at start (syscall()
// is called from signal handlers: no dlsym there). Not signal-safe.
void ResolveProcessCalls();
// The set*id family and setgroups (core/process_calls.cc):
// BeforeCredentialChange (core/session.h), then the call with the collector
// thread out of glibc's setxid broadcast.
int ProgramSetuid(uid_t uid);
int ProgramSeteuid(uid_t uid);
int ProgramSetreuid(uid_t r, uid_t e);
int ProgramSetresuid(uid_t r, uid_t e, uid_t s);
int ProgramSetgid(gid_t gid);
int ProgramSetegid(gid_t gid);
int ProgramSetregid(gid_t r, gid_t e);
int ProgramSetresgid(gid_t r, gid_t e, gid_t s);
int ProgramSetgroups(size_t n, const gid_t* groups);
// chroot (core/process_calls.cc): the profile file is kept open from then
// on (BeforeRunFolderLost, core/session.h).
int ProgramChroot(const char* path);

// fork (core/session_fork.cc): the child's own profile is started by the
// fork handlers; this only takes the collector thread out of the count that
// Python 3.12+ makes of the process's threads after an os.fork()
// (core/python_fork.h). ResolveFork looks up the next fork at start.
pid_t ProgramFork();
// forkpty, which glibc forks by itself (os.forkpty warns as os.fork does).
pid_t ProgramForkpty(int* amaster, char* name, const struct termios* termp, const struct winsize* winp);
void ResolveFork();

// pipe2/pipe from `caller`; libunwind's pipe is moved to high numbers.
// Async-signal-safe (libunwind asks from inside the profiling handler).
int ProgramPipe2(int fds[2], int flags, uintptr_t caller);

}  // namespace dlprof

#endif  // DLPROF_CORE_HOOKS_H_
