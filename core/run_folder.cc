// The run folder (DLPROF_OUT/<run-id>, shared by every process of a run)
// and this process's profile file in it.
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/private_fd.h"
#include "core/profile_file.h"
#include "core/run_id.h"
#include "core/session_internal.h"

namespace dlprof {

namespace {

void SetProcessFields(Collector* c) {
  c->SetProcessField("pid", std::to_string(getpid()));
  c->SetProcessField("ppid", std::to_string(getppid()));
  c->SetProcessField("role", G->role);
  c->SetProcessField("worker", std::to_string(G->worker));
  c->SetProcessField("run_id", G->run_id);
  c->SetProcessField("hz", std::to_string(G->config.hz));
  c->SetProcessField("mode", ModeName(G->config.mode));
  // The CPUs this process may run on: the report's advice counts cores of the
  // profiled machine, not of the one that writes the report.
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
    c->SetProcessField("cpus", std::to_string(CPU_COUNT(&cpus)));
  }
  // The wall tick and snapshot period (a wall record may cover many ticks).
  c->SetProcessField("snapshot_ms", std::to_string(G->config.snapshot_ms));
  c->SetProcessField("unwinder", G->unwinder->name());
  c->SetProcessField("timer", G->timer->name());
  // Why "auto" settled on it (perf refused in a container, say).
  c->SetProcessField("timer_note", G->timer->note());
  c->SetProcessField("clock", "monotonic");
  c->SetProcessField("warmup_steps", std::to_string(G->config.warmup_steps));
  c->SetProcessField("baseline_steps", std::to_string(G->config.baseline_steps));
  timespec mono, real;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  c->SetProcessField("start_ns", std::to_string(mono.tv_sec * 1000000000LL + mono.tv_nsec));
  c->SetProcessField("start_unix_ns", std::to_string(real.tv_sec * 1000000000LL + real.tv_nsec));
  char comm[256] = {0};
  if (FILE* f = FopenOwn("/proc/self/cmdline")) {
    size_t n = fread(comm, 1, sizeof(comm) - 1, f);
    for (size_t i = 0; i + 1 < n; ++i) if (comm[i] == '\0') comm[i] = ' ';
    fclose(f);
  }
  c->SetProcessField("command", comm);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  c->SetProcessField("host", host);
  if (!G->python_version.empty()) {
    c->SetProcessField("python", G->python_version);
    c->SetProcessField("python_frames", G->python_state);
  }
}

// The run folder, opened for the moment it takes to create a file in it (no
// descriptor of dlprof's stays in the program's table), and only if it is
// still the folder made at start. -1 if not.
int OpenRunDir(const ProfileFileSpec& spec) {
  const int fd = OpenOwn(AT_FDCWD, spec.run_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  struct stat st {};
  if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != spec.run_dev || st.st_ino != spec.run_ino)) {
    close(fd);
    return -1;
  }
  return fd;
}

bool ValidRunId(const char* id) {
  if (id == nullptr || *id == '\0' || strlen(id) > 128) return false;
  if (strcmp(id, ".") == 0 || strcmp(id, "..") == 0) return false;
  return strchr(id, '/') == nullptr;
}

}  // namespace

// (An exec'd image with the same pid gets a numbered name.)
Collector* NewCollector() {
  auto* c = new Collector();
  c->set_check_reused_walks(G->config.check_reused_walks);
  SetProcessFields(c);
  c->set_file_pending(true);
  return c;
}

bool CreateProfileFile(Collector* c, const ProfileFileSpec& spec, std::string* error) {
  c->set_file_pending(false);
  *error = "the run folder " + spec.run_path + " is gone or was replaced";
  const int dir_fd = OpenRunDir(spec);
  if (dir_fd < 0) return false;
  // A process that execs makes one file per image: ROLE-PID.dlprof, then
  // .1, .2, ... in order, so the names taken are a prefix of that sequence.
  // Its end is found by doubling, then halving (a shell that runs 1,000
  // commands by exec from one pid probes ~20 names, not 1,000; a limit of
  // 100 names turned profiling off for every image after the 100th).
  auto name_of = [&](int n) { return spec.base + (n ? "." + std::to_string(n) : "") + ".dlprof"; };
  auto taken = [&](int n) {
    struct stat st {};
    return fstatat(dir_fd, name_of(n).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  };
  int first = 0;
  if (taken(0)) {
    int lo = 0, hi = 1;  // lo is taken
    while (hi < (1 << 24) && taken(hi)) lo = hi, hi *= 2;
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      (taken(mid) ? lo : hi) = mid;
    }
    first = hi;
  }
  for (int attempt = first; attempt < first + 100; ++attempt) {
    const std::string name = name_of(attempt);
    if (c->Open(dir_fd, spec.run_path, name, error)) {
      close(dir_fd);
      c->WriteProcessChunk();
      return true;
    }
    if (errno != EEXIST) break;
  }
  close(dir_fd);
  return false;
}

ProfileFileSpec ThisProcessesProfileFile() {
  ProfileFileSpec spec;
  spec.run_path = G->run_path;
  spec.run_dev = G->run_dev;
  spec.run_ino = G->run_ino;
  spec.base = G->role + "-" + std::to_string(getpid());
  return spec;
}

bool CreateCollectorFile(Collector* c) {
  std::string error;
  if (CreateProfileFile(c, ThisProcessesProfileFile(), &error)) return true;
  Warn("dlprof: " + error + "; profiling off for this process");
  return false;
}

Collector* OpenCollector() {
  Collector* c = NewCollector();
  if (!CreateCollectorFile(c)) {
    delete c;
    return nullptr;
  }
  return c;
}


bool OpenRunFolder(bool* is_main) {
  // Absolute, and so in the environment too: a worker spawned after the
  // program changed its folder must find the same run.
  if (!G->config.out_dir.empty() && G->config.out_dir[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) {
      Warn("dlprof: cannot resolve the relative DLPROF_OUT " + G->config.out_dir +
           " (no current folder); profiling off");
      return false;
    }
    G->config.out_dir = std::string(cwd) + "/" + G->config.out_dir;
    setenv("DLPROF_OUT", G->config.out_dir.c_str(), 1);
  }
  const std::string& out = G->config.out_dir;
  // Missing parents are made too (0700, like the folder itself).
  for (size_t slash = out.find('/', 1); slash != std::string::npos; slash = out.find('/', slash + 1)) {
    mkdir(out.substr(0, slash).c_str(), 0700);
  }
  if (mkdir(out.c_str(), 0700) != 0 && errno != EEXIST) {
    Warn("dlprof: cannot create DLPROF_OUT folder " + out + ": " + strerror(errno) +
         "; profiling off");
    return false;
  }
  struct stat st;
  if (lstat(out.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    // Following it could let whoever controls the link redirect the profile.
    Warn("dlprof: DLPROF_OUT " + out + " is a symlink: refused; profiling off");
    return false;
  }
  int out_fd = OpenOwn(AT_FDCWD, out.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (out_fd < 0) {
    Warn("dlprof: DLPROF_OUT " + out + " cannot be opened as a folder (" + strerror(errno) +
         "); profiling off");
    return false;
  }
  if (fstat(out_fd, &st) == 0 && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
    Warn("dlprof: DLPROF_OUT " + out + " is writable by every user: refused; profiling off");
    close(out_fd);
    return false;
  }
  const char* inherited = getenv("DLPROF_RUN_ID");
  const char* main_pid = getenv("DLPROF_RUN_MAIN_PID");
  bool joining = ValidRunId(inherited);
  if (joining) {
    G->run_id = inherited;
    *is_main = main_pid != nullptr && atoi(main_pid) == getpid();  // exec'd in place
  } else {
    G->run_id = NewRunId(getpid());
    *is_main = true;
    setenv("DLPROF_RUN_ID", G->run_id.c_str(), 1);
    setenv("DLPROF_RUN_MAIN_PID", std::to_string(getpid()).c_str(), 1);
  }
  const bool created = mkdirat(out_fd, G->run_id.c_str(), 0700) == 0;
  if (!created && errno != EEXIST) {
    Warn("dlprof: cannot create run folder " + out + "/" + G->run_id + ": " + strerror(errno) +
         "; profiling off");
    close(out_fd);
    return false;
  }
  const int run_fd =
      OpenOwn(out_fd, G->run_id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  G->run_path = out + "/" + G->run_id;
  if (run_fd >= 0 && created && *is_main) {
    // "latest" names the newest run; replaced atomically.
    std::string tmp = ".latest." + std::to_string(getpid());
    if (symlinkat(G->run_id.c_str(), out_fd, tmp.c_str()) == 0 &&
        renameat(out_fd, tmp.c_str(), out_fd, "latest") != 0) {
      unlinkat(out_fd, tmp.c_str(), 0);
    }
  }
  close(out_fd);
  if (run_fd < 0) {
    Warn("dlprof: cannot open run folder " + out + "/" + G->run_id + ": " + strerror(errno) +
         "; profiling off");
    return false;
  }
  // The run folder's name is predictable: one made in advance by another user
  // (or left open to others) could take or swap our files.
  const bool stat_ok = fstat(run_fd, &st) == 0;
  close(run_fd);
  if (!stat_ok || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    Warn("dlprof: run folder " + out + "/" + G->run_id +
         (!stat_ok                 ? " cannot be examined"
          : st.st_uid != geteuid() ? " is owned by another user"
                                   : " is writable by other users") +
         ": refused; profiling off");
    return false;
  }
  G->run_dev = st.st_dev;
  G->run_ino = st.st_ino;
  return true;
}

}  // namespace dlprof
