// The work behind the unshare, setns, prctl and syscall interposers
// (core/hooks.cc): calls after which dlprof must act differently, forwarded
// to the next definition with the program's arguments, result and errno.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <atomic>

#include "backends/private_fd.h"
#include "backends/unwinder.h"
#include "core/collector_process.h"
#include "core/hooks.h"
#include "core/session.h"

namespace dlprof {
namespace {

using UnshareFn = int (*)(int);
using SetnsFn = int (*)(int, int);
using PrctlFn = int (*)(int, ...);
using SyscallFn = long (*)(long, ...);

std::atomic<UnshareFn> g_unshare{nullptr};
std::atomic<SetnsFn> g_setns{nullptr};
std::atomic<PrctlFn> g_prctl{nullptr};
std::atomic<SyscallFn> g_syscall{nullptr};
using Pipe2Fn = int (*)(int*, int);
std::atomic<Pipe2Fn> g_pipe2{nullptr};
std::atomic<int (*)(const char*)> g_chroot{nullptr};

// The flags for which the kernel wants a single-threaded caller:
// CLONE_NEWUSER (it implies CLONE_THREAD), CLONE_THREAD, CLONE_SIGHAND, CLONE_VM.
constexpr int kSingleThreadFlags = CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM;

// Runs call() with the collector out of the way; errno is the call's.
template <typename Call>
int WithoutCollector(Call call) {
  const bool paused = PauseCollector();
  const int rc = call();
  const int saved = errno;
  ResumeCollector(paused);
  errno = saved;
  return rc;
}

}  // namespace

void ResolveProcessCalls() {
  NextDefinition(&g_unshare, "unshare");
  NextDefinition(&g_setns, "setns");
  NextDefinition(&g_prctl, "prctl");
  NextDefinition(&g_syscall, "syscall");
  NextDefinition(&g_pipe2, "pipe2");
  NextDefinition(&g_chroot, "chroot");
}

namespace {

// glibc runs a set*id call on every thread of the process (its setxid
// broadcast) and aborts the process when it succeeds on one thread and fails
// on another. Credentials are per thread: after PR_SET_KEEPCAPS, setresuid
// and a capset() on the calling thread alone (setpriv --reuid does this),
// the collector could no longer setresgid, and glibc aborted the program
// (SIGABRT, 134). So when the collector's credentials are not the caller's,
// the collector is out of the way for the call, and the one that comes back
// is started by the caller, with its credentials. (Always out of the way, a
// server toggling its euid paid a thread's end and start per call: 2,000
// seteuid calls took 5.7 s; comparing takes two /proc reads.)
template <typename Fn, typename... Args>
int CredentialCall(std::atomic<Fn>* slot, const char* name, Args... args) {
  Fn f = NextDefinition(slot, name);
  if (f == nullptr) return NoNextDefinition();
  BeforeCredentialChange();
  const int saved = errno;
  const bool same = CollectorHasCallersCredentials();
  errno = saved;
  if (same) return f(args...);
  return WithoutCollector([&] { return f(args...); });
}

std::atomic<int (*)(uid_t)> g_setuid{nullptr}, g_seteuid{nullptr};
std::atomic<int (*)(uid_t, uid_t)> g_setreuid{nullptr};
std::atomic<int (*)(uid_t, uid_t, uid_t)> g_setresuid{nullptr};
std::atomic<int (*)(gid_t)> g_setgid{nullptr}, g_setegid{nullptr};
std::atomic<int (*)(gid_t, gid_t)> g_setregid{nullptr};
std::atomic<int (*)(gid_t, gid_t, gid_t)> g_setresgid{nullptr};
std::atomic<int (*)(size_t, const gid_t*)> g_setgroups{nullptr};

}  // namespace

int ProgramSetuid(uid_t uid) { return CredentialCall(&g_setuid, "setuid", uid); }
int ProgramSeteuid(uid_t uid) { return CredentialCall(&g_seteuid, "seteuid", uid); }
int ProgramSetreuid(uid_t r, uid_t e) { return CredentialCall(&g_setreuid, "setreuid", r, e); }
int ProgramSetresuid(uid_t r, uid_t e, uid_t s) {
  return CredentialCall(&g_setresuid, "setresuid", r, e, s);
}
int ProgramSetgid(gid_t gid) { return CredentialCall(&g_setgid, "setgid", gid); }
int ProgramSetegid(gid_t gid) { return CredentialCall(&g_setegid, "setegid", gid); }
int ProgramSetregid(gid_t r, gid_t e) { return CredentialCall(&g_setregid, "setregid", r, e); }
int ProgramSetresgid(gid_t r, gid_t e, gid_t s) {
  return CredentialCall(&g_setresgid, "setresgid", r, e, s);
}
int ProgramSetgroups(size_t n, const gid_t* groups) {
  return CredentialCall(&g_setgroups, "setgroups", n, groups);
}

int ProgramPipe2(int fds[2], int flags, uintptr_t caller) {
  Pipe2Fn f = g_pipe2.load(std::memory_order_acquire);
  if (f == nullptr) f = NextDefinition(&g_pipe2, "pipe2");
  if (f == nullptr) return NoNextDefinition();
  const int rc = f(fds, flags);
  if (rc != 0 || !LibunwindCalledFrom(caller)) return rc;
  // libunwind's validation pipe: moved to numbers the program does not reach
  // (the two descriptors stay, and count against RLIMIT_NOFILE: libunwind
  // has no other way to check an address).
  const int floor = PrivateFdFloor();
  for (int i = 0; i < 2; ++i) {
    const int high = fcntl(fds[i], F_DUPFD_CLOEXEC, floor);
    if (high < 0) continue;
    close(fds[i]);
    fds[i] = high;
  }
  return 0;
}

int ProgramUnshare(int flags) {
  UnshareFn f = NextDefinition(&g_unshare, "unshare");
  if (f == nullptr) return NoNextDefinition();
  if ((flags & kSingleThreadFlags) == 0) return f(flags);
  return WithoutCollector([&] { return f(flags); });
}

int ProgramSetns(int fd, int nstype) {
  SetnsFn f = NextDefinition(&g_setns, "setns");
  if (f == nullptr) return NoNextDefinition();
  // nstype 0 lets the kernel take the namespace's own type, a user one too.
  if (nstype != 0 && (nstype & CLONE_NEWUSER) == 0) return f(fd, nstype);
  return WithoutCollector([&] { return f(fd, nstype); });
}

int ProgramPrctl(int option, unsigned long a2, unsigned long a3, unsigned long a4,
                 unsigned long a5) {
  PrctlFn f = NextDefinition(&g_prctl, "prctl");
  if (f == nullptr) return NoNextDefinition();
  if (option == PR_SET_SECCOMP && (a2 == SECCOMP_MODE_FILTER || a2 == SECCOMP_MODE_STRICT)) {
    BeforeSeccompFilter();
  }
  const int rc = f(option, a2, a3, a4, a5);
  if (rc == 0 && option == PR_SET_CHILD_SUBREAPER && a2 != 0) NoteProgramMadeASubreaper();
  if (rc == 0 && option == PR_SET_TSC && a2 == PR_TSC_SIGSEGV) {
    const int saved = errno;
    AfterTscDisabled();
    errno = saved;
  }
  return rc;
}

long ProgramSyscall(long number, long a0, long a1, long a2, long a3, long a4, long a5) {
  SyscallFn f = NextDefinition(&g_syscall, "syscall");
  if (f == nullptr) return NoNextDefinition();
  if (number == SYS_seccomp && (a0 == SECCOMP_SET_MODE_FILTER || a0 == SECCOMP_SET_MODE_STRICT)) {
    BeforeSeccompFilter();
  }
  const long rc = f(number, a0, a1, a2, a3, a4, a5);
  if (rc == 0 && number == SYS_prctl && a0 == PR_SET_CHILD_SUBREAPER && a1 != 0) {
    NoteProgramMadeASubreaper();
  }
  return rc;
}

int ProgramChroot(const char* path) {
  auto f = NextDefinition(&g_chroot, "chroot");
  if (f == nullptr) return NoNextDefinition();
  // The profile is opened by its path at each write: inside the new root
  // that path is another one, or none.
  const int saved = errno;
  BeforeRunFolderLost();
  errno = saved;
  return f(path);
}

}  // namespace dlprof
