// A thread blocked in read() on a pipe, inside known chains of functions, in
// a marked stage: the collector's walks of blocked threads
// (tests/blocked_stacks_test.cc). Built without frame pointers
// (tests/CMakeLists.txt): from a blocked thread's pc and stack pointer alone
// the walk cannot follow a frame whose CFA is %rbp-based. For the same reason
// an ASan build reads with syscall(SYS_read): libasan's read() interceptor,
// which would sit between read() and its caller, keeps its CFA in %rbp
// (push %rbp; mov %rsp,%rbp), and libc's read does not save %rbp, so every
// walk would end there; ASan intercepts neither syscall() nor its wrapper.
// Usage:
//   blocked_read chain ITEMS GAP_MS  one thread reads ITEMS bytes in stage
//       "blocked_read" through BlockedReadOuter -> BlockedReadMiddle ->
//       BlockedReadInner -> read(); main writes one every GAP_MS.
//   blocked_read chain-syscall ITEMS GAP_MS  the same through
//       syscall(SYS_read), which libdlprof interposes: its frames must not
//       end the walk.
//   blocked_read race ITEMS GAP_US   one thread in stage "race" reads ITEMS
//       bytes alternately through RaceA1 -> RaceA2 -> RaceBlock and RaceB1 ->
//       RaceB2 -> RaceBlock (the same frame sizes, so the same sp and pc in
//       read()), spinning 100 us in RaceA2/RaceB2 first; main writes one
//       every 0 to 2*GAP_US us: the thread wakes and blocks again all the
//       time, often while its stack is walked. Prints how long it was in
//       RaceBlock through each chain: "race_a_ns=A race_b_ns=B".
#include <dlprof/dlprof.h>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

namespace {

int g_pipe[2];
bool g_through_syscall = false;

// One byte from fd, blocked in the read system call.
ssize_t ReadByte(int fd, char* c) {
#ifdef __SANITIZE_ADDRESS__
  g_through_syscall = true;
#endif
  if (g_through_syscall) return syscall(SYS_read, fd, c, 1);
  return read(fd, c, 1);
}

void SleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

// Each function calls the next and then uses the result, so that no call is
// a tail call (which would leave its caller off the stack); noipa keeps
// identical bodies apart (GCC's identical code folding made RaceBlock
// BlockedReadInner).
__attribute__((noipa)) int BlockedReadInner(int fd) {
  char c;
  const ssize_t n = ReadByte(fd, &c);
  asm volatile("" ::: "memory");
  return n == 1 ? c : -1;
}
__attribute__((noipa)) int BlockedReadMiddle(int fd) {
  const int r = BlockedReadInner(fd);
  asm volatile("" ::: "memory");
  return r + 1;
}
__attribute__((noipa)) int BlockedReadOuter(int fd) {
  const int r = BlockedReadMiddle(fd);
  asm volatile("" ::: "memory");
  return r + 1;
}

__attribute__((noipa)) int RaceBlock(int fd) {
  char c;
  const ssize_t n = ReadByte(fd, &c);
  asm volatile("" ::: "memory");
  return n == 1 ? c : -1;
}
// Runs for `us` of wall time: the thread is between its frames then (its
// new chain half built over the stale frames of the other one), the moment
// a walk that did not notice the wake-up would get a mixed stack.
void Spin(int64_t us) {
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do {
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}
int64_t g_race_ns[2];  // time in RaceBlock through A and through B
int64_t MonotonicNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}
__attribute__((noipa)) int RaceA2(int fd) {
  Spin(100);
  const int64_t t0 = MonotonicNs();
  const int r = RaceBlock(fd);
  g_race_ns[0] += MonotonicNs() - t0;
  asm volatile("" ::: "memory");
  return r + 1;
}
__attribute__((noipa)) int RaceA1(int fd) {
  const int r = RaceA2(fd);
  asm volatile("" ::: "memory");
  return r + 1;
}
__attribute__((noipa)) int RaceB2(int fd) {
  Spin(100);
  const int64_t t0 = MonotonicNs();
  const int r = RaceBlock(fd);
  g_race_ns[1] += MonotonicNs() - t0;
  asm volatile("" ::: "memory");
  return r + 2;
}
__attribute__((noipa)) int RaceB1(int fd) {
  const int r = RaceB2(fd);
  asm volatile("" ::: "memory");
  return r + 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: blocked_read chain|chain-syscall|race ITEMS GAP\n");
    return 2;
  }
  const bool race = strcmp(argv[1], "race") == 0;
  g_through_syscall = strcmp(argv[1], "chain-syscall") == 0;
  const int items = atoi(argv[2]);
  const int64_t gap = atoll(argv[3]);
  if (pipe(g_pipe) != 0) return 1;
  int sum = 0;
  std::thread reader([&] {
    const uint32_t stage = dlprof_stage_intern(race ? "race" : "blocked_read");
    dlprof_stage_enter(stage);
    for (int i = 0; i < items; ++i) {
      if (!race) {
        sum += BlockedReadOuter(g_pipe[0]);
      } else {
        sum += i % 2 == 0 ? RaceA1(g_pipe[0]) : RaceB1(g_pipe[0]);
      }
    }
    dlprof_stage_exit();
  });
  std::mt19937 rng(42);
  for (int i = 0; i < items; ++i) {
    SleepNs(race ? static_cast<int64_t>(rng() % (2 * gap + 1)) * 1000 : gap * 1000000);
    if (write(g_pipe[1], "x", 1) != 1) return 1;
  }
  reader.join();
  printf("read %d bytes (%d)\n", items, sum);
  if (race) {
    printf("race_a_ns=%lld race_b_ns=%lld\n", static_cast<long long>(g_race_ns[0]),
           static_cast<long long>(g_race_ns[1]));
  }
  return 0;
}
