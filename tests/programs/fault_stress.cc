// Sixteen threads doing what real data loaders do to a profiler: malloc/free
// storms, dlopen/dlclose of a library whose code they run, fork (children that
// exit at once, run a while, exec /bin/true, or exec this program again) and
// stage interning, all at once, under 1000 Hz sampling.
// Usage: fault_stress SECONDS            the stress run (exit 0 when it ended well)
//        fault_stress exec-child          what the exec'd children run
//        fault_stress fork-in-loader      fork while another thread holds the loader's lock
//        fault_stress sample-in-loader    sample new code while another thread holds it
//
// It reports, on its last stdout line, what it did and what went wrong: child
// processes that hung (killed after a grace period) or died of a signal.
#include <dlprof/dlprof.hpp>

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 16;

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) void Burn(int64_t ns) {
  volatile uint64_t x = 88172645463325252ULL;
  int64_t end = ThreadCpuNs() + ns;
  while (ThreadCpuNs() < end) {
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
}

std::atomic<int> g_forks{0}, g_execs{0}, g_dlopens{0}, g_dlopen_failures{0}, g_mallocs{0};
std::atomic<int> g_threads_made{0}, g_interned{0};
std::atomic<int64_t> g_next_fork_ns{0};
int64_t g_fork_interval_ns = 40000000;  // at most 25 forks a second in all
std::mutex g_children_mu;
std::vector<pid_t> g_children;
char g_self[4096];

uint64_t Rand(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

__attribute__((noinline)) void MallocStorm(uint64_t* rng) {
  DLPROF_STAGE("malloc");
  void* blocks[256];
  for (int round = 0; round < 2; ++round) {
    for (void*& b : blocks) {
      size_t size = 16 + Rand(rng) % (Rand(rng) % 8 == 0 ? 256 * 1024 : 2048);
      b = malloc(size);
      if (b != nullptr) memset(b, static_cast<int>(size), size < 4096 ? size : 4096);
    }
    for (void* b : blocks) free(b);
  }
  g_mallocs.fetch_add(2 * 256);
}

// Loads a library this program does not link, runs its code (so samples
// unwind through it), and unloads it; other threads do the same, so it is
// mapped and unmapped all the time.
__attribute__((noinline)) void DlopenRun(uint64_t* rng) {
  DLPROF_STAGE("dl");
  const bool bz2 = Rand(rng) % 2 == 0;
  void* h = dlopen(bz2 ? "libbz2.so.1.0" : "libm.so.6", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    g_dlopen_failures.fetch_add(1);
    return;
  }
  g_dlopens.fetch_add(1);
  if (bz2) {
    using Compress = int (*)(char*, unsigned*, char*, unsigned, int, int, int);
    auto compress = reinterpret_cast<Compress>(dlsym(h, "BZ2_bzBuffToBuffCompress"));
    if (compress != nullptr) {
      static thread_local std::vector<char> in(16 * 1024), out(20 * 1024);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(Rand(rng) % 16);
      unsigned out_len = static_cast<unsigned>(out.size());
      compress(out.data(), &out_len, in.data(), static_cast<unsigned>(in.size()), 1, 0, 0);
    }
  } else {
    using Cos = double (*)(double);
    auto cosine = reinterpret_cast<Cos>(dlsym(h, "cos"));
    volatile double acc = 0;
    if (cosine != nullptr) {
      for (int i = 0; i < 5000; ++i) acc = acc + cosine(i * 0.001);
    }
  }
  dlclose(h);
}

// New stage names while other threads fork: the stage table's lock must not
// be inherited held by a child.
__attribute__((noinline)) void InternStages(uint64_t* rng) {
  char name[64];
  snprintf(name, sizeof(name), "dyn%llu", static_cast<unsigned long long>(Rand(rng) % 300));
  dlprof::StageScope stage(dlprof_stage_intern(name));
  g_interned.fetch_add(1);
  Burn(500000);
}

__attribute__((noinline)) void ThreadChurn(uint64_t* rng) {
  uint64_t seed = Rand(rng);
  std::thread t([seed] {
    uint64_t r = seed | 1;
    MallocStorm(&r);
  });
  t.join();
  g_threads_made.fetch_add(1);
}

// In the child of a many-threaded parent: only this thread exists, and every
// lock another parent thread held at the fork is held forever here.
[[noreturn]] void ChildMain(uint64_t kind) {
  switch (kind % 4) {
    case 0:
      _exit(0);
    case 1: {
      char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
      execv(argv[0], argv);
      _exit(127);
    }
    case 2: {
      char* argv[] = {g_self, const_cast<char*>("exec-child"), nullptr};
      execv(argv[0], argv);
      _exit(127);
    }
    default: {
      char name[64];
      snprintf(name, sizeof(name), "child%d", static_cast<int>(getpid() % 7));
      {
        dlprof::StageScope stage(dlprof_stage_intern(name));  // the stage table's lock
        void* p = malloc(100000);                        // malloc's locks
        free(p);
        Burn(60000000);
      }
      // Not exit(): in the child of a many-threaded parent, atexit's own lock
      // may be held for good (a parent thread was in dlclose at the fork).
      // _exit() skips dlprof's final flush, so flush first.
      dlprof_flush(2000);
      _exit(0);
    }
  }
}

__attribute__((noinline)) void MaybeFork(uint64_t* rng) {
  int64_t now = MonoNs(), next = g_next_fork_ns.load();
  if (now < next || !g_next_fork_ns.compare_exchange_strong(next, now + g_fork_interval_ns)) return;
  uint64_t kind = Rand(rng);
  pid_t pid = fork();
  if (pid == 0) ChildMain(kind);
  if (pid > 0) {
    g_forks.fetch_add(1);
    if (kind % 4 == 1 || kind % 4 == 2) g_execs.fetch_add(1);
    std::lock_guard<std::mutex> lock(g_children_mu);
    g_children.push_back(pid);
  }
}

void Worker(int index, int64_t deadline) {
  uint64_t rng = 0x9E3779B97F4A7C15ULL * (index + 1);
  while (MonoNs() < deadline) {
    uint64_t op = Rand(&rng) % 100;
    if (op < 50) MallocStorm(&rng);
    else if (op < 70) DlopenRun(&rng);
    else if (op < 80) InternStages(&rng);
    else if (op < 85) ThreadChurn(&rng);
    else MaybeFork(&rng);
  }
}

void Judge(pid_t pid, int status, int* crashed, int* failed) {
  if (WIFSIGNALED(status)) {
    ++*crashed;
    fprintf(stderr, "fault_stress: child %d died of signal %d\n", pid, WTERMSIG(status));
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    ++*failed;
    fprintf(stderr, "fault_stress: child %d exited %d\n", pid, WEXITSTATUS(status));
  }
}

// Reaps the children that have ended, keeps the others.
void ReapFinished(int* crashed, int* failed) {
  std::lock_guard<std::mutex> lock(g_children_mu);
  std::vector<pid_t> running;
  for (pid_t pid : g_children) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) Judge(pid, status, crashed, failed);
    else running.push_back(pid);
  }
  g_children.swap(running);
}

// Reaps every child, giving them `grace_s` in all before killing the rest:
// those count as hung.
void ReapAll(double grace_s, int* hung, int* crashed, int* failed) {
  std::vector<pid_t> children;
  {
    std::lock_guard<std::mutex> lock(g_children_mu);
    children.swap(g_children);
  }
  const int64_t deadline = MonoNs() + static_cast<int64_t>(grace_s * 1e9);
  for (pid_t pid : children) {
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && MonoNs() < deadline) usleep(2000);
    if (r == 0) {
      ++*hung;
      fprintf(stderr, "fault_stress: child %d hung; killing it\n", pid);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      continue;
    }
    Judge(pid, status, crashed, failed);
  }
}

int Stress(double seconds) {
  ssize_t n = readlink("/proc/self/exe", g_self, sizeof(g_self) - 1);
  if (n <= 0) return 2;
  g_self[n] = '\0';
  const int64_t deadline = MonoNs() + static_cast<int64_t>(seconds * 1e9);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(Worker, i, deadline);
  int hung = 0, crashed = 0, failed = 0;
  // The training loop: steps, while the workers churn; children reaped as it goes.
  for (int step = 0; MonoNs() < deadline; ++step) {
    dlprof::StepScope s;
    DLPROF_STAGE("train");
    Burn(5000000);
    if (step % 20 == 0) ReapFinished(&crashed, &failed);
  }
  for (auto& t : threads) t.join();
  ReapAll(20, &hung, &crashed, &failed);
  printf("forks=%d execs=%d dlopens=%d dlopen_failures=%d threads=%d interned=%d mallocs=%d "
         "hung=%d crashed=%d failed=%d\n",
         g_forks.load(), g_execs.load(), g_dlopens.load(), g_dlopen_failures.load(),
         g_threads_made.load(), g_interned.load(), g_mallocs.load(), hung, crashed, failed);
  return hung == 0 && crashed == 0 && failed == 0 ? 0 : 1;
}

// Code only a child runs: every pc is new to the unwinder's caches, so
// sampling it needs lookups (libunwind asks the loader, dl_iterate_phdr).
__attribute__((noinline)) void ChildOnlyWork(int64_t ns) {
  volatile double x = 1.0;
  int64_t end = ThreadCpuNs() + ns;
  while (ThreadCpuNs() < end) {
    for (int i = 1; i < 5000; ++i) x = x * 1.0000001 + 1.0 / i;
  }
}

// One thread sits inside a dl_iterate_phdr() callback, so it holds glibc's
// loader lock, while the main thread forks: the child inherits the lock held
// by a thread it does not have. The child then runs new code under sampling
// and must finish (it is killed after 20 s and reported "hung").
int ForkInLoader() {
  static std::atomic<int> phase{0};
  std::thread holder([] {
    dl_iterate_phdr(
        [](dl_phdr_info*, size_t, void*) {
          phase.store(1);
          while (phase.load() != 2) usleep(1000);
          return 1;
        },
        nullptr);
  });
  while (phase.load() != 1) usleep(1000);
  const int64_t t0 = MonoNs();
  pid_t pid = fork();
  if (pid == 0) {
    {
      DLPROF_STAGE("loader_child");
      ChildOnlyWork(300000000);
    }
    exit(0);
  }
  phase.store(2);
  holder.join();
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(pid, &status, WNOHANG)) == 0 && MonoNs() - t0 < 20000000000LL) usleep(5000);
  const char* how = "exited0";
  if (r == 0) {
    how = "hung";
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  } else if (WIFSIGNALED(status)) {
    how = "signalled";
  } else if (WEXITSTATUS(status) != 0) {
    how = "failed";
  }
  printf("child=%s child_pid=%d child_s=%.2f\n", how, pid, (MonoNs() - t0) / 1e9);
  return r != 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

__attribute__((noinline)) void OtherNewWork(int64_t ns) {
  volatile uint64_t x = 3;
  int64_t end = ThreadCpuNs() + ns;
  while (ThreadCpuNs() < end) {
    for (int i = 1; i < 5000; ++i) x = x * 2862933555777941757ULL + 3037000493ULL;
  }
}

// One thread holds the loader's lock (inside a dl_iterate_phdr() callback)
// until another has run 200 ms of CPU in code it never ran before, sampled
// at 1000 Hz: each new pc sends libunwind to dl_iterate_phdr() from the
// signal handler. If the handler waited for the lock, neither thread would
// ever finish (the holder gives up after 20 s and says "timeout").
int SampleInLoader() {
  static std::atomic<int> phase{0};
  const int64_t t0 = MonoNs();
  std::thread holder([] {
    dl_iterate_phdr(
        [](dl_phdr_info*, size_t, void*) {
          phase.store(1);
          const int64_t give_up = MonoNs() + 20000000000LL;
          while (phase.load() != 2 && MonoNs() < give_up) usleep(1000);
          return 1;
        },
        nullptr);
  });
  while (phase.load() != 1) usleep(1000);
  {
    DLPROF_STAGE("beside_loader");
    OtherNewWork(200000000);
  }
  const bool in_time = phase.exchange(2) == 1 && MonoNs() - t0 < 20000000000LL;
  holder.join();
  printf("loader_wait=%s seconds=%.2f\n", in_time ? "ok" : "timeout", (MonoNs() - t0) / 1e9);
  return in_time ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "exec-child") {
    DLPROF_STAGE("exec_child");
    Burn(60000000);
    return 0;
  }
  if (mode == "fork-in-loader") return ForkInLoader();
  if (mode == "sample-in-loader") return SampleInLoader();
  double seconds = atof(mode.c_str());
  if (seconds <= 0) {
    fprintf(stderr, "usage: %s SECONDS | exec-child\n", argv[0]);
    return 2;
  }
  if (const char* v = getenv("FAULT_STRESS_FORK_MS")) g_fork_interval_ns = atoll(v) * 1000000LL;
  return Stress(seconds);
}
