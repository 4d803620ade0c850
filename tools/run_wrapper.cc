#include "tools/run_wrapper.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "reports/utf8.h"

namespace dlprof {

bool ForwardsSignal(int sig) {
  switch (sig) {
    case SIGKILL: case SIGSTOP: case SIGCHLD:
      return false;
    default:
      // glibc keeps two real-time signals for itself (below SIGRTMIN).
      return sig > 0 && sig <= SIGRTMAX && (sig < SIGRTMIN - 2 || sig >= SIGRTMIN);
  }
}

namespace {

sigset_t ForwardedSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig = 1; sig <= SIGRTMAX; ++sig) {
    if (ForwardsSignal(sig)) sigaddset(&set, sig);
  }
  return set;
}

// Only a signal another process sent to dlprof is the program's. Not one that
// already reached the program: the kernel's to the whole foreground process
// group (the terminal's Ctrl-C, Ctrl-\, hangup and window size: si_code
// SI_KERNEL), or the program's own to its group (kill(0, ...), which holds
// dlprof). Nor one of dlprof's own making, which it drops: the kernel's for
// its resource limits (SIGXCPU, SIGXFSZ: SI_KERNEL, or SI_USER from itself),
// a write to a closed pipe (SIGPIPE, ignored before). Its own faults never
// come here: the kernel delivers SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP and
// a seccomp SIGSYS even while blocked, and abort() unblocks SIGABRT.
bool ForTheProgram(const siginfo_t& info, pid_t child) {
  if (info.si_code > 0) return false;  // the kernel's (SI_KERNEL is 0x80)
  return info.si_pid != child && info.si_pid != getpid();  // SI_USER, SI_QUEUE, SI_TKILL
}

// Job control: when the program stops (Ctrl-Z, a SIGTSTP or SIGSTOP sent to
// it or to dlprof, a background read of the terminal), dlprof stops too, by
// the same signal, so that the shell sees the job stopped as it would see
// the program alone; when the program ignores the signal neither stops.
// Stop signals for dlprof itself wait in its queue like the others (they
// are forwarded, never acted on), so its stop is raised here with the
// signal's default action, and the mask put back once SIGCONT resumes it.
void StopLikeTheProgram(int sig, const sigset_t& waited) {
  if (sig == SIGSTOP) {
    kill(getpid(), SIGSTOP);
    return;
  }
  if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU) return;
  struct sigaction dfl {}, old {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, &old);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  kill(getpid(), sig);
  sigprocmask(SIG_UNBLOCK, &one, nullptr);  // stops here until SIGCONT
  sigprocmask(SIG_BLOCK, &waited, nullptr);
  sigaction(sig, &old, nullptr);
}

void Forward(const siginfo_t& info, pid_t child) {
  if (info.si_code == SI_QUEUE) {
    sigqueue(child, info.si_signo, info.si_value);  // keeps the value sigqueue() sent
  } else {
    kill(child, info.si_signo);
  }
}

}  // namespace

int ReapOrphans() {
  int reaped = 0, status = 0;
  while (waitpid(-1, &status, WNOHANG) > 0) ++reaped;
  return reaped;
}

ProgramEnd RunProgram(const std::vector<std::string>& argv, const std::function<void()>& in_child,
                      const std::function<void(pid_t)>& before_reap) {
  ProgramEnd end;
  // Signals are taken with sigtimedwait() rather than handlers: nothing is
  // lost between fork and exec, no handler runs in the middle of dlprof's
  // code, and blocked signals are queued even for PID 1, whose signals with
  // the default action the kernel otherwise drops.
  const sigset_t forwarded = ForwardedSet();
  sigset_t waited = forwarded, original;
  sigaddset(&waited, SIGCHLD);
  sigprocmask(SIG_BLOCK, &waited, &original);
  // With SIGCHLD ignored (inherited so) the kernel would reap the program
  // itself and its status would be lost; the program gets it back as it was.
  struct sigaction dfl {}, original_chld {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGCHLD, &dfl, &original_chld);

  // The exec's errno comes back through a close-on-exec pipe, so that "could
  // not be started" is not mistaken for a program that exited 127.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    end.exec_errno = errno;
    fprintf(stderr, "dlprof: cannot run %s: pipe: %s\n", TerminalSafe(argv[0]).c_str(),
            strerror(errno));
    sigaction(SIGCHLD, &original_chld, nullptr);
    sigprocmask(SIG_SETMASK, &original, nullptr);
    return end;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    end.exec_errno = errno;
    fprintf(stderr, "dlprof: cannot run %s: fork: %s\n", TerminalSafe(argv[0]).c_str(),
            strerror(errno));
    close(report[0]);
    close(report[1]);
    sigaction(SIGCHLD, &original_chld, nullptr);
    sigprocmask(SIG_SETMASK, &original, nullptr);
    return end;
  }
  if (child == 0) {
    close(report[0]);
    sigaction(SIGCHLD, &original_chld, nullptr);
    sigprocmask(SIG_SETMASK, &original, nullptr);
    // Killed with dlprof: a SIGKILL for dlprof (Popen.kill(), a supervisor
    // past its grace period) was meant for the program, which would run on
    // alone otherwise. Kept across exec (but for a set-user-ID program).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // dlprof died before the line above
    in_child();
    execvp(args[0], args.data());
    const int err = errno;
    (void)!write(report[1], &err, sizeof(err));
    _exit(127);
  }
  close(report[1]);
  // dlprof's own writes (the report, its lines on stderr) must not kill it
  // with a SIGPIPE: its exit status is the program's. The child inherited
  // the disposition it had before this.
  signal(SIGPIPE, SIG_IGN);
  int err = 0;
  ssize_t got;
  while ((got = read(report[0], &err, sizeof(err))) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(err))) {
    end.exec_errno = err != 0 ? err : ENOEXEC;
    fprintf(stderr, "dlprof: cannot run %s: %s\n", TerminalSafe(argv[0]).c_str(),
            strerror(end.exec_errno));
  }

  bool ended = false, told = before_reap == nullptr;
  while (!ended) {
    siginfo_t info;
    const timespec second = {1, 0};  // reap even if a SIGCHLD was merged away
    const int sig = sigtimedwait(&waited, &info, &second);
    if (sig > 0 && sig != SIGCHLD && ForTheProgram(info, child)) Forward(info, child);
    if (!told) {
      // Ended, not reaped yet (WNOWAIT): the zombie is left as it is.
      siginfo_t gone {};
      if (waitid(P_PID, static_cast<id_t>(child), &gone, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          gone.si_pid == child) {
        told = true;
        before_reap(child);
      }
    }
    int status = 0;
    pid_t pid;
    // waitpid(-1): as PID 1, orphans of the program's are ours to reap.
    while ((pid = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
      if (pid != child) continue;
      if (WIFSTOPPED(status)) {
        StopLikeTheProgram(WSTOPSIG(status), waited);
      } else {
        end.status = status;
        ended = true;
      }
    }
    if (pid < 0 && errno == ECHILD && !ended) {
      // Someone else reaped the program (a ptracer?): its status is lost.
      fprintf(stderr, "dlprof: the program's exit status was lost (reaped elsewhere)\n");
      end.status = W_EXITCODE(1, 0);
      ended = true;
    }
  }
  // What came for the program before it ended is dropped: it was the
  // program's, and it must not stop the report. Signals from now on act on
  // dlprof itself (a second Ctrl-C stops the report).
  const timespec now = {0, 0};
  siginfo_t info;
  while (sigtimedwait(&forwarded, &info, &now) > 0) {
  }
  sigprocmask(SIG_SETMASK, &original, nullptr);
  return end;
}

int LeaveLike(const ProgramEnd& end) {
  if (end.exec_errno != 0) return end.exec_errno == ENOENT ? 127 : 126;  // as a shell says it
  if (WIFEXITED(end.status)) return WEXITSTATUS(end.status);
  if (!WIFSIGNALED(end.status)) return 1;
  const int sig = WTERMSIG(end.status);
  fflush(nullptr);
  // The program dumped its own core, if any; a second one from dlprof would
  // overwrite it (core_pattern "core") or be reported as another crash.
  prctl(PR_SET_DUMPABLE, 0);
  const rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  kill(getpid(), sig);
  sigprocmask(SIG_UNBLOCK, &one, nullptr);
  // Still alive: the kernel does not let PID 1 die of its own signal.
  return 128 + sig;
}

}  // namespace dlprof
