#include "core/collector_spawn.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <atomic>

#include "core/raw_syscall.h"

namespace dlprof {
namespace {

// Shared with both children (CLONE_VM). Each writes only helper_pid and
// failed_*, and only while the parent waits (CLONE_VFORK); the parent reads
// them after the intermediate has exited.
// glibc's clone. Under ThreadSanitizer the `clone` symbol is TSan's
// interceptor, which takes every clone for a fork: in the child it resets
// TSan's own state, which a CLONE_VM child shares with its caller. The
// caller's mutexes were then unknown to TSan (a fresh-clone TSan pass
// reported races on data under a mutex, examples/pipeline/buffer.h, in
// every profiled program that spawned a helper). Elsewhere it is `clone`.
#if defined(__SANITIZE_THREAD__)
#define DLPROF_CLONE_INTERCEPTED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DLPROF_CLONE_INTERCEPTED 1
#endif
#endif
using CloneFn = int (*)(int (*)(void*), void*, int, void*, ...);
#ifdef DLPROF_CLONE_INTERCEPTED
std::atomic<CloneFn> g_libc_clone{nullptr};
#endif

CloneFn LibcClone() {
#ifdef DLPROF_CLONE_INTERCEPTED
  if (g_libc_clone.load() == nullptr) ResolveLibcClone();  // a test's direct call
  if (CloneFn fn = g_libc_clone.load()) return fn;
#endif
  return &clone;
}

struct ChildArgs {
  CloneFn clone;  // LibcClone(), asked by the caller (the child runs no sanitized code)
  const char* path;
  const char* const* argv;
  const char* const* envp;
  int pass_fd;
  int pass_fd2;  // at 5
  pid_t helper_pid;
  int failed_step;  // 0: the helper exec'd
  int failed_errno;
  // A kernel sigaction of SIG_DFL, in any architecture's layout: all zero.
  unsigned long default_action[4];
  unsigned long empty_mask;
  char* helper_stack_top;
};

enum Step { kExecd = 0, kPassFd, kCloseFds, kOpenNull, kStdio, kSetsid, kCloneHelper, kExec };

const char* StepName(int step) {
  switch (step) {
    case kPassFd: return "placing the passed fds at 3 and 5";
    case kCloseFds: return "closing the caller's fds";
    case kOpenNull: return "opening /dev/null";
    case kStdio: return "placing /dev/null at 0-2";
    case kSetsid: return "setsid";
    case kCloneHelper: return "clone";
    case kExec: return "execve";
  }
  return "?";
}

// Both children share the caller's memory and thread pointer until execve:
// raw system calls only (no libc function that takes a lock or sets errno,
// no sanitizer runtime), writing nothing but their own stacks and ChildArgs.
#define DLPROF_CHILD_CODE no_sanitize("address", "thread", "undefined")

__attribute__((always_inline, DLPROF_CHILD_CODE)) inline long Sys(long n, long a = 0, long b = 0,
                                                                  long c = 0, long d = 0) {
  return RawSyscall6(n, a, b, c, d, 0, 0);
}

// close_range, or before Linux 5.9 each fd below the limit.
__attribute__((always_inline, DLPROF_CHILD_CODE)) inline long CloseRange(unsigned first,
                                                                         unsigned last) {
  long rc = Sys(SYS_close_range, first, last, 0);
  if (rc != -ENOSYS) return rc;
  struct rlimit limit;
  rc = Sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&limit));
  if (rc < 0) return rc;
  for (rlim_t fd = first; fd <= last && fd < limit.rlim_cur; ++fd) Sys(SYS_close, fd);
  return 0;
}

[[noreturn]] __attribute__((always_inline, DLPROF_CHILD_CODE)) inline void Fail(ChildArgs* a,
                                                                                int step, long rc) {
  a->failed_errno = static_cast<int>(-rc);
  a->failed_step = step;
  Sys(SYS_exit_group, 127);
  __builtin_unreachable();
}

// The helper: the intermediate's child, so an orphan as soon as it execs.
__attribute__((noinline, DLPROF_CHILD_CODE)) int HelperMain(void* p) {
  ChildArgs* a = static_cast<ChildArgs*>(p);
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&a->empty_mask), 0, _NSIG / 8);
  Fail(a, kExec,
       Sys(SYS_execve, reinterpret_cast<long>(a->path), reinterpret_cast<long>(a->argv),
           reinterpret_cast<long>(a->envp)));
}

// The intermediate: cloned with exit signal 0 and never exec'd, so no wait
// of the caller's sees it (only __WALL or __WCLONE); it exits as soon as the
// helper has exec'd. (An exec'd child would not do: execve sets the exit
// signal to SIGCHLD.) It prepares everything the helper inherits.
__attribute__((noinline, DLPROF_CHILD_CODE)) int IntermediateMain(void* p) {
  ChildArgs* a = static_cast<ChildArgs*>(p);
  long rc = 0;
  // Every signal is blocked (the caller's mask): reset the dispositions
  // before the helper unblocks, so that none of the caller's handlers runs.
  for (long sig = 1; sig < _NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    Sys(SYS_rt_sigaction, sig, reinterpret_cast<long>(a->default_action), 0, _NSIG / 8);
  }
  // The helper is then in this session but not its leader: opening a
  // terminal cannot make it the helper's controlling one.
  if ((rc = Sys(SYS_setsid)) < 0) Fail(a, kSetsid, rc);
  // The passed fds first, so that closing 0-2 and the rest cannot take them.
  // The second goes out of the way first (above 5: F_DUPFD gives a new
  // number, so neither passed fd is overwritten before it is placed).
  long second = -1;
  if (a->pass_fd2 >= 0 && (second = Sys(SYS_fcntl, a->pass_fd2, F_DUPFD, 6)) < 0) {
    Fail(a, kPassFd, second);
  }
  if (a->pass_fd == 3) {
    rc = Sys(SYS_fcntl, 3, F_SETFD, 0);
  } else if (a->pass_fd >= 0) {
    rc = Sys(SYS_dup3, a->pass_fd, 3, 0);
  }
  if (rc < 0) Fail(a, kPassFd, rc);
  if (second >= 0 && (rc = Sys(SYS_dup3, second, 5, 0)) < 0) Fail(a, kPassFd, rc);
  // Closed before the opens, so that a full fd table (RLIMIT_NOFILE) has room.
  if ((rc = CloseRange(0, 2)) < 0 || (rc = CloseRange(a->pass_fd >= 0 ? 4 : 3, 4)) < 0 ||
      (rc = CloseRange(second >= 0 ? 6 : 5, ~0U)) < 0) {
    Fail(a, kCloseFds, rc);
  }
  // The caller's soft limit is for the caller: with its table full, the
  // helper's loader could not open a library, nor this the pidfd.
  struct rlimit files;
  if (Sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&files)) == 0 &&
      files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    Sys(SYS_prlimit64, 0, RLIMIT_NOFILE, reinterpret_cast<long>(&files), 0);
  }
  rc = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDWR, 0);
  if (rc < 0) Fail(a, kOpenNull, rc);
  if ((rc = Sys(SYS_dup3, 0, 1, 0)) < 0 || (rc = Sys(SYS_dup3, 0, 2, 0)) < 0) Fail(a, kStdio, rc);
  // The caller is alive (it waits for this process): its pidfd is its own.
  // Without pidfds (before Linux 5.3) or room for fd 4, the helper has none.
  // (pidfd_open sets FD_CLOEXEC; dup3 clears it.)
  const long pidfd = Sys(SYS_pidfd_open, Sys(SYS_getppid), 0);
  if (pidfd == 4) {
    Sys(SYS_fcntl, 4, F_SETFD, 0);
  } else if (pidfd >= 0) {
    Sys(SYS_dup3, pidfd, 4, 0);
    Sys(SYS_close, pidfd);
  }
  // glibc's clone is a system call and a jump: no lock; errno is restored
  // by the caller.
  const pid_t helper = a->clone(HelperMain, a->helper_stack_top, CLONE_VM | CLONE_VFORK, a);
  if (helper < 0) Fail(a, kCloneHelper, -errno);
  if (a->failed_step != kExecd) {
    Sys(SYS_wait4, helper, 0, __WALL);
    Sys(SYS_exit_group, 127);
  }
  a->helper_pid = helper;
  Sys(SYS_exit_group, 0);
  return 0;
}

}  // namespace

void ResolveLibcClone() {
#ifdef DLPROF_CLONE_INTERCEPTED
  if (g_libc_clone.load() != nullptr) return;
  // A handle's lookup starts in that object: libc's own definition.
  if (void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD)) {
    g_libc_clone.store(reinterpret_cast<CloneFn>(dlsym(libc, "clone")));
    dlclose(libc);
  }
#endif
}

pid_t SpawnInvisibleChild(const char* path, const char* const argv[], const char* const envp[],
                          int pass_fd, std::string* error, int pass_fd2) {
  static const char* const kNoEnv[] = {nullptr};
  const int saved_errno = errno;
  // Both children's stacks are in this frame: this thread is suspended while
  // they run (CLONE_VFORK), and a mapping would cost an munmap, which in a
  // multi-threaded process is a TLB shootdown on every CPU it runs on.
  alignas(64) char stacks[2][8192];
  ChildArgs args = {};
  args.clone = LibcClone();
  args.path = path;
  args.argv = argv;
  args.envp = envp != nullptr ? envp : kNoEnv;
  args.pass_fd = pass_fd;
  args.pass_fd2 = pass_fd2;
  args.helper_stack_top = stacks[0] + sizeof stacks[0];
  // Blocked in the raw call: glibc's sigprocmask leaves its own two signals
  // (cancellation, setxid) open, and their handlers must not run in a child.
  unsigned long all = ~0UL, old = 0;
  RawSyscall6(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&all),
              reinterpret_cast<long>(&old), _NSIG / 8, 0, 0);
  const pid_t intermediate =
      args.clone(IntermediateMain, stacks[1] + sizeof stacks[1], CLONE_VM | CLONE_VFORK, &args);
  const int clone_errno = errno;
  RawSyscall6(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&old), 0, _NSIG / 8, 0, 0);
  // It has exited, or is exiting: CLONE_VFORK returns at its mm's release.
  if (intermediate >= 0) ReapInvisibleChild(intermediate, true, nullptr);
  if (intermediate >= 0 && args.failed_step == kExecd && args.helper_pid <= 0) {
    args.failed_step = kCloneHelper;  // killed before it could say
    args.failed_errno = EINTR;
  }
  if (intermediate < 0 || args.failed_step != kExecd) {
    if (error != nullptr) {
      const int err = intermediate < 0 ? clone_errno : args.failed_errno;
      *error = std::string("starting ") + path + ": " +
               (intermediate < 0 ? "clone" : StepName(args.failed_step)) + ": " + strerror(err);
    }
    errno = saved_errno;
    return -1;
  }
  errno = saved_errno;
  return args.helper_pid;
}

bool ReapInvisibleChild(pid_t pid, bool wait, int* status) {
  const int saved_errno = errno;
  int st = 0;
  pid_t rc;
  do {
    rc = waitpid(pid, &st, __WALL | (wait ? 0 : WNOHANG));
  } while (rc < 0 && errno == EINTR);
  errno = saved_errno;
  if (rc != pid) return false;
  if (status != nullptr) *status = st;
  return true;
}

}  // namespace dlprof
