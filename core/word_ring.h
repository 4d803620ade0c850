// A single-producer single-consumer ring of 64-bit words, used for a thread's
// samples (producer: the signal handler on that thread) and its annotation
// events (producer: the thread itself). The consumer is the collector thread.
#ifndef DLPROF_CORE_WORD_RING_H_
#define DLPROF_CORE_WORD_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dlprof {

class WordRing {
 public:
  // `words` must be a power of two; memory is owned by the caller and must be
  // allocated before the first TryWrite (never inside a signal handler).
  void Init(uint64_t* memory, size_t words) {
    data_ = memory;
    mask_ = words - 1;
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
  }
  bool ready() const { return data_ != nullptr; }
  // Where the words are, and how many bytes (a reader in another process
  // checks that they are mapped there: core/shared_arena.h ArenaReadable).
  const uint64_t* data() const { return data_; }
  size_t bytes() const { return (mask_ + 1) * sizeof(uint64_t); }

  // Producer: reserves n words and returns the start position, or UINT64_MAX if
  // the ring lacks room (the caller counts a drop; it never waits).
  // This function is safe to call from asynchronous signals (not re-entrant).
  uint64_t Reserve(size_t n) const {
    if (data_ == nullptr) return UINT64_MAX;
    uint64_t head = head_.load(std::memory_order_relaxed);
    uint64_t tail = tail_.load(std::memory_order_acquire);
    if (head - tail + n > mask_ + 1) return UINT64_MAX;
    return head;
  }
  // Producer: writes word i of a reservation. Signal-safe.
  void Put(uint64_t pos, uint64_t word) { data_[pos & mask_] = word; }
  // Producer: makes a reservation of n words visible to the consumer. Signal-safe.
  void Commit(uint64_t pos, size_t n) { head_.store(pos + n, std::memory_order_release); }

  // Consumer side.
  uint64_t ReadableEnd() const { return head_.load(std::memory_order_acquire); }
  uint64_t ReadPos() const { return tail_.load(std::memory_order_relaxed); }
  uint64_t Get(uint64_t pos) const { return data_[pos & mask_]; }
  void Release(uint64_t pos) { tail_.store(pos, std::memory_order_release); }

  // Drops everything (single-threaded moments only: after fork in the child).
  void Reset() {
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
  }

 private:
  uint64_t* data_ = nullptr;
  uint64_t mask_ = 0;
  std::atomic<uint64_t> head_{0};
  std::atomic<uint64_t> tail_{0};
};

}  // namespace dlprof

#endif  // DLPROF_CORE_WORD_RING_H_
