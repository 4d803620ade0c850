#include "core/thread_registry.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/shared_arena.h"
#include "core/stack_switch.h"

namespace dlprof {

__thread ThreadSlot* t_slot __attribute__((tls_model("initial-exec"))) = nullptr;
__thread pid_t t_tid __attribute__((tls_model("initial-exec"))) = 0;

namespace {

// The slots live in the shared arena (core/shared_arena.h), where a
// collector process can map them; zeroed memory is a free slot (kSlotFree
// is 0, and a claim sets every other field). Made at the first claim.
struct SlotTable {
  // One past the highest slot ever claimed. Slots are claimed lowest first,
  // so loops over the table stop here instead of touching all kMaxThreads
  // slots (a cache miss each: the collector's tick was mostly that).
  std::atomic<int> limit;
  ThreadSlot slots[kMaxThreads];
};
static_assert(kSlotFree == 0, "zeroed arena memory is a table of free slots");

std::atomic<SlotTable*> g_table{nullptr};
pthread_mutex_t g_table_mu = PTHREAD_MUTEX_INITIALIZER;

SlotTable* Table() { return g_table.load(std::memory_order_acquire); }

SlotTable* MakeTable() {
  if (SlotTable* t = Table()) return t;
  pthread_mutex_lock(&g_table_mu);
  SlotTable* t = Table();
  if (t == nullptr) {
    t = static_cast<SlotTable*>(ArenaMap(sizeof(SlotTable), AtFork::kCopy));
    if (t != nullptr) {
      g_table.store(t, std::memory_order_release);
      ArenaSetRoot(ArenaRoot::kSlots, t);
    }
  }
  pthread_mutex_unlock(&g_table_mu);
  return t;
}

// Ring memory per slot (samples, then events, in one arena extent), kept
// across reuse so a late signal can never write into freed memory. Only
// the collector and claims read these: no fork child needs the parent's.
uint64_t* g_ring_mem[kMaxThreads];
uintptr_t g_unwind_stack[kMaxThreads];

}  // namespace

void UseSlotTableAt(void* table) {
  g_table.store(static_cast<SlotTable*>(table), std::memory_order_release);
}

ThreadSlot* SlotAt(int i) { return &Table()->slots[i]; }

int SlotLimit() {
  const SlotTable* t = Table();
  return t == nullptr ? 0 : t->limit.load(std::memory_order_acquire);
}

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
  s->born_ns.store(-1, std::memory_order_relaxed);
  s->born_cpu_ns.store(-1, std::memory_order_relaxed);
  s->exit_ns.store(-1, std::memory_order_relaxed);
  s->exit_cpu_ns.store(-1, std::memory_order_relaxed);
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
  // A child of a fork that ran no atfork handler: the table is its parent's.
  if (!ArenaOwned()) return nullptr;
  SlotTable* table = MakeTable();
  if (table == nullptr) return nullptr;
  for (int i = 0; i < kMaxThreads; ++i) {
    int expected = kSlotFree;
    if (!table->slots[i].state.compare_exchange_strong(expected, kSlotClaimed)) continue;
    ThreadSlot* s = &table->slots[i];
    // Raised before the slot is published, so a live slot is always below it.
    int limit = table->limit.load(std::memory_order_relaxed);
    while (limit < i + 1 &&
           !table->limit.compare_exchange_weak(limit, i + 1, std::memory_order_release)) {
    }
    if (g_ring_mem[i] == nullptr) {
      g_ring_mem[i] = static_cast<uint64_t*>(
          ArenaMap((kSampleRingWords + kEventRingWords) * sizeof(uint64_t), AtFork::kZero));
    }
    if (g_unwind_stack[i] == 0 && StackSwitchSupported()) {
      g_unwind_stack[i] = MapStack(kUnwindStackBytes);
    }
    s->unwind_stack = g_unwind_stack[i];
    uint64_t* rings = g_ring_mem[i];
    s->samples.Init(rings, rings ? kSampleRingWords : 0);
    s->events.Init(rings ? rings + kSampleRingWords : nullptr, rings ? kEventRingWords : 0);
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
  SlotTable* table = Table();
  if (table == nullptr) return nullptr;
  const int limit = table->limit.load(std::memory_order_acquire);
  for (int i = 0; i < limit; ++i) {
    ThreadSlot* s = &table->slots[i];
    if (s->state.load(std::memory_order_acquire) == kSlotLive &&
        s->tid.load(std::memory_order_relaxed) == tid) {
      return s;
    }
  }
  return nullptr;
}

}  // namespace dlprof
