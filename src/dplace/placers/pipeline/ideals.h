// The ideals (downsets) of a unit DAG: every set of units closed under predecessors.
//
// Enumeration never looks at non-ideals: a depth-first search extends the current ideal by one
// of its addable units (minimal units of the complement) at a time, and excludes the addable units
// it has already branched on, so every ideal is produced exactly once with no deduplication. The
// cost is O(1) amortised per ideal plus the in-degree checks of the added unit's successors.
//
// Ideals are stored as bitsets, numbered by size (id 0 is the empty set, the last id the full
// set; a proper subset always has a smaller id), with a 64-bit Zobrist hash each (XOR of random
// per-unit keys, so the hash of I + S is hash(I) ^ hash(S)) and a hash -> id table. The builder
// checks that no two ideals share a hash, so find() is exact for every ideal.
//
// Thread safety: immutable after build; safe to share.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dplace/placers/pipeline/units.h"

namespace dplace {

class IdealLattice {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // Enumerates the ideals of `dag`. nullopt when there are more than max_ideals. `unit_weight`
  // (empty, or one number per unit) gives weight(id), the sum over the ideal's units.
  static std::optional<IdealLattice> build(const UnitDag& dag, size_t max_ideals,
                                           const std::vector<double>& unit_weight = {});
  // Bytes of memory per ideal for a DAG of `num_units` units (bitset, hash, index, bookkeeping),
  // excluding the minimal-outside lists; for sizing max_ideals from a memory budget.
  static size_t bytes_per_ideal(size_t num_units);

  size_t size() const { return hashes_.size(); }
  size_t num_units() const { return num_units_; }
  size_t words() const { return words_; }
  uint32_t full_id() const { return static_cast<uint32_t>(size() - 1); }

  const uint64_t* bits(uint32_t id) const { return &bits_[static_cast<size_t>(id) * words_]; }
  bool contains(uint32_t id, uint32_t unit) const {
    return (bits(id)[unit >> 6] >> (unit & 63)) & 1;
  }
  uint32_t cardinality(uint32_t id) const { return cardinality_[id]; }
  // Sum of unit_weight over the ideal (0 when built without weights).
  double weight(uint32_t id) const { return weights_.empty() ? 0.0 : weights_[id]; }
  uint64_t hash(uint32_t id) const { return hashes_[id]; }
  uint64_t unit_key(uint32_t unit) const { return keys_[unit]; }
  // The id of the ideal with this hash, or kNone.
  uint32_t find(uint64_t hash) const {
    size_t slot = static_cast<size_t>(hash >> 17) & mask_;
    while (true) {
      const uint32_t id = table_[slot];
      if (id == kNone) return kNone;
      if (hashes_[id] == hash) return id;
      slot = (slot + 1) & mask_;
    }
  }
  // The minimal units outside the ideal (the units that can be added to it), ascending by DFS
  // discovery.
  std::span<const uint32_t> addable(uint32_t id) const {
    return {addable_.data() + addable_offsets_[id],
            static_cast<size_t>(addable_offsets_[id + 1] - addable_offsets_[id])};
  }
  size_t total_addable() const { return addable_.size(); }

 private:
  size_t num_units_ = 0;
  size_t words_ = 0;
  std::vector<uint64_t> bits_;
  std::vector<uint64_t> hashes_;
  std::vector<uint32_t> cardinality_;
  std::vector<double> weights_;
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> table_;
  size_t mask_ = 0;
  std::vector<uint64_t> addable_offsets_;
  std::vector<uint32_t> addable_;
};

}  // namespace dplace
