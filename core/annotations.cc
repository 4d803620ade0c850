#include "core/annotations.h"

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

namespace dlprof {
namespace {

std::mutex g_stage_mu;
std::unordered_map<std::string, uint32_t>* g_stage_ids = nullptr;  // under g_stage_mu
std::atomic<const char*> g_stage_names[kMaxStages + 1];
std::atomic<uint32_t> g_stage_count{0};

std::mutex g_buffer_mu;
dlprof_buffer g_buffers[kMaxBuffers];
std::atomic<int> g_buffer_count{0};

std::atomic<uint64_t> g_stage_names_refused{0};
std::atomic<uint64_t> g_names_cut{0};
std::atomic<uint64_t> g_buffers_refused{0};

const char* CopyName(const char* name, size_t max_bytes) {
  size_t n = strnlen(name, max_bytes + 1);
  bool cut = n > max_bytes;
  if (cut) {
    n = max_bytes;
    // Not inside a UTF-8 sequence: back up over continuation bytes (at most 3).
    for (int i = 0; i < 3 && n > 0 && (static_cast<unsigned char>(name[n]) & 0xc0) == 0x80; ++i) --n;
    g_names_cut.fetch_add(1, std::memory_order_relaxed);
  }
  char* copy = new char[n + (cut ? 4 : 1)];
  memcpy(copy, name, n);
  if (cut) memcpy(copy + n, "...", 3), n += 3;
  copy[n] = '\0';
  return copy;
}

}  // namespace

uint32_t InternStage(const char* name) {
  if (name == nullptr) return 0;
  std::lock_guard<std::mutex> lock(g_stage_mu);
  if (g_stage_ids == nullptr) g_stage_ids = new std::unordered_map<std::string, uint32_t>();
  std::string key(name, strnlen(name, kMaxStageNameBytes + 1));
  auto it = g_stage_ids->find(key);
  if (it != g_stage_ids->end()) return it->second;
  uint32_t id = g_stage_count.load(std::memory_order_relaxed) + 1;
  if (id > kMaxStages) {
    // Bounded: the name is not kept; the report says how many were refused.
    g_stage_names_refused.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  g_stage_names[id].store(CopyName(name, kMaxStageNameBytes), std::memory_order_release);
  g_stage_count.store(id, std::memory_order_release);
  g_stage_ids->emplace(std::move(key), id);
  return id;
}

const char* StageName(uint32_t id) {
  if (id == 0 || id > kMaxStages) return nullptr;
  return g_stage_names[id].load(std::memory_order_acquire);
}

uint32_t StageCount() { return g_stage_count.load(std::memory_order_acquire); }

dlprof_buffer* CreateBuffer(const char* name, uint64_t capacity) {
  std::lock_guard<std::mutex> lock(g_buffer_mu);
  int n = g_buffer_count.load(std::memory_order_relaxed);
  if (n >= kMaxBuffers) {
    g_buffers_refused.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  dlprof_buffer* b = &g_buffers[n];
  b->name = CopyName(name ? name : "", kMaxStageNameBytes);
  b->capacity = capacity;
  g_buffer_count.store(n + 1, std::memory_order_release);
  return b;
}

int BufferCount() { return g_buffer_count.load(std::memory_order_acquire); }
dlprof_buffer* BufferAt(int i) { return &g_buffers[i]; }

uint64_t StageNamesRefused() { return g_stage_names_refused.load(std::memory_order_relaxed); }
uint64_t NamesCut() { return g_names_cut.load(std::memory_order_relaxed); }
uint64_t BuffersRefused() { return g_buffers_refused.load(std::memory_order_relaxed); }

void ResetAnnotationCounters() {
  g_stage_names_refused.store(0);
  g_names_cut.store(0);
  g_buffers_refused.store(0);
}

void LockAnnotationsForFork() {
  g_stage_mu.lock();
  g_buffer_mu.lock();
}

void UnlockAnnotationsAfterFork() {
  g_buffer_mu.unlock();
  g_stage_mu.unlock();
}

void ResetBufferStats() {
  for (int i = 0; i < BufferCount(); ++i) {
    g_buffers[i].snapshots.store(0);
    g_buffers[i].occupancy_ppm_sum.store(0);
    g_buffers[i].empty_snapshots.store(0);
    g_buffers[i].full_snapshots.store(0);
  }
}

}  // namespace dlprof
