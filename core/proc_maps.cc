#include "core/proc_maps.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "backends/private_fd.h"
#include "core/maps_line.h"
#include "core/session_state.h"

namespace dlprof {
namespace {

// Each loaded object's address ranges (its PT_LOAD segments, page-aligned)
// with its build-id. A mapping of /proc/self/maps takes the build-id of the
// object whose segment holds its first address: no path comparison, so no
// realpath() of each name (~10 readlink() calls an object, 300+ objects in a
// torch process), and the vdso and a deleted or renamed file match too.
struct LoadedRange {
  uintptr_t lo, hi;
  size_t id;  // index into BuildIdScan::ids
};
struct BuildIdScan {
  std::vector<std::string> ids;  // one per object with a build-id
  std::vector<LoadedRange> ranges;
  bool out_of_memory = false;  // the walk stopped there (CollectBuildIds)
};

std::string NoteBuildId(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((nh->n_namesz + 3) & ~3u);
      const char* next = desc + ((nh->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        return std::string(desc, nh->n_descsz);
      }
      p = next;
    }
  }
  return {};
}

// A dl_iterate_phdr callback: no exception may leave it. It would unwind
// through the loader's frames, whose cleanup makes glibc dlopen libgcc_s,
// which is fatal when memory is short ("libgcc_s.so.1 must be installed for
// unwinding to work"). Out of memory, the walk stops here and the caller
// raises the bad_alloc again, outside the loader.
int CollectBuildIds(dl_phdr_info* info, size_t, void* data) {
  auto* scan = static_cast<BuildIdScan*>(data);
  try {
    std::string id = NoteBuildId(info);
    if (id.empty()) return 0;
    scan->ids.push_back(std::move(id));
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const ElfW(Phdr)& ph = info->dlpi_phdr[i];
      if (ph.p_type != PT_LOAD || ph.p_memsz == 0) continue;
      const uintptr_t first = info->dlpi_addr + ph.p_vaddr;
      scan->ranges.push_back({first & ~(page - 1), first + ph.p_memsz, scan->ids.size() - 1});
    }
  } catch (const std::bad_alloc&) {
    scan->out_of_memory = true;
    return 1;
  }
  return 0;
}

// The build-id of the object loaded at addr (ranges sorted), or "".
const std::string& BuildIdAt(const BuildIdScan& scan, uintptr_t addr) {
  static const std::string none;
  auto it = std::upper_bound(scan.ranges.begin(), scan.ranges.end(), addr,
                             [](uintptr_t a, const LoadedRange& r) { return a < r.lo; });
  if (it == scan.ranges.begin()) return none;
  --it;
  return addr < it->hi ? scan.ids[it->id] : none;
}

pthread_mutex_t* g_loader_lock = nullptr;
std::atomic<bool> g_loader_unusable{false};

using IteratePhdrFn = int (*)(int (*)(dl_phdr_info*, size_t, void*), void*);
// Atomic by builtins, not std::atomic: read by the uninstrumented
// NextIteratePhdr, where ASan would not inline std::atomic's (instrumented)
// members.
IteratePhdrFn g_next_iterate_phdr = nullptr;

// glibc's (or the next interposer's). Resolved by FindLoaderLock() at start;
// lazily otherwise (never first from a signal handler: the handler only runs
// after start).
// Not instrumented by ASan, like the interposer below: see there.
__attribute__((no_sanitize("address"))) IteratePhdrFn NextIteratePhdr() {
  IteratePhdrFn f = __atomic_load_n(&g_next_iterate_phdr, __ATOMIC_ACQUIRE);
  if (f == nullptr) {
    f = reinterpret_cast<IteratePhdrFn>(dlsym(RTLD_NEXT, "dl_iterate_phdr"));
    if (f == nullptr) f = [](int (*)(dl_phdr_info*, size_t, void*), void*) { return 0; };
    __atomic_store_n(&g_next_iterate_phdr, f, __ATOMIC_RELEASE);
  }
  return f;
}

struct LockScan {
  const char* base;
  size_t size;
  pid_t tid;
  pthread_mutex_t* found;
  int matches;
};

// Inside dl_iterate_phdr: the loader's write lock is held by this thread.
int FindHeldRecursiveMutex(dl_phdr_info*, size_t, void* data) {
  auto* scan = static_cast<LockScan*>(data);
  for (size_t off = 0; off + sizeof(pthread_mutex_t) <= scan->size; off += alignof(pthread_mutex_t)) {
    auto* m = reinterpret_cast<pthread_mutex_t*>(const_cast<char*>(scan->base) + off);
    if (m->__data.__owner == scan->tid && m->__data.__count >= 1 &&
        (m->__data.__kind & 0x7f) == PTHREAD_MUTEX_RECURSIVE_NP) {
      scan->found = m;
      ++scan->matches;
    }
  }
  return 1;
}

}  // namespace

__thread bool t_in_unwind __attribute__((tls_model("initial-exec"))) = false;

uint64_t LoaderBusyLookups() { return g_state.counter(kLoaderBusy); }

void FindLoaderLock() {
  NextIteratePhdr();
  void* global = dlsym(RTLD_DEFAULT, "_rtld_global");
  const char* base = static_cast<const char*>(global);
  if (base == nullptr) return;
  Dl_info info;
  void* extra = nullptr;  // the symbol's ElfW(Sym), for its size
  if (dladdr1(global, &info, &extra, RTLD_DL_SYMENT) == 0 || extra == nullptr) return;
  const auto* sym = static_cast<const ElfW(Sym)*>(extra);
  if (sym->st_size < sizeof(pthread_mutex_t)) return;
  LockScan scan{base, sym->st_size, gettid(), nullptr, 0};
  NextIteratePhdr()(FindHeldRecursiveMutex, &scan);
  // One match, and released once dl_iterate_phdr returned: that is the lock.
  if (scan.matches == 1 && scan.found->__data.__owner != scan.tid) g_loader_lock = scan.found;
}

bool LoaderLockInheritedHeld() {
  return g_loader_lock != nullptr &&
         __atomic_load_n(&g_loader_lock->__data.__owner, __ATOMIC_RELAXED) != 0;
}

void MarkLoaderUnusable() { g_loader_unusable.store(true); }

// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), in unsigned arithmetic: ~tid is
// negative, and shifting a negative int left is undefined (UBSan says so).
clockid_t ThreadCpuClock(pid_t tid) {
  return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u);
}

int64_t ThreadCpuNs(pid_t tid) {
  timespec ts;
  if (clock_gettime(ThreadCpuClock(tid), &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

char ThreadState(int tid, pid_t pid) {
  char path[64], buf[512];
  if (pid == 0) snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
  else snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", static_cast<int>(pid), tid);
  const int fd = OpenOwn(AT_FDCWD, path, O_RDONLY);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // "tid (comm) S ...": comm may hold spaces and parentheses; the state
  // follows the last ')'.
  const char* paren = strrchr(buf, ')');
  return paren != nullptr && paren[1] == ' ' ? paren[2] : 0;
}

namespace {
// Held by dlprof's threads around their walks of the loaded objects, and by
// fork() (LockLoaderCallsForFork).
pthread_mutex_t g_loader_call_mu = PTHREAD_MUTEX_INITIALIZER;

// Unlocks a mutex this thread holds at the end of the scope (exceptions
// from a callback pass through with it released).
class HeldMutex {
 public:
  explicit HeldMutex(pthread_mutex_t* m) : m_(m) {}
  ~HeldMutex() { pthread_mutex_unlock(m_); }
  HeldMutex(const HeldMutex&) = delete;
  HeldMutex& operator=(const HeldMutex&) = delete;

 private:
  pthread_mutex_t* m_;
};

class LoaderTry {
 public:
  explicit LoaderTry(pthread_mutex_t* m) : m_(m), held_(m == nullptr || pthread_mutex_trylock(m) == 0) {}
  ~LoaderTry() {
    if (m_ != nullptr && held_) pthread_mutex_unlock(m_);
  }
  bool held() const { return held_; }
  LoaderTry(const LoaderTry&) = delete;
  LoaderTry& operator=(const LoaderTry&) = delete;

 private:
  pthread_mutex_t* m_;
  bool held_;
};

// TryIterateLoadedObjects; with `wait_for_calls` false it does not wait for
// dlprof's own lock of the loader calls either.
bool IterateLoadedObjects(int (*callback)(dl_phdr_info*, size_t, void*), void* data,
                          bool wait_for_calls) {
  if (g_loader_unusable.load(std::memory_order_relaxed)) return false;
  if (wait_for_calls) {
    pthread_mutex_lock(&g_loader_call_mu);
  } else if (pthread_mutex_trylock(&g_loader_call_mu) != 0) {
    return false;
  }
  HeldMutex calls(&g_loader_call_mu);
  // The loader's lock is recursive: glibc takes it again at once inside.
  LoaderTry loader(g_loader_lock);
  if (!loader.held()) return false;
  NextIteratePhdr()(callback, data);
  return true;
}
}  // namespace

bool TryIterateLoadedObjects(int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  return IterateLoadedObjects(callback, data, /*wait_for_calls=*/true);
}

void LockLoaderCallsForFork() { pthread_mutex_lock(&g_loader_call_mu); }
void UnlockLoaderCallsAfterFork() { pthread_mutex_unlock(&g_loader_call_mu); }
void ResetLoaderCallsInForkChild() { g_loader_call_mu = PTHREAD_MUTEX_INITIALIZER; }

namespace {
int FirstEntrysCounters(dl_phdr_info* info, size_t, void* data) {
  *static_cast<uint64_t*>(data) = info->dlpi_adds * 1000003ull + info->dlpi_subs;
  return 1;  // the counters are the same in every entry: stop at the first
}

// The first entry's counters; `wait_for_calls` as IterateLoadedObjects.
bool Generation(uint64_t* generation, bool wait_for_calls) {
  if (g_loader_unusable.load(std::memory_order_relaxed)) {
    *generation = 0;  // never changes: the maps are read once
    return true;
  }
  uint64_t gen = 0;
  if (!IterateLoadedObjects(FirstEntrysCounters, &gen, wait_for_calls)) return false;
  *generation = gen;
  return true;
}
}  // namespace

bool LoadedObjectsGeneration(uint64_t* generation) { return Generation(generation, true); }

bool LoadedObjectsGenerationNoWait(uint64_t* generation) { return Generation(generation, false); }

bool ReadExecutableMappings(std::vector<MapEntry>* result, bool last_chance) {
  BuildIdScan scan;
  if (!g_loader_unusable.load(std::memory_order_relaxed) &&
      !TryIterateLoadedObjects(CollectBuildIds, &scan) && !last_chance) {
    return false;
  }
  if (scan.out_of_memory) throw std::bad_alloc();
  std::sort(scan.ranges.begin(), scan.ranges.end(),
            [](const LoadedRange& a, const LoadedRange& b) { return a.lo < b.lo; });

  std::vector<MapEntry> out;
  FILE* f = FopenOwn("/proc/self/maps");
  if (f == nullptr) {
    result->clear();
    return true;
  }
  char line[PATH_MAX + 256];
  MapsLine m;
  while (fgets(line, sizeof(line), f) != nullptr) {
    if (!ParseMapsLine(line, &m) || !m.executable() || m.path.empty()) continue;
    out.push_back(MapEntry{m.lo, m.hi, m.offset, std::string(m.path), BuildIdAt(scan, m.lo)});
  }
  fclose(f);
  *result = std::move(out);
  return true;
}

// Not instrumented by ASan (nor, by the build, TSan): the sanitizer's own
// start-up calls dl_iterate_phdr before its shadow memory exists, and reaches
// this one first when it is in the executable (the test programs link
// dlprof_core, whose exec interposer their subprocess helper pulls in).
__attribute__((no_sanitize("address"))) int ProgramDlIteratePhdr(
    int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  auto next = NextIteratePhdr();
  pthread_mutex_t* lock = g_loader_lock;
  if (!t_in_unwind || lock == nullptr) return next(callback, data);
  if (g_loader_unusable.load(std::memory_order_relaxed) || pthread_mutex_trylock(lock) != 0) {
    g_state.Count(kLoaderBusy);
    return 0;  // as if nothing were loaded: the unwinder stops at this frame
  }
  int result = next(callback, data);  // takes the (recursive) lock again, at once
  pthread_mutex_unlock(lock);
  return result;
}

}  // namespace dlprof
