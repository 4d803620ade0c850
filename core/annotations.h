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

// Same name -> same id (1-based); 0 when the table is full. Takes a mutex.
uint32_t InternStage(const char* name);
// The name of stage `id`, or nullptr. Lock-free.
const char* StageName(uint32_t id);
uint32_t StageCount();  // highest id handed out

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
};

namespace dlprof {

// Creates a buffer (never freed); nullptr when the table is full.
dlprof_buffer* CreateBuffer(const char* name, uint64_t capacity);
int BufferCount();
dlprof_buffer* BufferAt(int i);
// Forgets the statistics of every buffer (a fork child starts its own).
void ResetBufferStats();

}  // namespace dlprof

#endif  // DLPROF_CORE_ANNOTATIONS_H_
