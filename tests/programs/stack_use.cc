// How much of the program's stack a signal takes, and whether threads with
// tiny stacks survive sampling (tests/signal_stack_test.cc).
//
//   stack_use paint <seconds> [baseline]
//     One worker thread on a 256 KiB stack of our own paints everything below
//     its stack pointer with a pattern and spins in a leaf loop (no calls, so
//     every signal interrupts it at the same stack pointer). After <seconds>
//     the main thread finds the deepest word below that stack pointer that is
//     no longer the pattern: the stack the signals used, the kernel's signal
//     frame included. `baseline` sends the worker SIGUSR1 (an empty handler)
//     every 200 us instead, which measures the kernel's frame alone. Prints
//     "depth <bytes>".
//   stack_use tiny <threads> <seconds>
//     Threads with PTHREAD_STACK_MIN stacks do CPU work at the bottom of a
//     recursion that leaves only the kernel's signal frame (AT_MINSIGSTKSZ, or
//     4 KiB), its red zone and 2 KiB of stack below the innermost frame: a
//     signal path that takes more dies of SIGSEGV. Prints "dives <n>".
#include <pthread.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef AT_MINSIGSTKSZ
#define AT_MINSIGSTKSZ 51
#endif

#include "tests/support/stack_pointer.h"

namespace {

constexpr uint64_t kPattern = 0xA5C3A5C3A5C3A5C3ull;
constexpr size_t kPaintStack = 256 << 10;
constexpr size_t kContract = 2048;  // what dlprof may take below the kernel's frame

using dlprof::testing::StackPointer;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// ---- paint ----

char* g_stack = nullptr;
std::atomic<uintptr_t> g_leaf_sp{0};
volatile int g_stop = 0;

// Paints [g_stack, sp - 512) and spins until g_stop, calling nothing.
__attribute__((noinline, no_sanitize("address"))) void PaintAndSpin() {
  const uintptr_t sp = StackPointer();
  volatile uint64_t* p = reinterpret_cast<volatile uint64_t*>((sp - 512) & ~uintptr_t{7});
  volatile uint64_t* const lo = reinterpret_cast<volatile uint64_t*>(g_stack);
  for (; p >= lo; --p) *p = kPattern;
  g_leaf_sp.store(sp, std::memory_order_release);
  uint64_t x = 1;
  while (g_stop == 0) {
    for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
}

void* PaintWorker(void*) {
  PaintAndSpin();
  return nullptr;
}

void EmptyHandler(int) {}

__attribute__((no_sanitize("address"))) size_t DeepestUse(uintptr_t sp) {
  const auto* lo = reinterpret_cast<const volatile uint64_t*>(g_stack);
  const auto* p = lo;
  while (reinterpret_cast<uintptr_t>(p) < sp && *p == kPattern) ++p;
  return sp - reinterpret_cast<uintptr_t>(p);
}

int Paint(double seconds, bool baseline) {
  void* mem = mmap(nullptr, kPaintStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 2;
  g_stack = static_cast<char*>(mem);
  if (baseline) {
    struct sigaction sa {};
    sa.sa_handler = EmptyHandler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, mem, kPaintStack);
  pthread_t t;
  if (pthread_create(&t, &attr, PaintWorker, nullptr) != 0) return 3;
  while (g_leaf_sp.load(std::memory_order_acquire) == 0) sched_yield();
  const double end = Now() + seconds;
  while (Now() < end) {
    if (baseline) pthread_kill(t, SIGUSR1);
    timespec ts{0, 200000};
    nanosleep(&ts, nullptr);
  }
  // Measured while the worker still spins: its exit would write deeper.
  const size_t depth = DeepestUse(g_leaf_sp.load());
  g_stop = 1;
  pthread_join(t, nullptr);
  printf("depth %zu\n", depth);
  return 0;
}

// ---- tiny ----

struct Tiny {
  uintptr_t lo = 0;
  size_t headroom = 0;
  double end = 0;
  long dives = 0;
};

__attribute__((noinline)) uint64_t Work(uint64_t x) {
  for (int i = 0; i < 2000000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

__attribute__((noinline)) uint64_t Dive(const Tiny* t, uint64_t x) {
  volatile char pad[64];
  pad[0] = static_cast<char>(x);
  // Each level takes ~128 bytes; stop while one more still leaves the headroom.
  if (StackPointer() - t->lo > t->headroom + 256) x = Dive(t, x + 1);
  else x = Work(x);
  return x + pad[0];
}

void* TinyWorker(void* arg) {
  auto* t = static_cast<Tiny*>(arg);
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return nullptr;
  void* addr = nullptr;
  size_t size = 0;
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  t->lo = reinterpret_cast<uintptr_t>(addr);
  uint64_t x = 1;
  while (Now() < t->end) {
    x = Dive(t, x);
    ++t->dives;
  }
  asm volatile("" : "+r"(x));
  return nullptr;
}

int TinyThreads(int threads, double seconds) {
  size_t frame = getauxval(AT_MINSIGSTKSZ);
  if (frame == 0) frame = 4096;
  const size_t headroom = frame + 128 + kContract;
  std::vector<Tiny> work(threads);
  std::vector<pthread_t> ids(threads);
  const double end = Now() + seconds;
  for (int i = 0; i < threads; ++i) {
    work[i].headroom = headroom;
    work[i].end = end;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN);
    const int rc = pthread_create(&ids[i], &attr, TinyWorker, &work[i]);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      fprintf(stderr, "pthread_create: %s\n", strerror(rc));
      return 3;
    }
  }
  long dives = 0;
  for (int i = 0; i < threads; ++i) {
    pthread_join(ids[i], nullptr);
    dives += work[i].dives;
  }
  printf("dives %ld headroom %zu\n", dives, headroom);
  return dives > 0 ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "paint") == 0) {
    return Paint(atof(argv[2]), argc >= 4 && strcmp(argv[3], "baseline") == 0);
  }
  if (argc >= 4 && strcmp(argv[1], "tiny") == 0) return TinyThreads(atoi(argv[2]), atof(argv[3]));
  fprintf(stderr, "usage: stack_use paint <seconds> [baseline] | tiny <threads> <seconds>\n");
  return 2;
}
