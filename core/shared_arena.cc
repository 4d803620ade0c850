#include "core/shared_arena.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "backends/private_fd.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif

namespace dlprof {
namespace {

// Slots need 1 extent, their rings 1 per thread slot ever claimed, the
// other tables a few.
constexpr int kMaxExtents = 2048;

struct Extent {
  uintptr_t addr;
  size_t bytes;
  off_t offset;  // in the memfd, when shared
  AtFork at_fork;
  bool shared;
};

// The arena's first extent, at offset 0 of the memfd: what another process
// needs to map the rest at the same addresses (ArenaAttach), and where each
// structure starts. Extents are filled under g_mu, then counted (release).
struct Header {
  uint64_t magic;
  std::atomic<int> extent_count;
  std::atomic<int> fork_copies;  // copies under way (ArenaForkCopyUnderway)
  std::atomic<const void*> roots[static_cast<int>(ArenaRoot::kCount)];
  Extent extents[kMaxExtents];
};
constexpr uint64_t kMagic = 0x31414e4552414c44ull;  // "DLARENA1"

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
// Where no memfd can be had, the table of private extents lives here.
Header g_private_header;
Header* g_header = &g_private_header;
bool g_initialized = false;
bool g_all_shared = true;
PrivateFd g_memfd;
off_t g_memfd_bytes = 0;

// A private page, wiped (zeroed) in every fork child by the kernel, that
// holds 1 while this process's extents are its own. A child that ran our
// atfork handler sets it again after taking its copy; one that ran none
// (_Fork, a raw fork syscall) reads 0. nullptr: no shared extent can exist.
std::atomic<const volatile uint8_t*> g_owned_page{nullptr};

// This process's own count of extents and its roots, in private memory: a
// fork child's copy is the parent's at the fork, while the header, shared
// until the child has taken its copy, may already hold extents and roots
// the parent added since (mapped in the parent only).
int g_local_count = 0;
const void* g_local_roots[static_cast<int>(ArenaRoot::kCount)];

int ExtentCount() { return g_local_count; }

size_t PageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t RoundUp(size_t bytes) {
  const size_t page = PageBytes();
  return (bytes + page - 1) / page * page;
}

int NewMemfd() {
  // NOEXEC_SEAL first: with vm.memfd_noexec = 2 a memfd without it is
  // refused, and since Linux 6.3 one without either flag is logged.
  long fd = syscall(SYS_memfd_create, "dlprof-arena", MFD_CLOEXEC | MFD_NOEXEC_SEAL);
  if (fd < 0 && errno == EINVAL) fd = syscall(SYS_memfd_create, "dlprof-arena", MFD_CLOEXEC);
  return static_cast<int>(fd);
}

// Growing the memfd past RLIMIT_FSIZE would raise SIGXFSZ, whose default
// action kills the program: such a process gets private extents instead.
bool GrowAllowed(off_t to) {
  rlimit limit{};
  return getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
         static_cast<rlim_t>(to) <= limit.rlim_cur;
}

void* MapShared(size_t bytes, off_t* offset);
void PrepareForkCopy();
void CloseForkCopyInParent();

// Under g_mu: the memfd, its header and the wipe-on-fork page, once. The
// page is published only with a header: where the arena cannot be shared,
// its extents are private memory, which a raw-fork child may write freely.
void InitLocked() {
  if (g_initialized) return;
  g_initialized = true;
  g_all_shared = false;
  void* page = mmap(nullptr, PageBytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
  if (page == MAP_FAILED) return;
  if (madvise(page, PageBytes(), MADV_WIPEONFORK) != 0 ||  // Linux < 4.14
      !(g_memfd = KeepPrivate(NewMemfd())).valid()) {
    munmap(page, PageBytes());
    return;
  }
  g_all_shared = true;
  off_t offset = 0;
  const size_t bytes = RoundUp(sizeof(Header));
  auto* header = static_cast<Header*>(MapShared(bytes, &offset));
  if (header == nullptr) {
    g_all_shared = false;
    ReleasePrivate(&g_memfd);
    munmap(page, PageBytes());
    return;
  }
  header->magic = kMagic;
  header->extents[0] = Extent{reinterpret_cast<uintptr_t>(header), bytes, offset, AtFork::kCopy,
                              true};
  header->extent_count.store(1, std::memory_order_release);
  g_header = header;
  g_local_count = 1;
  static_cast<volatile uint8_t*>(page)[0] = 1;
  g_owned_page.store(static_cast<const volatile uint8_t*>(page), std::memory_order_release);
  // Every fork child takes its copy, whether a session runs or not (one
  // that failed to start after its first extent has no fork handler of its
  // own). Registered before the session's handlers: this prepare runs after
  // theirs (the stage and buffer locks held), this child handler before.
  pthread_atfork(PrepareForkCopy, CloseForkCopyInParent, ArenaPrivatizeInForkChild);
}

void* MapPrivate(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Where the memfd can be opened again once the program closed its number
// (ArenaSetReopen), or nullptr.
std::atomic<int (*)()> g_reopen{nullptr};

// Under g_mu: whether the memfd's descriptor is usable, opened again through
// g_reopen if the program took its number (the old number is the program's
// now: left alone).
bool MemfdUsable() {
  if (StillPrivate(g_memfd)) return true;
  int (*reopen)() = g_reopen.load();
  if (reopen == nullptr || g_memfd.ino == 0) return false;
  const PrivateFd again = KeepPrivate(reopen());
  if (!again.valid() || again.dev != g_memfd.dev || again.ino != g_memfd.ino) {
    if (again.valid()) close(again.fd);
    return false;
  }
  g_memfd = again;
  return true;
}

// Under g_mu: `bytes` more of the memfd, mapped shared; nullptr when the
// memfd is gone (the program closed its number, and it cannot be opened
// again) or cannot grow.
void* MapShared(size_t bytes, off_t* offset) {
  if (!g_all_shared || !MemfdUsable()) return nullptr;
  *offset = g_memfd_bytes;
  const off_t end = *offset + static_cast<off_t>(bytes);
  if (!GrowAllowed(end) || ftruncate(g_memfd.fd, end) != 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, g_memfd.fd, *offset);
  if (p == MAP_FAILED) return nullptr;
  g_memfd_bytes = end;
  return p;
}

// The copy reads what other threads may be writing meanwhile (a thread's
// slot counters, its stage stack): racy by design, as the collector's reads
// of them are, and the values a fork child gets are reset or only weigh
// its first tick. ThreadSanitizer is told so, not to report the reads.
#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#define DLPROF_RACY_READS_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define DLPROF_RACY_READS_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define DLPROF_RACY_READS_BEGIN() ((void)0)
#define DLPROF_RACY_READS_END() ((void)0)
#endif

// Copies what was ever written of `e` into `to` at `to_offset`: the memfd's
// data ranges (SEEK_DATA: pages never touched are holes, so a 418 KB slot
// table with 3 slots claimed costs one page), or all of it when the
// parent's descriptor is gone. False on a write error.
bool CopyExtent(const Extent& e, const PrivateFd& from, int to, off_t to_offset) {
  const off_t end = e.offset + static_cast<off_t>(e.bytes);
  off_t at = e.offset;
  const bool sparse = StillPrivate(from);
  while (at < end) {
    off_t data = at, hole = end;
    if (sparse) {
      data = lseek(from.fd, at, SEEK_DATA);
      if (data < 0 || data >= end) break;  // ENXIO: no data after `at`
      hole = lseek(from.fd, data, SEEK_HOLE);
      if (hole < 0 || hole > end) hole = end;
    }
    const char* src = reinterpret_cast<const char*>(e.addr) + (data - e.offset);
    size_t left = static_cast<size_t>(hole - data);
    off_t dst = to_offset + (data - e.offset);
    while (left > 0) {
      DLPROF_RACY_READS_BEGIN();
      const ssize_t n = pwrite(to, src, left, dst);
      DLPROF_RACY_READS_END();
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      src += n;
      dst += n;
      left -= static_cast<size_t>(n);
    }
    at = hole;
  }
  return true;
}

// The child's copy of the arena, made by the parent in its atfork prepare
// handler: a snapshot as at the fork. Copied later, by the child, it would
// hold what the parent's other threads wrote since (a stage table entry
// pointing into a names block mapped in the parent only, a thread's slot
// marked exited after it forked), while the child's own memory is the
// parent's at the fork. The descriptor is the child's (inherited at the
// same number); the parent closes its copy once fork() has returned.
struct ForkCopy {
  bool locked = false;  // the prepare handler holds g_mu
  bool ready = false;
  PrivateFd fd;
  off_t bytes = 0;
  off_t offsets[kMaxExtents] = {};
};
ForkCopy g_fork_copy;

void PrepareForkCopy() {
  g_fork_copy.ready = false;
  // Held until fork() returns: no extent half made. Bounded (~2 ms): a
  // fork from a signal handler may have interrupted this thread inside
  // ArenaMap; then the child copies what it can itself.
  g_fork_copy.locked = false;
  for (int i = 0; i < 200 && !g_fork_copy.locked; ++i) {
    g_fork_copy.locked = pthread_mutex_trylock(&g_mu) == 0;
    if (!g_fork_copy.locked) {
      const timespec pause{0, 10000};
      nanosleep(&pause, nullptr);
    }
  }
  if (!g_fork_copy.locked) return;
  // A raw-fork child's arena is its parent's; its children copy as they can.
  if (g_owned_page.load(std::memory_order_relaxed) == nullptr || !ArenaOwned()) return;
  PrivateFd fd = KeepPrivate(NewMemfd());
  if (!fd.valid()) return;
  off_t total = 0;
  for (int i = 0; i < ExtentCount(); ++i) {
    if (g_header->extents[i].shared) total += static_cast<off_t>(g_header->extents[i].bytes);
  }
  bool ok = GrowAllowed(total) && ftruncate(fd.fd, total) == 0;
  off_t at = 0;
  // Extents in order, each from its start: a structure's root or header
  // (lower) is copied before what it points to (the cfi region's snapshot
  // pointer before its rows), and a collector process frees nothing while
  // the count is raised.
  g_header->fork_copies.fetch_add(1, std::memory_order_seq_cst);
  for (int i = 0; ok && i < ExtentCount(); ++i) {
    const Extent& e = g_header->extents[i];
    if (!e.shared) continue;
    g_fork_copy.offsets[i] = at;
    if (e.at_fork == AtFork::kCopy) ok = CopyExtent(e, g_memfd, fd.fd, at);
    at += static_cast<off_t>(e.bytes);
  }
  g_header->fork_copies.fetch_sub(1, std::memory_order_seq_cst);
  if (!ok) {
    ReleasePrivate(&fd);
    return;
  }
  g_fork_copy.fd = fd;
  g_fork_copy.bytes = total;
  g_fork_copy.ready = true;
}

void CloseForkCopyInParent() {
  if (g_fork_copy.ready) ReleasePrivate(&g_fork_copy.fd);
  g_fork_copy.ready = false;
  if (g_fork_copy.locked) pthread_mutex_unlock(&g_mu);
  g_fork_copy.locked = false;
}

// In the child: its extents mapped from the copy the parent made for it.
// False if any mapping failed (the rest is then copied by the child).
bool MapForkCopy() {
  for (int i = 0; i < ExtentCount(); ++i) {
    const Extent& e = g_header->extents[i];
    if (e.shared && mmap(reinterpret_cast<void*>(e.addr), e.bytes, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_FIXED, g_fork_copy.fd.fd,
                         g_fork_copy.offsets[i]) == MAP_FAILED) {
      return false;  // offsets untouched: the child's own copy reads the parent's memfd by them
    }
  }
  // The header is the child's now (extent 0): its offsets are the copy's.
  for (int i = 0; i < ExtentCount(); ++i) {
    if (g_header->extents[i].shared) g_header->extents[i].offset = g_fork_copy.offsets[i];
  }
  return true;
}

}  // namespace

namespace {
void* MapExtent(size_t bytes, AtFork at_fork, bool private_if_not_shared) {
  if (bytes == 0) return nullptr;
  bytes = RoundUp(bytes);
  pthread_mutex_lock(&g_mu);
  InitLocked();
  void* p = nullptr;
  if (ExtentCount() < kMaxExtents) {
    off_t offset = 0;
    p = MapShared(bytes, &offset);
    const bool shared = p != nullptr;
    if (!shared && private_if_not_shared) {
      g_all_shared = false;  // one private extent: a collector process could not see it
      p = MapPrivate(bytes);
    }
    if (p != nullptr) {
      const int n = ExtentCount();
      g_header->extents[n] = Extent{reinterpret_cast<uintptr_t>(p), bytes, offset, at_fork, shared};
      g_local_count = n + 1;
      g_header->extent_count.store(n + 1, std::memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_mu);
  return p;
}
}  // namespace

void* ArenaMap(size_t bytes, AtFork at_fork) { return MapExtent(bytes, at_fork, true); }

void* ArenaMapShared(size_t bytes, AtFork at_fork) { return MapExtent(bytes, at_fork, false); }

bool ArenaShared() {
  pthread_mutex_lock(&g_mu);
  const bool shared = g_initialized && g_all_shared;
  pthread_mutex_unlock(&g_mu);
  return shared;
}

bool ArenaOwned() {
  const volatile uint8_t* page = g_owned_page.load(std::memory_order_relaxed);
  return page == nullptr || page[0] != 0;
}

namespace {

// The end of a fork child's privatization, either way.
void FinishPrivatizing(const volatile uint8_t* owned) {
  for (int i = 0; i < ExtentCount(); ++i) {
    if (!g_header->extents[i].shared) g_all_shared = false;
  }
  // The header is the child's now: its count and roots as at the fork.
  g_header->extent_count.store(g_local_count, std::memory_order_release);
  for (int r = 0; r < static_cast<int>(ArenaRoot::kCount); ++r) {
    g_header->roots[r].store(g_local_roots[r], std::memory_order_release);
  }
  // Copied while the parent's copy raised it: no copy of this child's is
  // under way.
  g_header->fork_copies.store(0, std::memory_order_seq_cst);
  // The wipe zeroed it in this child: the extents are ours again.
  const_cast<volatile uint8_t*>(owned)[0] = 1;
}

}  // namespace

void ArenaPrivatizeInForkChild() {
  // The prepare handler's hold, this thread's: released as taken. (Written
  // over, the lock stayed held for ThreadSanitizer, which then saw each
  // later lock of the child's taken inside it: a lock-order inversion.)
  const bool held_here = g_fork_copy.locked;
  if (held_here) {
    g_fork_copy.locked = false;
    pthread_mutex_unlock(&g_mu);
  }
  const volatile uint8_t* owned = g_owned_page.load(std::memory_order_relaxed);
  // Every extent is private memory, or this child took its copy already
  // (the arena's own fork handler runs before the session's, which asks too).
  if (owned == nullptr || owned[0] != 0) return;
  // One thread now: a hold the prepare handler could not take was another
  // thread's, which is not in this process.
  if (!held_here) g_mu = PTHREAD_MUTEX_INITIALIZER;
  if (g_fork_copy.ready) {
    g_fork_copy.ready = false;
    if (MapForkCopy()) {
      if (StillPrivate(g_memfd)) close(g_memfd.fd);  // the parent's
      g_memfd = g_fork_copy.fd;
      g_memfd_bytes = g_fork_copy.bytes;
      FinishPrivatizing(owned);
      return;
    }
    // A mapping failed: the child copies what is left itself, below.
    ReleasePrivate(&g_fork_copy.fd);
  }
  // The parent's memfd, inherited at the same number: read for its holes,
  // then closed (not ours to grow).
  const PrivateFd parents = g_memfd;
  g_memfd = KeepPrivate(NewMemfd());
  g_memfd_bytes = 0;
  off_t total = 0;
  for (int i = 0; i < ExtentCount(); ++i) {
    if (g_header->extents[i].shared) total += static_cast<off_t>(g_header->extents[i].bytes);
  }
  // One ftruncate for all: a fork child pays per extent only the copy of
  // what was written and one mmap.
  g_all_shared = g_memfd.valid() && GrowAllowed(total) && ftruncate(g_memfd.fd, total) == 0;
  for (int i = 0; i < ExtentCount(); ++i) {
    Extent& e = g_header->extents[i];
    if (!e.shared) continue;
    void* target = reinterpret_cast<void*>(e.addr);
    const off_t offset = g_memfd_bytes;
    bool moved = g_all_shared &&
                 (e.at_fork == AtFork::kZero || CopyExtent(e, parents, g_memfd.fd, offset)) &&
                 mmap(target, e.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                      g_memfd.fd, offset) != MAP_FAILED;
    if (moved) {
      g_memfd_bytes = offset + static_cast<off_t>(e.bytes);
      e.offset = offset;
    } else {
      // Private pages at the same address, with the same contents: the
      // child's own, though no collector process could map them.
      g_all_shared = false;
      const size_t keep = e.at_fork == AtFork::kCopy ? e.bytes : 0;
      void* copy = keep > 0 ? MapPrivate(keep) : nullptr;
      if (copy != nullptr) memcpy(copy, target, keep);
      if (mmap(target, e.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
               -1, 0) != MAP_FAILED &&
          copy != nullptr) {
        memcpy(target, copy, keep);
      }
      if (copy != nullptr) munmap(copy, keep);
    }
    e.shared = moved;
  }
  if (StillPrivate(parents)) close(parents.fd);
  FinishPrivatizing(owned);
}

void ArenaSetRoot(ArenaRoot root, const void* p) {
  pthread_mutex_lock(&g_mu);
  g_local_roots[static_cast<int>(root)] = p;
  g_header->roots[static_cast<int>(root)].store(p, std::memory_order_release);
  pthread_mutex_unlock(&g_mu);
}

const void* ArenaRootOf(ArenaRoot root) {
  return g_header->roots[static_cast<int>(root)].load(std::memory_order_acquire);
}

namespace {

int g_attached_fd = -1;
int g_attached_count = 0;  // extents mapped here so far

// MAP_FIXED_NOREPLACE (Linux 4.17; older kernels take it as a hint, so the
// address is checked too).
void* MapAt(uintptr_t addr, size_t bytes, int fd, off_t offset, std::string* error) {
  void* want = reinterpret_cast<void*>(addr);
  void* p = mmap(want, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, offset);
  if (p == want) return p;
  if (p != MAP_FAILED) munmap(p, bytes);
  if (error != nullptr) {
    char text[128];
    snprintf(text, sizeof(text), "arena extent at 0x%lx (%zu bytes): %s",
             static_cast<unsigned long>(addr), bytes,
             p == MAP_FAILED ? strerror(errno) : "address taken here");
    *error = text;
  }
  return nullptr;
}

}  // namespace

bool ArenaAttach(int fd, std::string* error) {
  const size_t bytes = RoundUp(sizeof(Header));
  void* probe = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (probe == MAP_FAILED) {
    if (error != nullptr) *error = std::string("arena header: ") + strerror(errno);
    return false;
  }
  const auto* seen = static_cast<const Header*>(probe);
  const bool arena = seen->magic == kMagic && seen->extent_count.load() >= 1 &&
                     seen->extents[0].bytes == bytes && seen->extents[0].offset == 0;
  const uintptr_t addr = arena ? seen->extents[0].addr : 0;
  munmap(probe, bytes);
  if (!arena) {
    if (error != nullptr) *error = "not a dlprof arena";
    return false;
  }
  void* header = MapAt(addr, bytes, fd, 0, error);
  if (header == nullptr) return false;
  pthread_mutex_lock(&g_mu);
  g_header = static_cast<Header*>(header);
  g_initialized = true;
  g_attached_fd = fd;
  g_attached_count = 1;
  pthread_mutex_unlock(&g_mu);
  return ArenaAttachNewExtents(error);
}

bool ArenaAttachNewExtents(std::string* error) {
  pthread_mutex_lock(&g_mu);
  bool ok = g_attached_fd >= 0;
  for (const int n = g_header->extent_count.load(std::memory_order_acquire);
       ok && g_attached_count < n; ++g_attached_count) {
    const Extent e = g_header->extents[g_attached_count];
    // A private extent of the program's (it could not grow the memfd, or
    // lost it): what lives there cannot be read from here, so what points
    // there must not be followed. The reader stops at it.
    if (e.shared) {
      ok = MapAt(e.addr, e.bytes, g_attached_fd, e.offset, error) != nullptr;
    } else {
      ok = false;
      if (error != nullptr) *error = "the program's arena is no longer shared (a private extent)";
    }
  }
  pthread_mutex_unlock(&g_mu);
  return ok;
}

void ArenaSetReopen(int (*reopen)()) { g_reopen.store(reopen); }

int ArenaSharedFd() {
  pthread_mutex_lock(&g_mu);
  const int fd = g_initialized && g_all_shared && MemfdUsable() ? g_memfd.fd : -1;
  pthread_mutex_unlock(&g_mu);
  return fd;
}

namespace {
// Whether [lo, hi) is inside the first `count` extents. g_mu held.
bool InExtents(uintptr_t lo, uintptr_t hi, int count) {
  for (int i = count - 1; i >= 0; --i) {
    const Extent& e = g_header->extents[i];
    if (lo >= e.addr && hi <= e.addr + e.bytes) return true;
  }
  return false;
}
}  // namespace

bool ArenaReadable(const void* p, size_t bytes) {
  if (g_attached_fd < 0) return true;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  pthread_mutex_lock(&g_mu);
  bool in = InExtents(lo, hi, g_attached_count);
  pthread_mutex_unlock(&g_mu);
  if (in || !ArenaAttachNewExtents(nullptr)) return in;
  pthread_mutex_lock(&g_mu);
  in = InExtents(lo, hi, g_attached_count);
  pthread_mutex_unlock(&g_mu);
  return in;
}

bool ArenaCanGrow(size_t bytes) {
  pthread_mutex_lock(&g_mu);
  // (A fork's copy needs as much again, in a memfd of the child's.)
  const bool ok = GrowAllowed(g_memfd_bytes + static_cast<off_t>(bytes));
  pthread_mutex_unlock(&g_mu);
  return ok;
}

bool ArenaForkCopyUnderway() {
  return g_header->fork_copies.load(std::memory_order_seq_cst) != 0;
}

ArenaUsage ArenaUsageNow() {
  ArenaUsage usage;
  pthread_mutex_lock(&g_mu);
  usage.extents = ExtentCount();
  for (int i = 0; i < ExtentCount(); ++i) usage.bytes += g_header->extents[i].bytes;
  usage.shared = g_initialized && g_all_shared;
  pthread_mutex_unlock(&g_mu);
  return usage;
}

}  // namespace dlprof
