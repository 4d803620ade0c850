// The C API (include/dlprof/dlprof.h) over the session, the thread slots and
// the annotation tables. Each call is a predictable branch when not sampling.
#include <dlprof/dlprof.h>
#include <dlprof/format.h>

#include <cstring>
#include <string>

#include "backends/timer_source.h"
#include "backends/unwinder.h"
#include "core/annotations.h"
#include "core/session.h"
#include "core/shared_arena.h"
#include "core/thread_registry.h"

namespace {

inline dlprof::ThreadSlot* Slot() {
  dlprof::ThreadSlot* s = dlprof::t_slot;
  // (Not in a child of a fork that ran no atfork handler: the slot is its
  // parent's memory, core/shared_arena.h.)
  if (__builtin_expect(s != nullptr, 1)) return dlprof::ArenaOwned() ? s : nullptr;
  if (!dlprof::SessionRecording()) return nullptr;
  return dlprof::AdoptCurrentThread();
}

}  // namespace

extern "C" {

int dlprof_enabled(void) { return dlprof::SessionRecording(); }

uint32_t dlprof_stage_intern(const char* name) {
  if (!dlprof::SessionRecording()) return 0;
  return dlprof::InternStage(name);
}

void dlprof_stage_enter(uint32_t stage_id) {
  dlprof::ThreadSlot* s = Slot();
  if (s == nullptr) return;
  uint32_t d = s->depth.load(std::memory_order_relaxed);
  if (d < static_cast<uint32_t>(dlprof::kMaxStageDepth)) {
    s->stages[d].store(stage_id, std::memory_order_relaxed);
  }
  // The id must be in place before the depth says so, for this thread's handler.
  std::atomic_signal_fence(std::memory_order_release);
  s->depth.store(d + 1, std::memory_order_relaxed);
  // Stage 0 ("no stage": off, or the table was full) only keeps the nesting.
  if (stage_id != 0 &&
      (dlprof::g_session_detailed || s->stage_events.load(std::memory_order_relaxed))) {
    dlprof::PushEvent(s, DLPROF_EVENT_STAGE_ENTER, stage_id);
  }
}

void dlprof_stage_exit(void) {
  dlprof::ThreadSlot* s = Slot();
  if (s == nullptr) return;
  uint32_t d = s->depth.load(std::memory_order_relaxed);
  if (d == 0) return;  // unbalanced exit: ignore rather than underflow
  s->depth.store(d - 1, std::memory_order_relaxed);
  s->stage_exits.store(s->stage_exits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (dlprof::g_session_detailed || s->stage_events.load(std::memory_order_relaxed)) {
    uint32_t id = d <= static_cast<uint32_t>(dlprof::kMaxStageDepth)
                      ? s->stages[d - 1].load(std::memory_order_relaxed)
                      : 0;
    if (id != 0) dlprof::PushEvent(s, DLPROF_EVENT_STAGE_EXIT, id);
  }
}

dlprof_buffer* dlprof_buffer_create(const char* name, uint64_t capacity) {
  if (!dlprof::SessionRecording()) return nullptr;
  return dlprof::CreateBuffer(name, capacity);
}

void dlprof_buffer_set_size(dlprof_buffer* b, uint64_t size) {
  // (In a child of a fork that ran no atfork handler the buffer is still
  // its parent's memory, core/shared_arena.h.)
  if (b == nullptr || !dlprof::ArenaOwned()) return;
  b->size.store(size, std::memory_order_relaxed);
  if (!dlprof::BufferLive(b)) b->inherited.store(false, std::memory_order_relaxed);
}

int dlprof_buffer_stats_get(const dlprof_buffer* b, dlprof_buffer_stats* out) {
  if (out == nullptr) return -1;
  memset(out, 0, sizeof(*out));
  if (b == nullptr) return -1;
  out->capacity = b->capacity;
  uint64_t n = b->snapshots.load(std::memory_order_relaxed);
  out->snapshots = n;
  if (n == 0) return -1;
  out->mean_occupancy = b->occupancy_ppm_sum.load(std::memory_order_relaxed) / 1e6 / n;
  out->empty_fraction = static_cast<double>(b->empty_snapshots.load(std::memory_order_relaxed)) / n;
  out->full_fraction = static_cast<double>(b->full_snapshots.load(std::memory_order_relaxed)) / n;
  return 0;
}

void dlprof_step_begin(void) {
  if (dlprof::ThreadSlot* s = Slot()) dlprof::PushEvent(s, DLPROF_EVENT_STEP_BEGIN, 0);
}

void dlprof_step_end(void) {
  if (dlprof::ThreadSlot* s = Slot()) {
    dlprof::PushEvent(s, DLPROF_EVENT_STEP_END, 0);
    dlprof::OnStepEnd();
  }
}

void dlprof_wait_begin(void) {
  if (dlprof::ThreadSlot* s = Slot()) dlprof::PushEvent(s, DLPROF_EVENT_WAIT_BEGIN, 0);
}

void dlprof_wait_end(void) {
  if (dlprof::ThreadSlot* s = Slot()) dlprof::PushEvent(s, DLPROF_EVENT_WAIT_END, 0);
}

void dlprof_set_worker(int worker_id) { dlprof::SetWorker(worker_id); }

int dlprof_flush(int timeout_ms) { return dlprof::RequestFlush(timeout_ms) ? 0 : -1; }

size_t dlprof_backends_describe(char* buf, size_t len) {
  std::string text;
  auto add = [&](const std::vector<dlprof::BackendInfo>& list) {
    for (const auto& b : list) {
      text += b.kind + " " + b.name + " " + (b.available ? "yes" : "no") + " " + b.note + "\n";
    }
  };
  add(dlprof::ListUnwinders());
  add(dlprof::ListTimerSources());
  if (len > 0) {
    size_t n = text.size() < len - 1 ? text.size() : len - 1;
    memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size();
}

}  // extern "C"
