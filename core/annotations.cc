#include "core/annotations.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "core/shared_arena.h"

namespace dlprof {
namespace {

// Nothing here allocates from the program's heap. The first
// dlprof_stage_intern of a call site runs on the program's thread, and a
// few small allocations there (a hash-map node, two strings) move where that
// thread's own next allocations land: in the example pipeline that was
// enough to make each worker's JPEG decoding 20-30% slower, with sampling
// never armed (BENCHMARKS.md, "Data-loading case"). Names go to mmap'd
// blocks instead, and the index is a fixed table.

std::mutex g_name_mu;  // taken only inside g_stage_mu or g_buffer_mu
char* g_name_block = nullptr;
size_t g_name_left = 0;
constexpr size_t kNameBlockBytes = 256 << 10;

// n bytes that live as long as the process; nullptr if mmap fails.
char* NameBytes(size_t n) {
  std::lock_guard<std::mutex> lock(g_name_mu);
  if (n > g_name_left) {
    const size_t size = n > kNameBlockBytes ? n : kNameBlockBytes;
    void* block = ArenaMap(size, AtFork::kCopy);
    if (block == nullptr) return nullptr;
    g_name_block = static_cast<char*>(block);
    g_name_left = size;
  }
  char* out = g_name_block;
  g_name_block += n;
  g_name_left -= n;
  return out;
}

// A lock that knows which thread holds it. fork() holds the stage and buffer
// locks across its clone (LockAnnotationsForFork); a fork from a signal
// handler that interrupted this thread inside InternStage or CreateBuffer
// must not wait for its own thread, for ever (hostile review, session 27:
// 2 of 10 runs hung). The holder is the lock word itself, taken and given
// back by one atomic operation each: a mutex with the holder noted beside
// it had two moments, just after taking and just before giving back, in
// which a handler saw it held by nobody (hostile review, session 28: 2 of 6
// runs hung). Waiting yields; these locks are held for microseconds, and
// two threads seldom want them at once.
class OwnedMutex {
 public:
  void lock() {
    const pthread_t self = pthread_self();
    for (pthread_t none{}; !owner_.compare_exchange_weak(none, self, std::memory_order_acquire,
                                                         std::memory_order_relaxed);
         none = pthread_t{}) {
      sched_yield();
    }
  }
  void unlock() { owner_.store(pthread_t{}, std::memory_order_release); }
  // True exactly while this thread holds it (a handler on the thread sees
  // its interrupted code's hold); never true for another thread.
  bool HeldByThisThread() const {
    return pthread_equal(owner_.load(std::memory_order_relaxed), pthread_self()) != 0;
  }

 private:
  std::atomic<pthread_t> owner_{};  // pthread_t{} (0): free; glibc's pthread_self is never 0
};

OwnedMutex g_stage_mu;
OwnedMutex g_buffer_mu;
// What each fork of this thread took (not a lock its interrupted code held
// already), two bits a level, for its parent's and child's handlers to
// release. A stack: a handler that interrupts a fork's own handlers may fork
// again (nested forks end first), and a single flag per lock, overwritten by
// the inner fork, made the outer one leave the stage lock held (hostile
// review, session 28).
constexpr int kForkLevels = 32;
__thread uint64_t t_fork_took __attribute__((tls_model("initial-exec"))) = 0;
__thread int t_fork_depth __attribute__((tls_model("initial-exec"))) = 0;
// Open addressing over stage ids (0 = empty slot), at most half full, so
// every probe ends.
constexpr uint32_t kStageIndexSize = 2 * kMaxStages;
static_assert((kStageIndexSize & (kStageIndexSize - 1)) == 0, "a power of two");

// The tables, in the shared arena (core/shared_arena.h) with the names they
// point to, so that a collector process can read them; zeroed memory is an
// empty table. Made at the first stage or buffer.
struct Tables {
  // The key of id i is the name as given, up to kMaxStageNameBytes + 1
  // bytes (over-long names sharing that prefix are one stage: they print
  // the same once cut). Index and keys under g_stage_mu.
  uint32_t stage_index[kStageIndexSize];
  const char* stage_keys[kMaxStages + 1];
  uint32_t stage_key_bytes[kMaxStages + 1];
  std::atomic<const char*> stage_names[kMaxStages + 1];
  std::atomic<uint32_t> stage_count;
  std::atomic<int> buffer_count;
  dlprof_buffer buffers[kMaxBuffers];  // under g_buffer_mu
  // What the bounds refused or cut, here (in the arena) rather than in the
  // library's own memory so that a collector process reads them too: its
  // files left them out, and the report did not say names were lost.
  std::atomic<uint64_t> stage_names_refused;
  std::atomic<uint64_t> names_cut;
  std::atomic<uint64_t> buffers_refused;
};

std::atomic<Tables*> g_tables{nullptr};

Tables* TablesNow() { return g_tables.load(std::memory_order_acquire); }

// Under g_stage_mu or g_buffer_mu (either: the first to come makes them).
Tables* MakeTables() {
  static std::mutex make_mu;
  std::lock_guard<std::mutex> lock(make_mu);
  Tables* t = TablesNow();
  if (t == nullptr) {
    t = static_cast<Tables*>(ArenaMap(sizeof(Tables), AtFork::kCopy));
    if (t != nullptr) {
      g_tables.store(t, std::memory_order_release);
      ArenaSetRoot(ArenaRoot::kAnnotations, t);
    }
  }
  return t;
}

// Adds one to a refusal counter of the tables, when there are any.
void Count(std::atomic<uint64_t> Tables::*counter) {
  if (Tables* t = TablesNow()) (t->*counter).fetch_add(1, std::memory_order_relaxed);
}

uint64_t Read(std::atomic<uint64_t> Tables::*counter) {
  const Tables* t = TablesNow();
  return t == nullptr ? 0 : (t->*counter).load(std::memory_order_relaxed);
}

const char* CopyName(const char* name, size_t max_bytes) {
  size_t n = strnlen(name, max_bytes + 1);
  bool cut = n > max_bytes;
  if (cut) {
    n = max_bytes;
    // Not inside a UTF-8 sequence: back up over continuation bytes (at most 3).
    for (int i = 0; i < 3 && n > 0 && (static_cast<unsigned char>(name[n]) & 0xc0) == 0x80; ++i) --n;
    Count(&Tables::names_cut);
  }
  char* copy = NameBytes(n + (cut ? 4 : 1));
  if (copy == nullptr) return "?";
  memcpy(copy, name, n);
  if (cut) memcpy(copy + n, "...", 3), n += 3;
  copy[n] = '\0';
  return copy;
}

uint32_t HashBytes(const char* s, size_t n) {  // FNV-1a
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 16777619u;
  return h;
}

}  // namespace

uint32_t InternStage(const char* name) {
  if (name == nullptr || !ArenaOwned()) return 0;
  std::lock_guard<OwnedMutex> lock(g_stage_mu);
  Tables* t = MakeTables();
  if (t == nullptr) return 0;
  const size_t n = strnlen(name, kMaxStageNameBytes + 1);
  uint32_t slot = HashBytes(name, n) & (kStageIndexSize - 1);
  for (uint32_t id; (id = t->stage_index[slot]) != 0; slot = (slot + 1) & (kStageIndexSize - 1)) {
    if (t->stage_key_bytes[id] == n && memcmp(t->stage_keys[id], name, n) == 0) return id;
  }
  const uint32_t id = t->stage_count.load(std::memory_order_relaxed) + 1;
  char* key = id > kMaxStages ? nullptr : NameBytes(n);
  if (key == nullptr) {
    // Bounded: the name is not kept; the report says how many were refused.
    Count(&Tables::stage_names_refused);
    return 0;
  }
  memcpy(key, name, n);
  t->stage_keys[id] = key;
  t->stage_key_bytes[id] = static_cast<uint32_t>(n);
  t->stage_names[id].store(CopyName(name, kMaxStageNameBytes), std::memory_order_release);
  t->stage_count.store(id, std::memory_order_release);
  t->stage_index[slot] = id;
  return id;
}

void UseAnnotationTablesAt(void* tables) {
  g_tables.store(static_cast<Tables*>(tables), std::memory_order_release);
}

const char* StageName(uint32_t id) {
  const Tables* t = TablesNow();
  if (id == 0 || id > kMaxStages || t == nullptr) return nullptr;
  return t->stage_names[id].load(std::memory_order_acquire);
}

uint32_t StageCount() {
  const Tables* t = TablesNow();
  return t == nullptr ? 0 : t->stage_count.load(std::memory_order_acquire);
}

dlprof_buffer* CreateBuffer(const char* name, uint64_t capacity) {
  if (!ArenaOwned()) return nullptr;
  std::lock_guard<OwnedMutex> lock(g_buffer_mu);
  Tables* t = MakeTables();
  if (t == nullptr) return nullptr;
  int n = t->buffer_count.load(std::memory_order_relaxed);
  if (n >= kMaxBuffers) {
    Count(&Tables::buffers_refused);
    return nullptr;
  }
  dlprof_buffer* b = &t->buffers[n];
  b->name = CopyName(name ? name : "", kMaxStageNameBytes);
  b->capacity = capacity;
  t->buffer_count.store(n + 1, std::memory_order_release);
  return b;
}

int BufferCount() {
  const Tables* t = TablesNow();
  return t == nullptr ? 0 : t->buffer_count.load(std::memory_order_acquire);
}
dlprof_buffer* BufferAt(int i) { return &TablesNow()->buffers[i]; }

uint64_t StageNamesRefused() { return Read(&Tables::stage_names_refused); }
uint64_t NamesCut() { return Read(&Tables::names_cut); }
uint64_t BuffersRefused() { return Read(&Tables::buffers_refused); }

void ResetAnnotationCounters() {
  if (Tables* t = TablesNow()) {
    t->stage_names_refused.store(0);
    t->names_cut.store(0);
    t->buffers_refused.store(0);
  }
}

// A lock this thread's interrupted code holds is left to that code: the
// tables may be mid-update at the clone, and in the child as in the parent
// the same code goes on to finish the update and unlock. The level is
// reserved before the bits are written: a handler that comes in between
// ends its own fork, and its bits, first.
void LockAnnotationsForFork() {
  const int level = t_fork_depth++;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (level >= kForkLevels) return;  // nested past any real program: takes nothing
  const bool stage = !g_stage_mu.HeldByThisThread();
  if (stage) g_stage_mu.lock();
  const bool buffer = !g_buffer_mu.HeldByThisThread();
  if (buffer) g_buffer_mu.lock();
  t_fork_took |= (uint64_t{stage} | uint64_t{buffer} << 1) << (2 * level);
}

void UnlockAnnotationsAfterFork() {
  if (t_fork_depth == 0) return;  // no fork of this thread's under way
  const int level = t_fork_depth - 1;
  if (level < kForkLevels) {
    const uint64_t took = (t_fork_took >> (2 * level)) & 3;
    t_fork_took &= ~(uint64_t{3} << (2 * level));
    if (took & 2) g_buffer_mu.unlock();
    if (took & 1) g_stage_mu.unlock();
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_fork_depth = level;
}

void ResetBufferStats() {
  for (int i = 0; i < BufferCount(); ++i) {
    dlprof_buffer* b = BufferAt(i);
    b->snapshots.store(0);
    b->occupancy_ppm_sum.store(0);
    b->empty_snapshots.store(0);
    b->full_snapshots.store(0);
    b->inherited.store(true);
  }
}

}  // namespace dlprof
