// Deterministic randomness: every shuffle, crop and image derives from the
// seed and a position, never from who computes it (main or which worker).
#ifndef DLPROF_EXAMPLES_PIPELINE_RANDOM_H_
#define DLPROF_EXAMPLES_PIPELINE_RANDOM_H_

#include <cstdint>

namespace dlprof_example {

// splitmix64's finaliser: a well-mixed 64-bit hash of x.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  double Uniform() { return (Mix(state_++) >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

 private:
  uint64_t state_;
};

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_RANDOM_H_
