#include "core/thread_registry.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/stack_switch.h"

namespace dlprof {

__thread ThreadSlot* t_slot __attribute__((tls_model("initial-exec"))) = nullptr;
__thread pid_t t_tid __attribute__((tls_model("initial-exec"))) = 0;

namespace {

ThreadSlot g_slots[kMaxThreads];
// One past the highest slot ever claimed. Slots are claimed lowest first, so
// loops over the table stop here instead of touching all kMaxThreads slots
// (a cache miss each: the collector's tick was mostly that).
std::atomic<int> g_slot_limit{0};

uint64_t* MapWords(size_t words) {
  void* p = mmap(nullptr, words * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<uint64_t*>(p);
}

// Ring memory per slot, kept across reuse so a late signal can never write
// into freed memory.
uint64_t* g_sample_mem[kMaxThreads];
uint64_t* g_event_mem[kMaxThreads];
uintptr_t g_unwind_stack[kMaxThreads];

}  // namespace

ThreadSlot* SlotAt(int i) { return &g_slots[i]; }

int SlotLimit() { return g_slot_limit.load(std::memory_order_acquire); }

void ResetSlot(ThreadSlot* s) {
  s->samples.Reset();
  s->events.Reset();
  s->depth.store(0, std::memory_order_relaxed);
  s->in_handler.store(0, std::memory_order_relaxed);
  s->sigprof_blocked.store(false, std::memory_order_relaxed);
  s->tsc_off.store(false, std::memory_order_relaxed);
  s->last_sample_cpu_ns.store(0, std::memory_order_relaxed);
  s->stage_events.store(false, std::memory_order_relaxed);
  s->py_tstate.store(0, std::memory_order_relaxed);
  s->samples_taken.store(0, std::memory_order_relaxed);
  s->dropped_ring.store(0, std::memory_order_relaxed);
  s->dropped_busy.store(0, std::memory_order_relaxed);
  s->handler_ns.store(0, std::memory_order_relaxed);
  s->events_dropped.store(0, std::memory_order_relaxed);
  s->file_index = -1;
  s->last_cpu_ns = -1;
  s->last_wall_ns = 0;
  s->last_run_delay_ns = -1;
  s->run_delay_stale = false;
  s->run_ticks = 0;
  s->run_wall_ns = s->run_cpu_ns = s->run_wait_ns = 0;
  s->run_stack = 0;
  s->blocked_state = 0;
  s->blocked_stack = 0;
  s->blocked_rewalk = false;
}

ThreadSlot* ClaimSlot(pid_t tid, const StackHint* hint) {
  for (int i = 0; i < kMaxThreads; ++i) {
    int expected = kSlotFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kSlotClaimed)) continue;
    ThreadSlot* s = &g_slots[i];
    // Raised before the slot is published, so a live slot is always below it.
    int limit = g_slot_limit.load(std::memory_order_relaxed);
    while (limit < i + 1 &&
           !g_slot_limit.compare_exchange_weak(limit, i + 1, std::memory_order_release)) {
    }
    if (g_sample_mem[i] == nullptr) g_sample_mem[i] = MapWords(kSampleRingWords);
    if (g_event_mem[i] == nullptr) g_event_mem[i] = MapWords(kEventRingWords);
    if (g_unwind_stack[i] == 0 && StackSwitchSupported()) {
      g_unwind_stack[i] = MapStack(kUnwindStackBytes);
    }
    s->unwind_stack = g_unwind_stack[i];
    s->samples.Init(g_sample_mem[i], g_sample_mem[i] ? kSampleRingWords : 0);
    s->events.Init(g_event_mem[i], g_event_mem[i] ? kEventRingWords : 0);
    ResetSlot(s);
    s->tid.store(tid, std::memory_order_relaxed);
    s->bounds = tid == CurrentTid() ? CurrentStackBounds(hint) : StackBounds{};
    s->timer = ThreadTimer{};
    return s;
  }
  return nullptr;
}

void PublishSlot(ThreadSlot* s) { s->state.store(kSlotLive, std::memory_order_release); }

ThreadSlot* FindSlot(pid_t tid) {
  const int limit = SlotLimit();
  for (int i = 0; i < limit; ++i) {
    ThreadSlot* s = &g_slots[i];
    if (s->state.load(std::memory_order_acquire) == kSlotLive &&
        s->tid.load(std::memory_order_relaxed) == tid) {
      return s;
    }
  }
  return nullptr;
}

}  // namespace dlprof
