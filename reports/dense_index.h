// Numbers distinct keys 0, 1, 2... in the order they are first seen.
#ifndef DLPROF_REPORTS_DENSE_INDEX_H_
#define DLPROF_REPORTS_DENSE_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlprof {

// The finalizer of MurmurHash3: every input bit moves every output bit, so
// keys that differ only in high bits (ids packed into one word) still spread
// over a power-of-two table.
inline uint64_t MixBits(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

struct U64Hash {
  uint64_t operator()(uint64_t k) const { return MixBits(k); }
};

// An insert-only hash index for the writers' per-sample sums: millions of
// lookups into tens of thousands of keys. std::unordered_map allocates a node
// per key and chases a pointer per lookup; this is one open-addressing array
// of 32-bit slots (linear probing, at most half full) beside the keys. The
// caller keeps its values in a vector indexed by the number Intern returns.
template <typename Key, typename Hash>
class DenseIndex {
 public:
  // The number of `key`; a key not seen before gets the next number, and
  // *added (when given) says which happened.
  uint32_t Intern(const Key& key, bool* added = nullptr) {
    if (2 * (keys_.size() + 1) > slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = Hash()(key) & mask;; i = (i + 1) & mask) {
      const uint32_t slot = slots_[i];
      if (slot == 0) {
        keys_.push_back(key);
        slots_[i] = static_cast<uint32_t>(keys_.size());
        if (added != nullptr) *added = true;
        return slot_to_index(slots_[i]);
      }
      if (keys_[slot_to_index(slot)] == key) {
        if (added != nullptr) *added = false;
        return slot_to_index(slot);
      }
    }
  }

  size_t size() const { return keys_.size(); }
  // The keys, by number.
  const std::vector<Key>& keys() const { return keys_; }

 private:
  static uint32_t slot_to_index(uint32_t slot) { return slot - 1; }  // 0 is a free slot

  void Grow() {
    // Small at first: the pprof writer keeps one index per thread, and
    // 1,024 slots (4 KiB) each made 40k one-sample threads cost 160 MiB.
    slots_.assign(slots_.empty() ? 16 : 2 * slots_.size(), 0);
    const size_t mask = slots_.size() - 1;
    for (size_t k = 0; k < keys_.size(); ++k) {
      size_t i = Hash()(keys_[k]) & mask;
      while (slots_[i] != 0) i = (i + 1) & mask;
      slots_[i] = static_cast<uint32_t>(k + 1);
    }
  }

  std::vector<Key> keys_;
  std::vector<uint32_t> slots_;  // 1 + a key's number, 0 = free; size a power of two
};

}  // namespace dlprof

#endif  // DLPROF_REPORTS_DENSE_INDEX_H_
