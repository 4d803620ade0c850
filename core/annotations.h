// Process-wide annotation tables: stage names and buffers. Both only grow, and
// entries are never freed, so any thread (or the collector) may read them.
#ifndef DLPROF_CORE_ANNOTATIONS_H_
#define DLPROF_CORE_ANNOTATIONS_H_

#include <atomic>
#include <cstdint>

namespace dlprof {

constexpr uint32_t kMaxStages = 4096;
constexpr uint32_t kMaxStageNameBytes = 1024;  // longer names are cut (and marked "...")
constexpr int kMaxBuffers = 256;

// Same name -> same id (1-based); 0 when the table is full (then counted in
// StageNamesRefused()). Names longer than kMaxStageNameBytes are cut at a
// UTF-8 character boundary and end in "..." (counted in NamesCut()). Takes a mutex.
uint32_t InternStage(const char* name);
// The name of stage `id`, or nullptr. Lock-free.
const char* StageName(uint32_t id);
uint32_t StageCount();  // highest id handed out

// What the bounded tables refused or cut, for the profile's STATS.
uint64_t StageNamesRefused();  // intern calls for a new name with the table full
uint64_t NamesCut();           // stage and buffer names cut to kMaxStageNameBytes
uint64_t BuffersRefused();     // dlprof_buffer_create calls with the table full
void ResetAnnotationCounters();  // a fork child counts its own
// For a process attached to another's arena (core/shared_arena.h): its
// stage and buffer tables (ArenaRoot::kAnnotations) are the ones read here
// from now on.
void UseAnnotationTablesAt(void* tables);

// fork(): the parent holds both table locks across it, so the child gets
// them free and the tables whole (core/session_fork.cc); but not a lock its
// own thread holds already (a fork from a signal handler that interrupted
// an intern), which the interrupted code releases. Unlock, in the parent
// and in the child, releases what the matching lock took; nested forks
// (from a handler that interrupted a fork's handlers) pair up innermost
// first. Async-signal-safe as fork() is, if no other thread holds a lock
// for long.
void LockAnnotationsForFork();
void UnlockAnnotationsAfterFork();

}  // namespace dlprof

// The C API's opaque buffer handle.
struct dlprof_buffer {
  const char* name = nullptr;
  uint64_t capacity = 0;
  std::atomic<uint64_t> size{0};
  // Accumulated by the collector at each snapshot.
  std::atomic<uint64_t> snapshots{0};
  std::atomic<uint64_t> occupancy_ppm_sum{0};  // sum of size/capacity in millionths
  std::atomic<uint64_t> empty_snapshots{0};
  std::atomic<uint64_t> full_snapshots{0};
  // In a fork child: created by the parent and not yet used here. Such a
  // buffer is neither snapshotted nor reported by the child (a DataLoader
  // worker does not fill its parent's prefetch queue: it came out 100%
  // empty in every worker), and does not keep its collector ticking fast.
  // Cleared by the child's first dlprof_buffer_set_size.
  std::atomic<bool> inherited{false};
};

namespace dlprof {

// Creates a buffer (never freed); nullptr (counted) when the table is full.
dlprof_buffer* CreateBuffer(const char* name, uint64_t capacity);
int BufferCount();
dlprof_buffer* BufferAt(int i);
// Forgets the statistics of every buffer and marks each inherited (a fork
// child starts its own).
void ResetBufferStats();
// A buffer this process uses: not an inherited one it never touched.
inline bool BufferLive(const dlprof_buffer* b) { return !b->inherited.load(std::memory_order_relaxed); }

}  // namespace dlprof

#endif  // DLPROF_CORE_ANNOTATIONS_H_
