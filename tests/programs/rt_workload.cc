// A program with known behaviour, profiled by the runtime tests.
// Usage: rt_workload MODE [args]; see main() for the modes.
#include <dlprof/dlprof.hpp>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <spawn.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// Keeps Burn's loop from being optimised away. Several threads burn at once:
// an atomic, not a volatile, so that they do not race on it (TSan says so).
std::atomic<uint64_t> g_sink{0};

// Burns `ns` of this thread's CPU time.
__attribute__((noinline)) void Burn(int64_t ns) {
  int64_t end = ThreadCpuNs() + ns;
  uint64_t x = g_sink.load(std::memory_order_relaxed);
  while (ThreadCpuNs() < end) {
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  g_sink.store(x, std::memory_order_relaxed);
}

__attribute__((noinline)) void BurnInStageA(int64_t ns) { DLPROF_STAGE("a"); Burn(ns); }
__attribute__((noinline)) void BurnInStageB(int64_t ns) { DLPROF_STAGE("b"); Burn(ns); }
__attribute__((noinline)) void BurnInStageC(int64_t ns) { DLPROF_STAGE("c"); Burn(ns); }

// 10% / 30% / 60% of `total_ms` CPU in stages a / b / c, interleaved finely so
// the split holds over any window; then a stage that sleeps (off-CPU).
// With `jitter`, each 10 ms cycle is stretched by a random factor in
// [0.5, 1.5): timers checked on the scheduler tick (4 ms) would otherwise
// alias with the fixed cycle (the phases 0, 2, 4, 6, 8 ms put a fifth of
// the ticks in a, whatever its share).
int Mix(int total_ms, bool jitter = false) {
  std::thread late([total_ms] {  // created after start: must be sampled too
    DLPROF_STAGE("late");
    Burn(total_ms * 1000000LL / 4);
  });
  uint64_t rng = 0x9e3779b97f4a7c15ULL;
  for (int64_t done = 0; done < total_ms * 1000000LL;) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    const int64_t cycle = jitter ? 5000000 + static_cast<int64_t>(rng % 10000000) : 10000000;
    BurnInStageA(cycle / 10);
    BurnInStageB(cycle * 3 / 10);
    BurnInStageC(cycle * 6 / 10);
    done += cycle;
  }
  late.join();
  {
    DLPROF_STAGE("nap");
    timespec ts{0, 300000000};
    nanosleep(&ts, nullptr);
  }
  return 0;
}

// Waits for every child: 0 when all exited with status 0, else 1.
int WaitAll(const std::vector<pid_t>& pids) {
  int failures = 0;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  return failures ? 1 : 0;
}

// N forked workers burn CPU in stage "work"; even ones name themselves.
int Fork(int workers) {
  std::vector<pid_t> pids;
  for (int i = 0; i < workers; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      if (i % 2 == 0) dlprof_set_worker(100 + i);
      { DLPROF_STAGE("work"); Burn(300000000); }
      exit(0);
    }
    pids.push_back(pid);
  }
  { DLPROF_STAGE("main_work"); Burn(200000000); }
  return WaitAll(pids);
}

// Workers that leave without exit(): one by _exit() (as Python's
// multiprocessing workers do, os._exit), one by exec'ing /bin/true (execle),
// one by an exec that fails (execlp; it then burns more CPU and exits).
int LeaveWithoutExit() {
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      { DLPROF_STAGE("work"); Burn(150000000); }
      if (i == 0) _exit(7);
      if (i == 1) execle("/bin/true", "true", static_cast<char*>(nullptr), environ);
      execlp("dlprof-test-no-such-program", "x", static_cast<char*>(nullptr));
      if (errno != ENOENT) _exit(99);
      { DLPROF_STAGE("after_failed_exec"); Burn(150000000); }
      exit(0);
    }
    pids.push_back(pid);
  }
  int failures = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    const int want = i == 0 ? 7 : 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != want) ++failures;
  }
  return failures ? 1 : 0;
}

// Three children that do at once what a shell's and subprocess's children
// do: exec (this program again, which burns 100 ms in stage "image"), an
// exec that fails (then 100 ms in "after_failed_exec"), and _exit(3).
int ForkExecAtOnce(const char* self) {
  pid_t pids[3];
  for (int i = 0; i < 3; ++i) {
    pids[i] = fork();
    if (pids[i] < 0) return 1;
    if (pids[i] > 0) continue;
    if (i == 0) {
      execl(self, self, "image", static_cast<char*>(nullptr));
      _exit(98);
    }
    if (i == 1) {
      execlp("dlprof-test-no-such-program", "x", static_cast<char*>(nullptr));
      if (errno != ENOENT) _exit(99);
      { DLPROF_STAGE("after_failed_exec"); Burn(100000000); }
      exit(0);
    }
    _exit(3);
  }
  int failures = 0;
  for (int i = 0; i < 3; ++i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != (i == 2 ? 3 : 0)) ++failures;
  }
  return failures ? 1 : 0;
}

// Burns CPU, then replaces itself with a CPU-bound shell loop that knows
// nothing of dlprof: with the setitimer timer, that image must not be killed
// by a SIGPROF from a timer dlprof left armed.
int ExecBusy() {
  { DLPROF_STAGE("before_exec"); Burn(100000000); }
  unsetenv("LD_PRELOAD");
  unsetenv("DLPROF_SAMPLE");
  execl("/bin/sh", "sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
        static_cast<char*>(nullptr));
  return 2;
}

// Threads blocked in sleeping/polling calls while the others are sampled at
// high frequency: none may ever see EINTR.
int Eintr(int ms) {
  std::atomic<bool> stop{false};
  std::atomic<int> eintr{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    while (!stop) {
      timespec ts{0, 50000000};
      if (nanosleep(&ts, nullptr) != 0 && errno == EINTR) ++eintr;
    }
  });
  threads.emplace_back([&] {
    while (!stop) {
      if (poll(nullptr, 0, 50) < 0 && errno == EINTR) ++eintr;
    }
  });
  threads.emplace_back([&] {
    int ep = epoll_create1(0);
    epoll_event ev;
    while (!stop) {
      if (epoll_wait(ep, &ev, 1, 50) < 0 && errno == EINTR) ++eintr;
    }
    close(ep);
  });
  threads.emplace_back([&] {
    while (!stop) {
      timeval tv{0, 50000};
      if (select(0, nullptr, nullptr, nullptr, &tv) < 0 && errno == EINTR) ++eintr;
    }
  });
  threads.emplace_back([&] {
    while (!stop) {
      timespec ts{0, 50000000};
      if (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr) == EINTR) ++eintr;
    }
  });
  { DLPROF_STAGE("busy"); Burn(ms * 1000000LL); }
  stop = true;
  for (auto& t : threads) t.join();
  printf("eintr=%d\n", eintr.load());
  return eintr.load() == 0 ? 0 : 3;
}

// The CPU seconds process `pid` has used, from /proc (-1 if unknown).
double ProcessCpuSeconds(pid_t pid) {
  double cpu_s = -1;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  if (FILE* f = fopen(path, "r")) {
    unsigned long utime = 0, stime = 0;
    if (fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
               &stime) == 2) {
      cpu_s = static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
    }
    fclose(f);
  }
  return cpu_s;
}

// Forks a worker that burns CPU until it has used `ms` of CPU time (or 15 s
// have passed on a crowded machine), then kills it with SIGKILL.
int KillWorker(int ms) {
  pid_t pid = fork();
  if (pid == 0) {
    DLPROF_STAGE("doomed");
    for (;;) Burn(1000000);
  }
  printf("worker=%d\n", pid);
  fflush(stdout);
  double cpu_s = 0;
  for (int waited = 0; waited < 1500; ++waited) {
    cpu_s = ProcessCpuSeconds(pid);
    if (cpu_s * 1000 >= ms) break;
    timespec ts{0, 10000000};
    nanosleep(&ts, nullptr);
  }
  // Its CPU time just before it dies: what its profile should cover, less
  // at most the last second.
  cpu_s = ProcessCpuSeconds(pid);
  kill(pid, SIGKILL);
  printf("worker_cpu_s=%.3f\n", cpu_s);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? 0 : 1;
}

// A buffer empty for the first half, full for the second; prints the live stats.
int Buffers() {
  dlprof::Buffer q("queue", 10);
  timespec half{0, 400000000};
  q.set_size(0);
  nanosleep(&half, nullptr);
  q.set_size(10);
  nanosleep(&half, nullptr);
  dlprof_buffer_stats st;
  if (!q.stats(&st)) {
    printf("stats=none\n");
    return 0;
  }
  printf("snapshots=%llu mean=%.3f empty=%.3f full=%.3f\n",
         static_cast<unsigned long long>(st.snapshots), st.mean_occupancy, st.empty_fraction,
         st.full_fraction);
  return 0;
}

// The parent makes buffers "prefetch" and "shared", then forks two children
// that run 300 ms each: "user" sets "shared" (a worker filling a queue it
// inherited), "idle" touches neither (a DataLoader worker and its parent's
// prefetch queue). The parent fills "prefetch" meanwhile.
int ForkBuffers() {
  dlprof::Buffer prefetch("prefetch", 4);
  dlprof::Buffer shared("shared", 8);
  prefetch.set_size(2);
  shared.set_size(0);
  pid_t kids[2];
  for (int k = 0; k < 2; ++k) {
    kids[k] = fork();
    if (kids[k] == 0) {
      timespec step{0, 10000000};
      for (int i = 0; i < 30; ++i) {
        if (k == 0) shared.set_size(i % 9);
        nanosleep(&step, nullptr);
      }
      dlprof_flush(2000);
      _exit(0);
    }
  }
  timespec step{0, 10000000};
  for (int i = 0; i < 30; ++i) {
    prefetch.set_size(i % 5);
    nanosleep(&step, nullptr);
  }
  for (pid_t kid : kids) waitpid(kid, nullptr, 0);
  printf("user=%d idle=%d\n", static_cast<int>(kids[0]), static_cast<int>(kids[1]));
  return 0;
}

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// Training-loop markers: each step waits 20 ms for data then computes 30 ms of
// CPU. Prints what it measured itself, the ground truth for the profile.
int Steps(int steps) {
  int64_t step_ns = 0, wait_ns = 0, compute_ns = 0;
  for (int i = 0; i < steps; ++i) {
    int64_t t0 = MonoNs(), t1, t2;
    {
      dlprof::StepScope step;
      {
        dlprof::WaitScope wait;
        timespec ts{0, 20000000};
        nanosleep(&ts, nullptr);
      }
      t1 = MonoNs();
      DLPROF_STAGE("compute");
      Burn(30000000);
    }
    t2 = MonoNs();
    step_ns += t2 - t0;
    wait_ns += t1 - t0;
    compute_ns += t2 - t1;
  }
  printf("wait_fraction=%.4f compute_ms=%.3f\n", static_cast<double>(wait_ns) / step_ns,
         compute_ns / 1e6);
  return 0;
}

// Steps(steps) in the main process while a forked worker burns 800 ms of
// CPU in stage "work": with DLPROF_BASELINE_STEPS the worker, which ends no
// step itself, must start sampling when the main process's baseline ends.
int StepsWithForkedWorker(int steps) {
  pid_t pid = fork();
  if (pid == 0) {
    { DLPROF_STAGE("work"); Burn(800000000); }
    exit(0);
  }
  Steps(steps);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// Starts a copy of itself with posix_spawn (exec, not fork), and that copy
// forks a worker of its own: all three must land in the same run.
int Spawn(const char* self) {
  pid_t pid;
  char mode[] = "nested";
  char* argv[] = {const_cast<char*>(self), mode, nullptr};
  if (posix_spawn(&pid, self, nullptr, nullptr, argv, environ) != 0) return 1;
  { DLPROF_STAGE("parent"); Burn(100000000); }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// `steps` times: 4 ms of CPU in stage "syscalls", nearly all of it in the
// kernel (getppid in a loop: the perf timer raises no signal there), then
// 4 ms in "user", all in user mode. Prints each stage's CPU time, from the
// thread's own clock.
int Syscalls(int steps) {
  int64_t in_syscalls = 0, in_user = 0;
  for (int i = 0; i < steps; ++i) {
    {
      DLPROF_STAGE("syscalls");
      const int64_t t0 = ThreadCpuNs();
      while (ThreadCpuNs() - t0 < 4000000) {
        for (int k = 0; k < 20; ++k) getppid();
      }
      in_syscalls += ThreadCpuNs() - t0;
    }
    {
      DLPROF_STAGE("user");
      const int64_t t0 = ThreadCpuNs();
      Burn(4000000);
      in_user += ThreadCpuNs() - t0;
    }
  }
  printf("syscalls_ns=%lld user_ns=%lld\n", static_cast<long long>(in_syscalls),
         static_cast<long long>(in_user));
  return 0;
}

int Nested() {
  pid_t pid = fork();
  if (pid == 0) {
    { DLPROF_STAGE("grandchild"); Burn(100000000); }
    exit(0);
  }
  { DLPROF_STAGE("spawned"); Burn(100000000); }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// The CPU time (schedstat's, in ns) of this process's threads that are not
// in `own`: the profiler's. Read as the kernel counts it, by the program.
long long ForeignThreadsCpuNs(const std::vector<pid_t>& own) {
  long long sum = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    const pid_t tid = static_cast<pid_t>(atoi(e->d_name));
    if (tid <= 0) continue;
    bool mine = false;
    for (pid_t t : own) mine = mine || t == tid;
    if (mine) continue;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
    if (FILE* f = fopen(path, "re")) {
      long long ns = 0;
      if (fscanf(f, "%lld", &ns) == 1) sum += ns;
      fclose(f);
    }
  }
  closedir(d);
  return sum;
}

// Two fork children of a parent whose maps were written (a flush): one
// that loads nothing, one that loads libbz2 after its own maps were
// written (a flush) and then ends well within the second to the next: its
// file has libbz2 only if its exit had the helper read the maps again.
int ForkMaps() {
  { DLPROF_STAGE("main_work"); Burn(100000000); }
  dlprof_flush(2000);
  std::vector<pid_t> kids;
  for (int k = 0; k < 2; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (k == 1 && (dlprof_flush(2000) != 0 || dlopen("libbz2.so.1.0", RTLD_NOW | RTLD_LOCAL) == nullptr)) {
        _exit(3);
      }
      { DLPROF_STAGE("work"); Burn(50000000); }
      exit(0);
    }
    kids.push_back(pid);
  }
  return WaitAll(kids);
}

// libbz2's one-shot compressor (BZ2_bzBuffToBuffCompress).
using Compress = int (*)(char*, unsigned*, char*, unsigned, int, int, int);

// 300 ms of this thread's CPU in stage "compress", compressing 256 KiB again
// and again with `compress`; false if it fails.
bool CompressInStage(Compress compress) {
  std::vector<char> in(256 << 10), out(300 << 10);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>((i * 2654435761u) >> 13);
  DLPROF_STAGE("compress");
  const int64_t until = ThreadCpuNs() + 300000000;
  while (ThreadCpuNs() < until) {
    unsigned n = static_cast<unsigned>(out.size());
    if (compress(out.data(), &n, in.data(), static_cast<unsigned>(in.size()), 9, 0, 30) != 0) return false;
  }
  return true;
}

// A fork child that loads libbz2 after its maps were written (its file made,
// then a flush),
// compresses with it for 300 ms of CPU and ends by _exit, which asks its
// helper for nothing: the samples in libbz2 keep their library only if
// the helper read the maps again when the samples met it.
int ForkMapsQuickExit() {
  const pid_t pid = fork();
  if (pid == 0) {
    usleep(100000);  // its helper made its file (50 ms in): the flush writes
    if (dlprof_flush(2000) != 0) _exit(3);
    void* bz2 = dlopen("libbz2.so.1.0", RTLD_NOW | RTLD_LOCAL);
    if (bz2 == nullptr) _exit(4);
    auto compress = reinterpret_cast<Compress>(dlsym(bz2, "BZ2_bzBuffToBuffCompress"));
    if (compress == nullptr) _exit(5);
    _exit(CompressInStage(compress) ? 0 : 6);
  }
  return WaitAll({pid});
}

// Two fork children in turn burn CPU in libbz2, which the parent loaded but
// never ran: the first child's walks find it without rows, the second's
// should find the rows the parent decoded when the first asked
// (backends/cfi_tables.cc, SharedWants).
int ForkWants() {
  void* bz2 = dlopen("libbz2.so.1.0", RTLD_NOW | RTLD_LOCAL);
  if (bz2 == nullptr) return 3;
  auto compress = reinterpret_cast<Compress>(dlsym(bz2, "BZ2_bzBuffToBuffCompress"));
  if (compress == nullptr) return 4;
  { DLPROF_STAGE("main_work"); Burn(100000000); }
  std::vector<pid_t> kids;
  for (int k = 0; k < 2; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (!CompressInStage(compress)) _exit(5);
      exit(0);
    }
    kids.push_back(pid);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 6;
    usleep(200000);  // the parent's collector ticks: it sees the child's wants
  }
  return 0;
}

// Keeps dlprof's collector busy: 16 threads that wake every millisecond (a
// thread that changes state is asked /proc at each tick), for `ms`; then a
// fork child that naps 300 ms. Each process prints what its own threads that
// the program did not start have used, measured last, just before it exits.
int CollectorCpu(int ms) {
  std::vector<pid_t> own{static_cast<pid_t>(syscall(SYS_gettid))};
  std::atomic<int> started{0};
  std::atomic<bool> stop{false};
  std::vector<pid_t> tids(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      tids[i] = static_cast<pid_t>(syscall(SYS_gettid));
      started.fetch_add(1);
      const timespec step{0, 1000000};
      while (!stop.load()) nanosleep(&step, nullptr);
    });
  }
  while (started.load() < 16) sched_yield();
  own.insert(own.end(), tids.begin(), tids.end());
  const timespec run{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&run, nullptr);
  const long long at_fork = ForeignThreadsCpuNs(own);
  const pid_t child = fork();
  if (child == 0) {
    const timespec nap{0, 300000000};
    nanosleep(&nap, nullptr);
    printf("child_collector_ns=%lld\n",
           ForeignThreadsCpuNs({static_cast<pid_t>(syscall(SYS_gettid))}));
    fflush(stdout);
    exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  stop.store(true);
  for (std::thread& t : threads) t.join();
  printf("parent_at_fork_ns=%lld parent_collector_ns=%lld\n", at_fork, ForeignThreadsCpuNs(own));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

// One thread, steady: `ms` of CPU in stage "spin", then 300 ms asleep in
// "nap". Prints how long each took in wall time, the ground truth.
int Steady(int ms) {
  const int64_t t0 = MonoNs();
  { DLPROF_STAGE("spin"); Burn(ms * 1000000LL); }
  const int64_t t1 = MonoNs();
  {
    DLPROF_STAGE("nap");
    timespec ts{0, 300000000};
    nanosleep(&ts, nullptr);
  }
  const int64_t t2 = MonoNs();
  printf("spin_ms=%.1f nap_ms=%.1f\n", (t1 - t0) / 1e6, (t2 - t1) / 1e6);
  return 0;
}

// Interns 100 new stage names, enters and leaves each, creates and fills a
// buffer, and prints how many bytes the program's heap grew meanwhile (all
// malloc arenas): dlprof must not allocate there (core/annotations.cc).
int NoMalloc() {
  printf("nomalloc: start\n");  // stdout's buffer is allocated before measuring
  fflush(stdout);
  char names[100][32];
  for (int i = 0; i < 100; ++i) snprintf(names[i], sizeof(names[i]), "stage-%d", i);
  const size_t before = mallinfo2().uordblks;
  for (int i = 0; i < 100; ++i) {
    const uint32_t id = dlprof_stage_intern(names[i]);
    dlprof_stage_enter(id);
    dlprof_stage_exit();
  }
  dlprof_buffer* b = dlprof_buffer_create("nomalloc-queue", 8);
  dlprof_buffer_set_size(b, 3);
  dlprof_set_worker(7);
  const size_t after = mallinfo2().uordblks;
  printf("heap_growth=%zu enabled=%d\n", after - before, dlprof_enabled());
  return 0;
}

volatile sig_atomic_t g_terminated = 0;

// Burns CPU until a signal ends it. With `own_handler`, the program handles
// SIGTERM itself (prints, then exits normally), as many trainers do.
int UntilTerminated(bool own_handler) {
  if (own_handler) signal(SIGTERM, [](int) { g_terminated = 1; });
  printf("ready\n");
  fflush(stdout);
  DLPROF_STAGE("spin");
  while (!g_terminated) Burn(1000000);
  printf("handled\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s mix|fork|eintr|kill|buffers|steps [N]\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  int n = argc > 2 ? atoi(argv[2]) : 0;
  if (mode == "mix") return Mix(n ? n : 1000);
  if (mode == "mixjitter") return Mix(n ? n : 1000, true);
  if (mode == "fork") return Fork(n ? n : 3);
  if (mode == "eintr") return Eintr(n ? n : 1000);
  if (mode == "kill") return KillWorker(n ? n : 2500);
  if (mode == "buffers") return Buffers();
  if (mode == "forkbuffers") return ForkBuffers();
  if (mode == "steady") return Steady(n ? n : 1500);
  if (mode == "forkmaps") return ForkMaps();
  if (mode == "forkmaps_quick_exit") return ForkMapsQuickExit();
  if (mode == "forkwants") return ForkWants();
  if (mode == "collectorcpu") return CollectorCpu(n ? n : 600);
  if (mode == "nomalloc") return NoMalloc();
  if (mode == "steps") return Steps(n ? n : 10);
  if (mode == "stepsfork") return StepsWithForkedWorker(n ? n : 10);
  if (mode == "term") return UntilTerminated(false);
  if (mode == "spawn") return Spawn(argv[0]);
  if (mode == "leave") return LeaveWithoutExit();
  if (mode == "forkexec") return ForkExecAtOnce(argv[0]);
  if (mode == "image") {
    DLPROF_STAGE("image");
    Burn(100000000);
    return 0;
  }
  if (mode == "execbusy") return ExecBusy();
  if (mode == "nested") return Nested();
  if (mode == "syscalls") return Syscalls(n ? n : 100);
  if (mode == "ownterm") return UntilTerminated(true);
  if (mode == "enabled") {
    printf("enabled=%d\n", dlprof_enabled());
    return 0;
  }
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
