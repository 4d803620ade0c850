#include "core/python_codes_seen.h"

#include <atomic>

#include "core/python_frames.h"
#include "core/shared_arena.h"

namespace dlprof {
namespace {

constexpr int kBits = 1 << 14;  // 2 KiB: ~16k code objects before bits are shared
constexpr int64_t kMinWakeIntervalNs = 1000000;
struct Words {
  std::atomic<uint64_t> seen[kBits / 64];
  std::atomic<int64_t> last_wake_ns;
};
// Our own until the session moves them into the shared arena
// (MoveCodesSeenToArena).
Words g_own{};
std::atomic<Words*> g_words{&g_own};

Words* W() { return g_words.load(std::memory_order_acquire); }

uint32_t BitOf(uintptr_t code, uint64_t identity) {
  // Objects are 16-byte aligned: the low bits say nothing.
  const uint64_t h = ((code >> 4) ^ identity) * 0x9e3779b97f4a7c15ull;
  return static_cast<uint32_t>(h >> (64 - 14));
}

bool SeenIn(const Words& words, uintptr_t code, uint64_t identity) {
  const uint32_t bit = BitOf(code, identity);
  return (words.seen[bit / 64].load(std::memory_order_relaxed) >> (bit % 64) & 1) != 0;
}

}  // namespace

bool PyCodeSeen(uintptr_t code, uint64_t identity) { return SeenIn(*W(), code, identity); }

bool HasUnseenPyCode(const uint64_t* frames, int n) {
  const Words& words = *W();  // one load of where they are, not one a frame
  for (int f = 0; f < n; ++f) {
    const uint64_t* frame = frames + kPyFrameWords * f;
    if (!SeenIn(words, static_cast<uintptr_t>(frame[0] & ~kPyEntryBit), frame[2])) return true;
  }
  return false;
}

void MarkPyCodeSeen(uintptr_t code, uint64_t identity) {
  const uint32_t bit = BitOf(code, identity);
  std::atomic<uint64_t>& word = W()->seen[bit / 64];
  const uint64_t mask = 1ull << (bit % 64);
  if ((word.load(std::memory_order_relaxed) & mask) == 0) word.fetch_or(mask, std::memory_order_relaxed);
}

void DisablePyCodeWakes() {
  for (auto& word : W()->seen) word.store(~0ull, std::memory_order_relaxed);
}

bool TakePyCodeWake(int64_t now_ns) {
  std::atomic<int64_t>& last_wake_ns = W()->last_wake_ns;
  int64_t last = last_wake_ns.load(std::memory_order_relaxed);
  if (now_ns - last < kMinWakeIntervalNs) return false;
  return last_wake_ns.compare_exchange_strong(last, now_ns, std::memory_order_relaxed);
}

void MoveCodesSeenToArena() {
  Words* words = static_cast<Words*>(ArenaMap(sizeof(Words), AtFork::kCopy));
  if (words == nullptr) return;
  const Words* own = W();
  for (int i = 0; i < kBits / 64; ++i) {
    words->seen[i].store(own->seen[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  words->last_wake_ns.store(own->last_wake_ns.load(std::memory_order_relaxed));
  g_words.store(words, std::memory_order_release);
  ArenaSetRoot(ArenaRoot::kCodesSeen, words);
}

}  // namespace dlprof

namespace dlprof {

bool UseCodesSeenAt(void* arena_words) {
  if (arena_words == nullptr) return false;
  g_words.store(static_cast<Words*>(arena_words), std::memory_order_release);
  return true;
}

}  // namespace dlprof
