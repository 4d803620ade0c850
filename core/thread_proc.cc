#include "core/thread_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>

#include <dlprof/format.h>

#include "backends/private_fd.h"
#include "core/proc_maps.h"

namespace dlprof {
namespace {

// /proc/self/task/<tid>/<leaf>, or the same of process `pid` (not 0).
void TaskPath(char* out, size_t size, pid_t pid, pid_t tid, const char* leaf) {
  if (pid == 0) snprintf(out, size, "/proc/self/task/%d/%s", tid, leaf);
  else snprintf(out, size, "/proc/%d/task/%d/%s", static_cast<int>(pid), tid, leaf);
}

// Whether this process's /proc is there at all: after a chroot into a
// folder without one it is not, and every read of it fails with ENOENT, as
// for a thread that is gone.
bool ProcVisible() { return access("/proc/self/stat", F_OK) == 0; }

// The unknown call of a thread that sleeps, by its stat file (readable
// where its syscall file is not: a process that is not dumpable, or that
// changed its credentials).
uint64_t StateFromStat(pid_t pid, pid_t tid) {
  const char state = ThreadState(tid, pid);
  return state == 'S' || state == 'D' ? 1 + static_cast<uint64_t>(DLPROF_SYSCALL_UNKNOWN) : 0;
}

}  // namespace

int64_t ParseSchedstat(const char* text, int64_t* cpu_ns, uint64_t* slices) {
  char* end = nullptr;
  const unsigned long long cpu = strtoull(text, &end, 10);
  if (end == text) return -1;
  const char* p = end;
  const unsigned long long delay = strtoull(p, &end, 10);
  if (end == p) return -1;
  if (cpu_ns != nullptr) *cpu_ns = static_cast<int64_t>(cpu);
  if (slices != nullptr) {
    p = end;
    *slices = strtoull(p, &end, 10);
  }
  return static_cast<int64_t>(delay);
}

SyscallRead ParseSyscall(const char* text) {
  SyscallRead out;
  char* end = nullptr;
  const long nr = strtol(text, &end, 10);
  if (end == text || nr < 0) return out;  // "running", or -1 (in the kernel, no call)
  out.state = static_cast<uint64_t>(nr) + 1;
  unsigned long long field[8];
  int got = 0;
  for (const char* p = end; got < 8; ++got) {
    field[got] = strtoull(p, &end, 16);
    if (end == p) break;
    p = end;
  }
  if (got == 8) {
    out.sp = static_cast<uintptr_t>(field[6]);
    out.pc = static_cast<uintptr_t>(field[7]);
    out.regs = out.sp != 0 && out.pc != 0;
  }
  return out;
}

size_t ThreadProcFiles::KeptThreadsLimit() {
  if (kept_limit_ == 0) {
    // Two descriptors a thread, and room left for the helper's others under
    // its soft RLIMIT_NOFILE (raised to the hard one at its start, which a
    // container may keep at 1024).
    rlimit files{};
    size_t limit = kMaxThreads;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
      const rlim_t room = files.rlim_cur > 128 ? (files.rlim_cur - 128) / 2 : 0;
      limit = std::min<size_t>(limit, static_cast<size_t>(room));
    }
    kept_limit_ = std::max<size_t>(limit, 1);
  }
  return kept_limit_;
}

void ThreadProcFiles::set_pid(pid_t pid) {
  if (pid == pid_) return;
  CloseAll();
  pid_ = pid;
}

ssize_t ThreadProcFiles::Read(pid_t tid, File file, char* buf, size_t size) {
  const char* leaf = file == File::kSchedstat ? "schedstat" : "syscall";
  char path[64];
  auto it = pid_ == 0 ? fds_.end() : fds_.find(tid);
  if (pid_ == 0 || (it == fds_.end() && fds_.size() >= KeptThreadsLimit())) {
    // In place, or past the threads whose files are kept: opened for the
    // read only.
    TaskPath(path, sizeof(path), pid_, tid, leaf);
    const int fd = pid_ == 0 ? OpenOwn(AT_FDCWD, path, O_RDONLY) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    const ssize_t n = read(fd, buf, size - 1);
    const int saved = errno;
    close(fd);
    errno = saved;
    if (n >= 0) buf[n] = '\0';
    return n;
  }
  if (it == fds_.end()) it = fds_.emplace(tid, Fds{}).first;
  int& fd = file == File::kSchedstat ? it->second.schedstat : it->second.syscall;
  if (fd < 0) {
    TaskPath(path, sizeof(path), pid_, tid, leaf);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      // Gone, or not ours to read: no entry left holding a place.
      const int saved = errno;
      if (it->second.schedstat < 0 && it->second.syscall < 0) fds_.erase(it);
      errno = saved;
      return -1;
    }
  }
  ssize_t n;
  do {
    n = pread(fd, buf, size - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && errno != EACCES && errno != EPERM) {
    // Gone (ESRCH): its number may come back as another thread's.
    const int saved = errno;
    Forget(tid);
    errno = saved;
    return -1;
  }
  if (n >= 0) buf[n] = '\0';
  return n;
}

int64_t ThreadProcFiles::Schedstat(pid_t tid, int64_t* cpu_ns, uint64_t* slices) {
  char buf[96];
  if (Read(tid, File::kSchedstat, buf, sizeof(buf)) <= 0) return -1;
  return ParseSchedstat(buf, cpu_ns, slices);
}

SyscallRead ThreadProcFiles::Syscall(pid_t tid) {
  char buf[256];
  const ssize_t n = Read(tid, File::kSyscall, buf, sizeof(buf));
  if (n < 0 && (errno == EACCES || errno == EPERM)) {
    SyscallRead out;
    out.state = StateFromStat(pid_, tid);
    return out;
  }
  if (n < 0 && errno == ENOENT && pid_ == 0 && !ProcVisible()) {
    // No /proc here (the program chrooted into a folder without one): the
    // thread, asked because it ran less than 90% of the tick, was off a
    // core for the rest. Blocked, call unknown; a wait for a core cannot be
    // told from it without schedstat either. (It came out as running.)
    SyscallRead out;
    out.state = 1 + static_cast<uint64_t>(DLPROF_SYSCALL_UNKNOWN);
    return out;
  }
  if (n <= 0) return SyscallRead{};
  return ParseSyscall(buf);
}

std::string ThreadProcFiles::Name(pid_t tid) const {
  char path[64];
  TaskPath(path, sizeof(path), pid_, tid, "comm");
  std::string name;
  if (FILE* f = FopenOwn(path)) {
    char buf[64];
    if (fgets(buf, sizeof(buf), f) != nullptr) name = buf;
    fclose(f);
  }
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

void ThreadProcFiles::Forget(pid_t tid) {
  const auto it = fds_.find(tid);
  if (it == fds_.end()) return;
  if (it->second.schedstat >= 0) close(it->second.schedstat);
  if (it->second.syscall >= 0) close(it->second.syscall);
  fds_.erase(it);
}

void ThreadProcFiles::CloseAll() {
  for (const auto& [tid, fds] : fds_) {
    if (fds.schedstat >= 0) close(fds.schedstat);
    if (fds.syscall >= 0) close(fds.syscall);
  }
  fds_.clear();
}

}  // namespace dlprof
