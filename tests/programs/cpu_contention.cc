// A pipeline that is compute starved of cores when its workers outnumber
// them (tests/contention_test.cc). The training loop takes one item per step
// from its workers, round robin, each through a pipe, then computes a little;
// each forked worker computes its items in stage "work" and never blocks but
// on a full pipe. Each worker measures, by its own clocks, the wall time and
// the thread CPU time of its "work" stages: their difference is the time it
// was runnable but waiting for a core.
// Usage: cpu_contention WORKERS ITEMS_PER_WORKER ITEM_MS MODEL_MS
// Prints per worker "worker K work_wall_ns=W work_cpu_ns=C", then "done".
#include <dlprof/dlprof.hpp>

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int64_t Clock(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

std::atomic<uint64_t> g_sink{0};

// Burns `ns` of this thread's CPU time.
__attribute__((noinline)) void Burn(int64_t ns) {
  const int64_t end = Clock(CLOCK_THREAD_CPUTIME_ID) + ns;
  uint64_t x = g_sink.load(std::memory_order_relaxed);
  while (Clock(CLOCK_THREAD_CPUTIME_ID) < end) {
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  g_sink.store(x, std::memory_order_relaxed);
}

bool WriteByte(int fd) {
  const char c = 1;
  return write(fd, &c, 1) == 1;
}

bool ReadByte(int fd) {
  char c;
  return read(fd, &c, 1) == 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s WORKERS ITEMS_PER_WORKER ITEM_MS MODEL_MS\n", argv[0]);
    return 2;
  }
  const int workers = atoi(argv[1]), items = atoi(argv[2]);
  const int64_t item_ns = atoll(argv[3]) * 1000000LL, model_ns = atoll(argv[4]) * 1000000LL;
  if (workers < 1 || items < 1) return 2;
  // Each worker writes its report to its own pipe (stdout is shared; the
  // loop prints them in order at the end).
  std::vector<int> items_fd(workers), report_fd(workers);
  std::vector<pid_t> pids;
  for (int k = 0; k < workers; ++k) {
    int item_pipe[2], report_pipe[2];
    if (pipe(item_pipe) != 0 || pipe(report_pipe) != 0) return 1;
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      dlprof_set_worker(k);
      close(item_pipe[0]);
      close(report_pipe[0]);
      int64_t wall = 0, cpu = 0;
      for (int i = 0; i < items; ++i) {
        {
          DLPROF_STAGE("work");
          const int64_t w0 = Clock(CLOCK_MONOTONIC), c0 = Clock(CLOCK_THREAD_CPUTIME_ID);
          Burn(item_ns);
          wall += Clock(CLOCK_MONOTONIC) - w0;
          cpu += Clock(CLOCK_THREAD_CPUTIME_ID) - c0;
        }
        if (!WriteByte(item_pipe[1])) _exit(1);
      }
      char line[128];
      const int n = snprintf(line, sizeof(line), "worker %d work_wall_ns=%lld work_cpu_ns=%lld\n", k,
                             static_cast<long long>(wall), static_cast<long long>(cpu));
      if (write(report_pipe[1], line, n) != n) _exit(1);
      _exit(0);
    }
    close(item_pipe[1]);
    close(report_pipe[1]);
    items_fd[k] = item_pipe[0];
    report_fd[k] = report_pipe[0];
    pids.push_back(pid);
  }
  for (int step = 0; step < workers * items; ++step) {
    dlprof::StepScope s;
    {
      dlprof::WaitScope w;
      if (!ReadByte(items_fd[step % workers])) return 1;
    }
    DLPROF_STAGE("model");
    Burn(model_ns);
  }
  for (int k = 0; k < workers; ++k) {
    char line[128];
    const ssize_t n = read(report_fd[k], line, sizeof(line) - 1);
    if (n <= 0) return 1;
    fwrite(line, 1, static_cast<size_t>(n), stdout);
  }
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  printf("done\n");
  return 0;
}
