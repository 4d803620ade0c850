// `dlprof run`'s process side: it starts the program, passes on every signal
// meant for it, reaps orphans while it waits (as PID 1 in a container they
// are reparented to it), and leaves the way the program left.
#ifndef DLPROF_TOOLS_RUN_WRAPPER_H_
#define DLPROF_TOOLS_RUN_WRAPPER_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace dlprof {

struct ProgramEnd {
  int exec_errno = 0;  // non-zero: the program could not be started at all
  int status = 0;      // its waitpid() status otherwise
};

// Runs argv (argv[0] looked up in PATH, as execvp does) as a child and waits
// for it, forwarding signals sent to dlprof (see ForwardsSignal). `in_child`
// runs in the child between fork and exec (it sets the environment). The
// child gets dlprof's own signal mask and dispositions, and dies with dlprof
// (PR_SET_PDEATHSIG, SIGKILL: the one signal dlprof cannot pass on). When the exec fails,
// one line "dlprof: cannot run X: why" goes to stderr.
// `before_reap`, if set, runs once the program has ended and before it is
// reaped, with its pid: its zombie still says how it ended, for a collector
// process to read (dlprof.cc waits there for the program's own).
ProgramEnd RunProgram(const std::vector<std::string>& argv, const std::function<void()>& in_child,
                      const std::function<void(pid_t)>& before_reap = nullptr);

// Whether dlprof passes `sig` on to the program while it runs, when another
// process sent it to dlprof (`kill`, `docker stop`, a supervisor): every
// signal but the uncatchable ones, SIGCHLD and glibc's two. SIGABRT, SIGSEGV
// and the other fault signals are forwarded too when a process sent them;
// the kernel's, for dlprof's own faults and limits, are not (see
// ForTheProgram in run_wrapper.cc). Job control (SIGTSTP, SIGTTIN,
// SIGTTOU) is forwarded and also stops dlprof, by the same signal, so the
// shell sees the job stopped; the terminal's Ctrl-Z reached both already.
bool ForwardsSignal(int sig);

// Reaps every child that has ended, without waiting: zombies of orphans
// reparented to dlprof when it is PID 1. Returns how many.
int ReapOrphans();

// The exit status dlprof returns for `end`: the program's exit status; 127 if
// it was not found, 126 if it could not be run. A program killed by a signal
// makes dlprof die by the same signal (without a core dump of its own), so
// the caller sees what it would have seen without dlprof; this returns
// 128 + N only where dlprof cannot die by it (as PID 1).
int LeaveLike(const ProgramEnd& end);

}  // namespace dlprof

#endif  // DLPROF_TOOLS_RUN_WRAPPER_H_
