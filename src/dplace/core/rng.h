// Seeded random numbers. Every randomised algorithm takes an Rng (or a seed) explicitly; nothing
// reads a global or time-based seed, so the same seed gives the same result.
//
// The generator is SplitMix64-seeded xoshiro256**, and the distributions are implemented here
// rather than taken from <random>, whose distributions differ between standard libraries.
//
// Thread safety: an Rng is not thread-safe; give each thread its own (see split()).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dplace {

// One step of SplitMix64: advances `state` and returns a well-mixed 64-bit value. Also used on
// its own where a fixed stream of hash keys is needed.
uint64_t splitmix64(uint64_t& state);

class Rng {
 public:
  explicit Rng(uint64_t seed);

  // Uniform 64-bit value.
  uint64_t next_u64();
  // Uniform in [0, 1).
  double uniform01();
  // Uniform integer in [0, n). REQUIRES: n > 0.
  uint64_t uniform_int(uint64_t n);
  // Standard normal (Box-Muller).
  double normal();
  // A new independent generator derived from this one's next output; deterministic.
  Rng split();

 private:
  uint64_t state_[4];
};

}  // namespace dplace
