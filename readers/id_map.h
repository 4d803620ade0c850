// Maps the ids a file defines (threads, stages, stage paths, stacks) to
// values, for readers that look one up per record.
#ifndef DLPROF_READERS_ID_MAP_H_
#define DLPROF_READERS_ID_MAP_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dlprof {

// Writers number their definitions 1, 2, 3..., so a vector indexed by id
// answers a lookup with no hashing. An id far beyond the ones defined so far
// (a damaged or hostile file) goes to a hash map instead: the vector never
// grows past twice the number of definitions (plus a little), so memory stays
// proportional to what the file holds.
template <typename V>
class IdMap {
 public:
  // The value of `id`, or nullptr when it was never set.
  const V* Find(uint32_t id) const {
    if (id < present_.size() && present_[id]) return &dense_[id];
    if (sparse_.empty()) return nullptr;
    auto it = sparse_.find(id);
    return it != sparse_.end() ? &it->second : nullptr;
  }

  // Sets (or replaces) the value of `id`.
  void Set(uint32_t id, V value) {
    ++defined_;
    if (id >= dense_.size() && id < 2 * defined_ + 1024) {
      dense_.resize(id + size_t{1});  // grows its capacity geometrically
      present_.resize(dense_.size(), 0);
    }
    if (id < dense_.size()) {
      dense_[id] = std::move(value);
      present_[id] = 1;
      if (!sparse_.empty()) sparse_.erase(id);
    } else {
      sparse_[id] = std::move(value);
    }
  }

 private:
  std::vector<V> dense_;
  std::vector<uint8_t> present_;
  std::unordered_map<uint32_t, V> sparse_;
  size_t defined_ = 0;
};

}  // namespace dlprof

#endif  // DLPROF_READERS_ID_MAP_H_
