// dlopen/dlclose of libbz2 in a loop on the main thread while two threads run
// compress2 inside it (each holding its own reference for ~1 ms, then
// dropping it for ~1 ms, so the library is really unloaded and loaded again
// many times a second, often at the same address). The cfi tables are
// decoded and retired by the collector meanwhile. Prints "ok" when every
// thread did its work; on stderr how many objects were unloaded (for whoever
// debugs it; stdout is what the tests compare).
// Usage: cfi_dlopen_loop [seconds]
//        cfi_dlopen_loop once: libbz2 loaded, run for 200 ms of CPU, unloaded, then
//        1.3 s of sleep: it is gone before dlprof's first read of the maps.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// BZ2_bzBuffToBuffCompress. Not zlib: libdlprof itself links zlib, so it
// would never be unloaded under dlprof.
using Compress = int (*)(char*, unsigned*, char*, unsigned, int, int, int);
const char* const kLib = "libbz2.so.1.0";
double g_end = 0;

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

void SleepUs(long us) {
  timespec t{0, us * 1000};
  nanosleep(&t, nullptr);
}

}  // namespace

// Named so that the tests can find it under libbz2's frames.
extern "C" __attribute__((noinline)) void cfi_dlopen_loop_compress(Compress c, char* in, char* out) {
  unsigned n = 1 << 17;
  c(out, &n, in, 1 << 15, 1, 0, 30);
  __asm__ volatile("" ::: "memory");
}

namespace {

void* Worker(void*) {
  std::vector<char> in(1 << 15), out(1 << 17);
  unsigned seed = 1;
  for (auto& b : in) b = static_cast<char>((seed = seed * 1103515245 + 12345) >> 27);
  long calls = 0;
  while (Now() < g_end) {
    void* h = dlopen(kLib, RTLD_NOW);
    if (h == nullptr) {
      std::fprintf(stderr, "dlopen: %s\n", dlerror());
      std::exit(3);
    }
    auto c = reinterpret_cast<Compress>(dlsym(h, "BZ2_bzBuffToBuffCompress"));
    const double stop = Now() + 0.001;
    do {
      cfi_dlopen_loop_compress(c, in.data(), out.data());
      ++calls;
    } while (Now() < stop);
    dlclose(h);
    SleepUs(1000);
  }
  return reinterpret_cast<void*>(calls);
}

int Once() {
  std::vector<char> in(1 << 15), out(1 << 17);
  unsigned seed = 1;
  for (auto& b : in) b = static_cast<char>((seed = seed * 1103515245 + 12345) >> 27);
  void* h = dlopen(kLib, RTLD_NOW);
  if (h == nullptr) return 3;
  auto c = reinterpret_cast<Compress>(dlsym(h, "BZ2_bzBuffToBuffCompress"));
  // 200 ms of this thread's CPU, not of wall time: on a crowded machine
  // 300 ms of wall time gave 99 samples at 1000 Hz.
  auto cpu = [] {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
  };
  const double stop = cpu() + 0.2;
  while (cpu() < stop) cfi_dlopen_loop_compress(c, in.data(), out.data());
  dlclose(h);
  timespec t{1, 300000000};
  nanosleep(&t, nullptr);
  std::printf("ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "once") return Once();
  g_end = Now() + (argc > 1 ? std::atof(argv[1]) : 2.0);
  pthread_t t[2];
  for (auto& th : t) pthread_create(&th, nullptr, Worker, nullptr);
  long loops = 0;
  while (Now() < g_end) {
    if (void* h = dlopen(kLib, RTLD_NOW)) dlclose(h);
    ++loops;
  }
  long calls = 0;
  for (auto& th : t) {
    void* r = nullptr;
    pthread_join(th, &r);
    calls += reinterpret_cast<long>(r);
  }
  unsigned long long subs = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        *static_cast<unsigned long long*>(data) = info->dlpi_subs;
        return 1;
      },
      &subs);
  std::fprintf(stderr, "%llu objects unloaded, %ld loops, %ld calls\n", subs, loops, calls);
  std::printf("ok %d\n", calls > 0 && loops > 0 ? 1 : 0);
  return 0;
}
