// A thread's /proc files, as the collector's wall ticks read them: its
// schedstat (CPU time, run delay, slices) and its syscall file (running, or
// the call it is blocked in with its sp and pc), and its name. Read for
// this process (pid 0: /proc/self/task) or, from the collector process,
// for the program's (/proc/<pid>/task). Off the signal path.
#ifndef DLPROF_CORE_THREAD_PROC_H_
#define DLPROF_CORE_THREAD_PROC_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_map>

namespace dlprof {

// What a thread's syscall file says.
struct SyscallRead {
  uint64_t state = 0;  // 0: running, else 1 + the call's number (or DLPROF_SYSCALL_UNKNOWN)
  bool regs = false;   // sp and pc were read
  uintptr_t sp = 0, pc = 0;
};

// schedstat's text ("cpu_ns delay_ns slices"): the run delay, the CPU time
// into *cpu_ns and the slices run into *slices (each when not null); -1
// when it does not parse. Slices are counted when one starts: a thread
// running now has its slice counted, where its CPU time has it only once
// it stops.
int64_t ParseSchedstat(const char* text, int64_t* cpu_ns, uint64_t* slices);
// The syscall file's text: "running", "-1 ..." (in the kernel, no call), or
// "nr a1 a2 a3 a4 a5 a6 sp pc" (hex after nr).
SyscallRead ParseSyscall(const char* text);

// The files of process `pid`'s threads (0: this process's).
//  - In this process every read opens the file and closes it: dlprof keeps
//    no descriptor among the program's.
//  - From outside (the collector process, whose descriptors are its own)
//    each thread's files are opened once and read again with pread at each
//    tick: an open and a close were two of the three system calls of a
//    read, and the open the dearest (a path walk through /proc). A
//    descriptor of a thread that exited reads ESRCH, even when its number
//    came back as another thread's, and is closed then. Past
//    KeptThreadsLimit threads, a thread's files are opened for each read.
// Not thread-safe: the collector's.
class ThreadProcFiles {
 public:
  explicit ThreadProcFiles(pid_t pid = 0) : pid_(pid) {}
  ThreadProcFiles(const ThreadProcFiles&) = delete;
  ThreadProcFiles& operator=(const ThreadProcFiles&) = delete;
  ~ThreadProcFiles() { CloseAll(); }

  // Reads from outside from now on (process `pid`), or in place (0).
  void set_pid(pid_t pid);
  pid_t pid() const { return pid_; }

  // The thread's run delay (and CPU time and slices, when asked), -1 when it
  // cannot be read (gone, or no CONFIG_SCHED_INFO).
  int64_t Schedstat(pid_t tid, int64_t* cpu_ns = nullptr, uint64_t* slices = nullptr);
  // Running, or the call it is blocked in. A thread whose syscall file may
  // not be read (a process that is not dumpable) is blocked in an unknown
  // call when its stat says it sleeps; in this process without /proc (a
  // chroot), a thread asked is off its core: blocked, call unknown.
  SyscallRead Syscall(pid_t tid);
  // The thread's name (its comm), "" if unreadable.
  std::string Name(pid_t tid) const;
  // Forgets a thread that exited (closes its descriptors).
  void Forget(pid_t tid);
  void CloseAll();
  // Descriptors held (from outside).
  size_t open_files() const {
    size_t n = 0;
    for (const auto& [tid, fds] : fds_) n += (fds.schedstat >= 0) + (fds.syscall >= 0);
    return n;
  }

 private:
  struct Fds {
    int schedstat = -1, syscall = -1;
  };
  enum class File { kSchedstat, kSyscall };
  // The file's text into buf (NUL-terminated), its length, or -1 with errno.
  ssize_t Read(pid_t tid, File file, char* buf, size_t size);
  // Threads whose files are kept (from outside): at most kMaxThreads, and
  // what the soft RLIMIT_NOFILE leaves room for; the files of threads past
  // it are opened for each read.
  size_t KeptThreadsLimit();
  static constexpr size_t kMaxThreads = 1024;
  size_t kept_limit_ = 0;
  pid_t pid_;
  std::unordered_map<pid_t, Fds> fds_;
};

}  // namespace dlprof

#endif  // DLPROF_CORE_THREAD_PROC_H_
