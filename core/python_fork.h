// Python 3.12+ warns at os.fork() when the process has another thread
// ("This process (pid=N) is multi-threaded, use of fork() may lead to
// deadlocks in the child"). It counts the threads in /proc/self/stat once
// the fork is done: 3.12 right after it, 3.13 after the at-fork hooks
// (strace of both). dlprof's collector thread would be counted, and every
// DataLoader worker's fork would warn under dlprof only.
//
// So around an os.fork() or os.forkpty() (the main thread, holding the GIL,
// in a 3.12+ interpreter) the collector leaves before the fork
// (PauseCollector) and comes back once the call has returned: by a pending
// call, which the interpreter runs from the main thread at a check of its
// eval breaker. Such a check can come inside os.fork still, in an at-fork
// hook written in Python, before 3.13 counts: the call then asks again
// while Python runs above the frame that called os.fork and that frame is
// still at the call (up to 10,000 asks). Samples wait in the rings
// meanwhile, as for a credential call; a thread that leaves the image
// (_exit, exec) brings the collector back first, to write the end. Python
// 3.14 counts before the fork (not tested: no 3.14 on the development
// machine).
#ifndef DLPROF_CORE_PYTHON_FORK_H_
#define DLPROF_CORE_PYTHON_FORK_H_

namespace dlprof {

// At session start: looks up Py_Version and the calls below (no libpython
// link). Nothing is found in a process that is not Python, or older than
// 3.12. Not signal-safe.
void FindPythonForkCalls();

// In fork(), before it: whether this fork is one Python 3.12+ counts
// threads after: made by the main thread while it holds the GIL.
bool ForkCountsPythonThreads();

// In fork(), in the parent, with the GIL still held: `resume` is called
// once from the main thread after os.fork has returned (a call for each
// fork). False when it cannot be arranged: the caller resumes at once.
bool ResumeAfterPythonFork(void (*resume)());

// The calling thread is about to leave the image (_exit, exec): the
// collector must write the file's end, so a resume still owed to a fork is
// done now. Any thread; not signal-safe.
void TakeOwedResumes();

// In a fork child: the parent's owed resumes and queued call are not the
// child's (CPython keeps its queue across fork: a parent's call that runs
// in the child finds nothing owed). Not signal-safe.
void ForgetPythonForkInChild();

}  // namespace dlprof

#endif  // DLPROF_CORE_PYTHON_FORK_H_
