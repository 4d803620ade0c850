#include "core/python_exec_notes.h"

#include <atomic>
#include <cstring>

#include "core/shared_arena.h"

namespace dlprof {
namespace {

// 1024 slots of 512 bytes: 512 KiB of address space, touched as notes come.
// `import torch` notes ~1,300 modules and class bodies in ~1 s and the
// collector takes them every tick (and at once when half full).
constexpr uint64_t kSlots = 1024;

struct Slot {
  std::atomic<uint64_t> ready;  // the slot's position + 1 once written
  uint64_t code;
  uint64_t identity;
  int64_t time_ns;
  int32_t first_line;
  uint16_t qualname_bytes;
  uint16_t filename_bytes;
  char text[kExecNoteTextBytes];
};
static_assert(sizeof(Slot) == 512, "a slot is 512 bytes");

struct Ring {
  alignas(64) std::atomic<uint64_t> head;  // next position to claim (writers)
  alignas(64) std::atomic<uint64_t> tail;  // next position to read (the collector)
  std::atomic<uint64_t> written;
  std::atomic<uint64_t> dropped;
  alignas(64) Slot slots[kSlots];
};

std::atomic<Ring*> g_ring{nullptr};

}  // namespace

bool StartExecNotes() {
  if (g_ring.load(std::memory_order_acquire) != nullptr) return true;
  // In the shared arena (core/shared_arena.h), where a collector process can
  // read it; a fork child starts with an empty ring (notes its parent's
  // collector had not taken yet are lost to it: one tick's worth).
  void* p = ArenaMap(sizeof(Ring), AtFork::kZero);
  if (p == nullptr) return false;
  Ring* expected = nullptr;
  // Zeroed pages: every counter 0, no slot ready. (A thread that lost the
  // race leaves its extent unused: arena memory is never unmapped.)
  if (g_ring.compare_exchange_strong(expected, static_cast<Ring*>(p), std::memory_order_acq_rel)) {
    ArenaSetRoot(ArenaRoot::kExecNotes, p);
  }
  return true;
}

bool UseExecNotesAt(void* arena_ring) {
  if (arena_ring == nullptr) return false;
  g_ring.store(static_cast<Ring*>(arena_ring), std::memory_order_release);
  return true;
}

bool PutExecNote(uintptr_t code, uint64_t identity, int64_t time_ns, int first_line,
                 const char* qualname, size_t qualname_bytes, const char* filename,
                 size_t filename_bytes) {
  Ring* r = g_ring.load(std::memory_order_acquire);
  // (Not in a child of a fork that ran no atfork handler: the ring is
  // still its parent's, core/shared_arena.h.)
  if (r == nullptr || !ArenaOwned()) return false;
  if (qualname_bytes + filename_bytes > kExecNoteTextBytes) {
    r->dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  uint64_t pos = r->head.load(std::memory_order_relaxed);
  do {
    // The slot `pos` reuses is free once the reader has passed it.
    if (pos - r->tail.load(std::memory_order_acquire) >= kSlots) {
      r->dropped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  } while (!r->head.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed));
  Slot& s = r->slots[pos % kSlots];
  s.code = code;
  s.identity = identity;
  s.time_ns = time_ns;
  s.first_line = first_line;
  s.qualname_bytes = static_cast<uint16_t>(qualname_bytes);
  s.filename_bytes = static_cast<uint16_t>(filename_bytes);
  std::memcpy(s.text, qualname, qualname_bytes);
  std::memcpy(s.text + qualname_bytes, filename, filename_bytes);
  s.ready.store(pos + 1, std::memory_order_release);
  r->written.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool TakeExecNote(ExecNote* out) {
  Ring* r = g_ring.load(std::memory_order_acquire);
  if (r == nullptr) return false;
  const uint64_t pos = r->tail.load(std::memory_order_relaxed);
  if (pos == r->head.load(std::memory_order_acquire)) return false;
  const Slot& s = r->slots[pos % kSlots];
  if (s.ready.load(std::memory_order_acquire) != pos + 1) return false;  // being written
  out->code = s.code;
  out->identity = s.identity;
  out->time_ns = s.time_ns;
  out->first_line = s.first_line;
  const size_t q = s.qualname_bytes < kExecNoteTextBytes ? s.qualname_bytes : 0;
  const size_t f = q + s.filename_bytes <= kExecNoteTextBytes ? s.filename_bytes : 0;
  out->qualname.assign(s.text, q);
  out->filename.assign(s.text + q, f);
  r->tail.store(pos + 1, std::memory_order_release);  // the slot may be claimed again
  return true;
}

bool ExecNotesFilling() {
  Ring* r = g_ring.load(std::memory_order_acquire);
  return r != nullptr && r->head.load(std::memory_order_relaxed) -
                                 r->tail.load(std::memory_order_relaxed) >= kSlots / 2;
}

uint64_t ExecNotesWritten() {
  Ring* r = g_ring.load(std::memory_order_acquire);
  return r != nullptr ? r->written.load(std::memory_order_relaxed) : 0;
}

uint64_t ExecNotesDropped() {
  Ring* r = g_ring.load(std::memory_order_acquire);
  return r != nullptr ? r->dropped.load(std::memory_order_relaxed) : 0;
}

}  // namespace dlprof
