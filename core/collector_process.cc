// Starting the collector process (core/collector_process.h).
#include "core/collector_process.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <atomic>
#include <string>
#include <vector>

#include <dlprof/format.h>

#include "backends/private_fd.h"
#include "core/collector_spawn.h"
#include "core/proc_maps.h"
#include "core/python_frames.h"
#include "core/raw_syscall.h"
#include "core/shared_arena.h"
#include "core/stderr_lines.h"

namespace dlprof {
namespace {

std::string* g_program = nullptr;  // dlprof-collector's path (FindCollectorProgram)

// The run's collectors lock (DLPROF_COLLECTORS_LOCK in the run folder), opened
// and share-locked for a helper to hold (its fd 5) until it exits: a reader
// waits for every helper of the run, including one whose file does not
// exist yet (the program may end before its helper made it). -1 if it
// cannot be had (the reader then cannot wait for this one). The reader's
// exclusive test lasts an instant: a few tries. Async-signal-safe.
int LockForHelper(const char* lock_path) {
  const int fd = OpenOwn(AT_FDCWD, lock_path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -1;
  for (int i = 0; i < 20; ++i) {
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) return fd;
    const timespec step{0, 100000};
    nanosleep(&step, nullptr);
  }
  close(fd);
  return -1;
}

// Whether the kernel says this process is a child subreaper (one raw
// prctl: no interposer, no allocation).
bool ChildSubreaperNow() {
  int subreaper = 0;
  return RawSyscall6(SYS_prctl, PR_GET_CHILD_SUBREAPER, reinterpret_cast<long>(&subreaper), 0, 0,
                     0, 0) == 0 &&
         subreaper != 0;
}

// This process's helper, for ReopenArenaFromHelper.
std::atomic<pid_t> g_helper_pid{0};

// Yama's ptrace_scope (-1: no Yama), read at session start when the helper
// will read a Python program's memory; 1 makes SpawnHelper name the helper
// the program's ptracer. A fork child inherits it.
std::atomic<int> g_yama_scope{-1};

int ReadYamaScope() {
  FILE* f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
  if (f == nullptr) return -1;
  int scope = -1;
  if (fscanf(f, "%d", &scope) != 1) scope = -1;
  fclose(f);
  return scope;
}

// The arena's memfd opened again through the helper's fd 3, for a program
// that closed dlprof's number (close_range): the shared arena can grow
// again (core/shared_arena.h checks it is the same file).
int ReopenArenaFromHelper() {
  const pid_t helper = g_helper_pid.load();
  if (helper <= 0) return -1;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/3", static_cast<int>(helper));
  return open(path, O_RDWR | O_CLOEXEC);
}

// Spawns the helper with the arena at fd 3 and the run's lock at fd 5.
pid_t SpawnHelper(const char* const argv[], int arena_fd, const char* lock_path,
                  std::string* error) {
  const int lock_fd = LockForHelper(lock_path);
  const pid_t pid = SpawnInvisibleChild(argv[0], argv, nullptr, arena_fd, error, lock_fd);
  if (lock_fd >= 0) close(lock_fd);  // the helper's copy holds the lock
  if (pid > 0) {
    g_helper_pid.store(pid);
    ArenaSetReopen(ReopenArenaFromHelper);
    // Under Yama's scope 1 only an ancestor, or the ptracer a process names,
    // may read its memory; the helper is neither until named. (It reads the
    // first code object after its first tick: the name is set by then.)
    if (g_yama_scope.load() == 1) RawSyscall6(SYS_prctl, PR_SET_PTRACER, pid, 0, 0, 0, 0);
  }
  return pid;
}

char g_lock_path[4096];  // the run's collectors lock (PrepareForkChildArgs)
std::atomic<bool> g_is_process{false};
// The program made itself a child subreaper after start (ProgramPrctl): a
// helper spawned from it or from a fork child of it would be adopted by it.
// Kept in memory, so a fork child knows it too.
std::atomic<bool> g_subreaper_in_program{false};
// An ancestor in the program reaps orphans (DLPROF_REAPER, below): read at
// session start, kept in memory for fork children.
std::atomic<bool> g_reaper_above{false};
// The process changed its credentials (set*id, setgroups): kept in memory
// for fork children.
std::atomic<bool> g_credentials_changed{false};

// A profiled process that reaps orphans (its PID namespace's init, or a
// child subreaper) names itself here for the processes it execs: a fork
// child knows it from memory, but an exec'd one (subprocess, a spawn or
// forkserver DataLoader worker) forgot it, and its helper was adopted by
// that process: foreign pids in its wait(), and zombies piling up under a
// Python that is PID 1 (`docker run` without --init), two per epoch.
constexpr char kReaperEnv[] = "DLPROF_REAPER";

void ExportReaper() {
  char pid[24];
  snprintf(pid, sizeof(pid), "%d", static_cast<int>(getpid()));
  setenv(kReaperEnv, pid, 1);
}

// Whether DLPROF_REAPER names a process that is still there (other than
// this one).
bool ReaperAbove() {
  const char* v = getenv(kReaperEnv);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  const long pid = strtol(v, &end, 10);
  if (*end != '\0' || pid <= 0 || pid == static_cast<long>(getpid())) return false;
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

// Whether a helper this process spawns would be re-parented to this process
// itself, an ordinary child its wait(-1) reaps (and waits for: the helper
// ends only after it): PID 1 of a PID namespace is every orphan's reaper
// there, and a child subreaper its descendants'. Allocates nothing (a fork
// child asks it).
const char* HelperWouldBeOurChild() {
  if (getpid() == 1) return "the process is its PID namespace's init: the helper would be its child";
  if (ChildSubreaperNow()) return "the process is a child subreaper: the helper would be its child";
  if (g_subreaper_in_program.load()) {
    return "a process of the program is a child subreaper: the helper would be its child";
  }
  if (g_reaper_above.load()) {
    return "a process of the program above this one reaps orphans: the helper would be its child";
  }
  return nullptr;
}

const char* HelperCannotServeForkChild() {
  if (const char* adopted = HelperWouldBeOurChild()) return adopted;
  // Its helper would have the child's credentials: it could neither make
  // the file in the run folder (made before the drop) nor say so on the
  // program's stderr (a pipe of the old user's, a process no longer
  // dumpable), and the worker went unprofiled without a word (hostile
  // review, session 26). The thread makes it or says why.
  if (g_credentials_changed.load()) return "the program changed its credentials since the start";
  return nullptr;
}

void NoteCredentialChange() { g_credentials_changed.store(true); }

namespace {
constexpr uint64_t kGenerationUnknown = UINT64_MAX;
std::atomic<uint64_t> g_generation_at_helper_read{kGenerationUnknown};
std::atomic<uint64_t> g_generation_at_fork{kGenerationUnknown};

// Never waits (a busy loader is "unknown"): asked at an exit, which may
// come from a signal handler that interrupted this thread's fork() inside
// the prepare handler, which holds dlprof's lock of the loader calls (the
// exit then waited for it for ever: hostile review, session 27).
uint64_t LoaderGenerationNow() {
  uint64_t generation = 0;
  return LoadedObjectsGenerationNoWait(&generation) ? generation : kGenerationUnknown;
}
}  // namespace

void NoteLoaderGenerationAtHelperStart() { g_generation_at_helper_read.store(LoaderGenerationNow()); }

void NoteLoaderGenerationAtFork() { g_generation_at_fork.store(LoaderGenerationNow()); }

void UseLoaderGenerationOfFork() { g_generation_at_helper_read.store(g_generation_at_fork.load()); }

bool LoadedObjectsChangedSinceHelperRead() {
  const uint64_t then = g_generation_at_helper_read.load();
  return then == kGenerationUnknown || LoaderGenerationNow() != then;
}

// Whether /proc is this PID namespace's: the helper finds the program by
// its pid there. In a PID namespace whose /proc was not mounted again
// (`unshare -fp` without --mount-proc), /proc/<our pid> is another process.
bool ProcIsOurs() {
  char self[32] = {};
  const ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);
  return n > 0 && atol(self) == static_cast<long>(getpid());
}

std::string CollectorProcessRefusal(const Config& config, bool python) {
  if (!config.collector_process) return "DLPROF_COLLECTOR is thread";
  if (ReaperAbove()) g_reaper_above.store(true);
  if (getpid() == 1 || ChildSubreaperNow()) ExportReaper();  // whatever this process gets
  if (!ArenaShared()) return "no shared memory here (memfd or MADV_WIPEONFORK refused)";
  if (!ProcIsOurs()) return "/proc is not this PID namespace's: the helper could not find the program";
  if (python) {
    // Its code objects are read from the helper (process_vm_readv), which
    // needs a ptrace attach's rights on the program.
    if (prctl(PR_GET_DUMPABLE) != 1) {
      return "the process is not dumpable: the helper could not read its Python code objects";
    }
    const int scope = ReadYamaScope();
    if (scope >= 2) {
      return "Yama's ptrace_scope is " + std::to_string(scope) +
             ": the helper could not read the Python code objects";
    }
    g_yama_scope.store(scope);
  }
  if (config.baseline_steps > 0) return "it cannot arm timers at a baseline's end yet";
  const char* adopted = HelperWouldBeOurChild();
  return adopted != nullptr ? adopted : "";
}

bool FindCollectorProgram(std::string* why) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&FindCollectorProgram), &info) == 0 ||
      info.dli_fname == nullptr) {
    *why = "libdlprof's own path is unknown";
    return false;
  }
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  path = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/dlprof-collector";
  if (access(path.c_str(), X_OK) != 0) {
    *why = "no " + path;
    return false;
  }
  if (g_program == nullptr) g_program = new std::string();
  *g_program = path;
  return true;
}

namespace {

// The arguments a process and its fork children share: the run folder, the
// tick, the mode.
std::vector<std::string> SharedArgs(const ProfileFileSpec& spec, int snapshot_ms, bool light,
                                    const Collector& c) {
  std::vector<std::string> args = {*g_program,
                                   "--run-path=" + spec.run_path,
                                   "--run-dev=" + std::to_string(spec.run_dev),
                                   "--run-ino=" + std::to_string(spec.run_ino),
                                   "--snapshot-ms=" + std::to_string(snapshot_ms),
                                   std::string("--mode=") + (light ? "light" : "detailed")};
  // DLPROF_CHECK_REUSED_WALKS: the helper checks its walks taken again.
  if (c.check_reused_walks()) args.push_back("--check-reused-walks");
  // CPython's: its minor version's structure table, the address of
  // _PyRuntime (where blocked threads' states are found) and those of its
  // code and string types, which the helper checks objects against (a fork
  // child has the same).
  // The program's stderr, where the helper's lines go (core/stderr_lines.h).
  unsigned long long dev = 0, ino = 0;
  if (RememberedStderr(&dev, &ino)) {
    args.push_back("--stderr=" + std::to_string(dev) + ":" + std::to_string(ino));
  }
  if (const PythonRuntime* py = ActivePython()) {
    char text[128];
    snprintf(text, sizeof(text), "--python=%u.%u:%#lx:%#lx:%#lx", py->layout->version >> 8,
             py->layout->version & 0xff, static_cast<unsigned long>(py->runtime),
             static_cast<unsigned long>(py->code_type),
             static_cast<unsigned long>(py->unicode_type));
    args.push_back(text);
  }
  return args;
}

}  // namespace

bool StartCollectorProcess(const Collector& c, const ProfileFileSpec& spec, int snapshot_ms,
                           bool light, bool file_at_once, std::string* why) {
  if (g_program == nullptr) {
    *why = "dlprof-collector was not found";
    return false;
  }
  const int arena_fd = ArenaSharedFd();
  if (arena_fd < 0) {
    *why = "the arena is no longer shared";
    return false;
  }
  std::vector<std::string> args = SharedArgs(spec, snapshot_ms, light, c);
  args.push_back("--pid=" + std::to_string(getpid()));
  args.push_back("--base=" + spec.base);
  args.push_back(std::string("--file-at-once=") + (file_at_once ? "1" : "0"));
  for (const auto& [key, value] : c.process_fields()) args.push_back("--field=" + key + "=" + value);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  std::string error;
  const std::string lock_path = spec.run_path + "/" DLPROF_COLLECTORS_LOCK;
  if (SpawnHelper(argv.data(), arena_fd, lock_path.c_str(), &error) < 0) {
    *why = "dlprof-collector could not be started: " + error;
    return false;
  }
  g_is_process.store(true);
  return true;
}

namespace {

// The fork child's arguments (PrepareForkChildArgs): the parent's strings,
// and fixed buffers the child formats its own values into.
constexpr int kChildOwnArgs = 7;  // StartCollectorProcessInForkChild's
constexpr int kMaxArgs = 96;
std::vector<std::string>* g_child_fixed = nullptr;
const char* g_child_argv[kMaxArgs];
char g_child_buffers[kChildOwnArgs][64];

// Writes `prefix` then `value` in decimal into `out` (size `size`): no
// allocation, no locale. Returns `out`.
char* Format(char* out, size_t size, const char* prefix, long long value) {
  size_t n = 0;
  for (const char* p = prefix; *p != '\0' && n + 1 < size; ++p) out[n++] = *p;
  char digits[24];
  int d = 0;
  unsigned long long v = value < 0 ? 0ull - static_cast<unsigned long long>(value)
                                   : static_cast<unsigned long long>(value);
  do {
    digits[d++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  if (value < 0 && n + 1 < size) out[n++] = '-';
  while (d > 0 && n + 1 < size) out[n++] = digits[--d];
  out[n] = '\0';
  return out;
}

int64_t ClockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

void PrepareForkChildArgs(const Collector& child_fields, const ProfileFileSpec& spec,
                          int snapshot_ms, bool light) {
  if (g_program == nullptr) return;
  auto* fixed = new std::vector<std::string>(SharedArgs(spec, snapshot_ms, light, child_fields));
  for (const char* a : {"--file-at-once=0", "--field=collector=process", "--field=role=worker"}) {
    fixed->push_back(a);
  }
  for (const auto& [key, value] : child_fields.process_fields()) {
    if (key == "pid" || key == "ppid" || key == "role" || key == "worker" || key == "start_ns" ||
        key == "start_unix_ns" || key == "collector") {
      continue;
    }
    fixed->push_back("--field=" + key + "=" + value);
  }
  // (Leaves room for the child's own and the end.)
  if (fixed->size() + kChildOwnArgs + 1 > static_cast<size_t>(kMaxArgs)) {
    delete fixed;
    return;
  }
  const std::string lock_path = spec.run_path + "/" DLPROF_COLLECTORS_LOCK;
  if (lock_path.size() >= sizeof(g_lock_path)) {
    delete fixed;
    return;
  }
  memcpy(g_lock_path, lock_path.c_str(), lock_path.size() + 1);
  delete g_child_fixed;
  g_child_fixed = fixed;
}

bool StartCollectorProcessInForkChild(int worker) {
  if (g_child_fixed == nullptr || HelperCannotServeForkChild() != nullptr) return false;
  const int arena_fd = ArenaSharedFd();
  if (arena_fd < 0) return false;
  const long long pid = getpid();
  int n = 0;
  for (const std::string& a : *g_child_fixed) g_child_argv[n++] = a.c_str();
  auto* b = g_child_buffers;
  g_child_argv[n++] = Format(b[0], sizeof(b[0]), "--pid=", pid);
  g_child_argv[n++] = Format(b[1], sizeof(b[1]), "--base=worker-", pid);
  g_child_argv[n++] = Format(b[2], sizeof(b[2]), "--field=pid=", pid);
  g_child_argv[n++] = Format(b[3], sizeof(b[3]), "--field=ppid=", getppid());
  g_child_argv[n++] = Format(b[4], sizeof(b[4]), "--field=worker=", worker);
  g_child_argv[n++] = Format(b[5], sizeof(b[5]), "--field=start_ns=", ClockNs(CLOCK_MONOTONIC));
  g_child_argv[n++] = Format(b[6], sizeof(b[6]), "--field=start_unix_ns=", ClockNs(CLOCK_REALTIME));
  g_child_argv[n] = nullptr;
  if (SpawnHelper(g_child_argv, arena_fd, g_lock_path, nullptr) < 0) {
    return false;
  }
  g_is_process.store(true);
  return true;
}

bool CollectorIsProcess() { return g_is_process.load(std::memory_order_relaxed); }

void ForgetCollectorProcess() { g_is_process.store(false); }

void NoteChildSubreaper() { g_subreaper_in_program.store(true); }

void NoteProgramMadeASubreaper() {
  const int saved = errno;  // the program's prctl returned; setenv may set it
  NoteChildSubreaper();
  ExportReaper();
  errno = saved;
}

void NoteIfChildSubreaper() {
  if (ChildSubreaperNow()) NoteChildSubreaper();
}

}  // namespace dlprof
