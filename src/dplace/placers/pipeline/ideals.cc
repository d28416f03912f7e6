#include "dplace/placers/pipeline/ideals.h"

#include <algorithm>

#include "dplace/core/error.h"
#include "dplace/core/rng.h"

namespace dplace {

namespace {

// Depth-first enumeration in discovery order (see the header).
class Enumerator {
 public:
  // count_only: count the ideals (up to max_ideals) without storing them.
  Enumerator(const UnitDag& dag, size_t max_ideals, const std::vector<uint64_t>& keys,
             const std::vector<double>& unit_weight, bool count_only = false)
      : dag_(dag),
        max_ideals_(max_ideals),
        count_only_(count_only),
        keys_(keys),
        unit_weight_(unit_weight),
        words_((dag.num_units + 63) / 64) {
    cur_.assign(words_, 0);
    cands_.resize(dag.num_units + 1);
    outside_.resize(dag.num_units + 1);
    offsets_.push_back(0);
  }

  // Returns false on overflow.
  bool run() {
    for (uint32_t u = 0; u < dag_.num_units; ++u) {
      if (dag_.pred[u].empty()) cands_[0].push_back(u);
    }
    outside_[0] = cands_[0];
    record(0, outside_[0]);
    enumerate();
    return !overflow_;
  }

  std::vector<uint64_t> bits_;
  std::vector<uint64_t> hashes_;
  std::vector<uint32_t> cardinality_;
  std::vector<double> weights_;
  std::vector<uint64_t> offsets_;
  std::vector<uint32_t> addable_;

 private:
  bool in_cur(uint32_t u) const { return (cur_[u >> 6] >> (u & 63)) & 1; }

  void record(uint32_t size, const std::vector<uint32_t>& outside) {
    if (count_ >= max_ideals_) {
      overflow_ = true;
      return;
    }
    ++count_;
    if (count_only_) return;
    bits_.insert(bits_.end(), cur_.begin(), cur_.end());
    hashes_.push_back(hash_);
    cardinality_.push_back(size);
    if (!unit_weight_.empty()) weights_.push_back(weight_);
    addable_.insert(addable_.end(), outside.begin(), outside.end());
    offsets_.push_back(addable_.size());
  }

  // Depth-first over the candidates, with the frames on the heap: the depth reaches the largest
  // ideal's size, and the recursive version overflowed a 1 MiB stack on gnmt8 (5,900 frames; a
  // graph of 100,000 units would need more than the default 8 MiB).
  void enumerate() {
    // At depth d: cands_[d] holds the addable units not yet branched on, outside_[d] all addable
    // units; frames[d] is the candidate being branched on and what it changed.
    struct Frame {
      size_t next = 0;          // index in cands_[d] of the next candidate
      bool branched = false;    // a candidate is in cur_, to be taken out on return
      uint32_t unit = 0;        // that candidate
      double saved_weight = 0;  // weight_ before it
    };
    std::vector<Frame> frames(1);
    while (!frames.empty()) {
      const uint32_t depth = static_cast<uint32_t>(frames.size() - 1);
      Frame& f = frames.back();
      if (f.branched) {  // back from depth + 1
        cur_[f.unit >> 6] &= ~(uint64_t{1} << (f.unit & 63));
        hash_ ^= keys_[f.unit];
        weight_ = f.saved_weight;
        f.branched = false;
      }
      if (f.next >= cands_[depth].size() || overflow_) {
        frames.pop_back();
        continue;
      }
      const size_t i = f.next++;
      const uint32_t v = cands_[depth][i];
      cur_[v >> 6] |= uint64_t{1} << (v & 63);
      hash_ ^= keys_[v];
      f.saved_weight = weight_;
      f.unit = v;
      f.branched = true;
      if (!unit_weight_.empty()) weight_ += unit_weight_[v];
      std::vector<uint32_t>& next_cands = cands_[depth + 1];
      std::vector<uint32_t>& next_outside = outside_[depth + 1];
      next_cands.assign(cands_[depth].begin() + static_cast<ptrdiff_t>(i) + 1, cands_[depth].end());
      next_outside.clear();
      for (uint32_t w : outside_[depth]) {
        if (w != v) next_outside.push_back(w);
      }
      for (uint32_t w : dag_.succ[v]) {
        bool ready = true;
        for (uint32_t p : dag_.pred[w]) {
          if (!in_cur(p)) {
            ready = false;
            break;
          }
        }
        if (ready) {
          next_cands.push_back(w);
          next_outside.push_back(w);
        }
      }
      record(depth + 1, next_outside);
      frames.emplace_back();  // may move the frames: f is not used after this
    }
  }

  const UnitDag& dag_;
  size_t max_ideals_;
  bool count_only_;
  size_t count_ = 0;
  const std::vector<uint64_t>& keys_;
  const std::vector<double>& unit_weight_;
  size_t words_;
  std::vector<uint64_t> cur_;
  uint64_t hash_ = 0;
  double weight_ = 0;
  bool overflow_ = false;
  std::vector<std::vector<uint32_t>> cands_;
  std::vector<std::vector<uint32_t>> outside_;
};

}  // namespace

size_t IdealLattice::bytes_per_ideal(size_t num_units) {
  const size_t words = (num_units + 63) / 64;
  // bitset + hash + cardinality + offset + ~2 table slots, during and after the sort.
  return 2 * (8 * words + 8 + 4 + 8) + 2 * 4;
}

std::optional<IdealLattice> IdealLattice::build(const UnitDag& dag, size_t max_ideals,
                                                const std::vector<double>& unit_weight) {
  DPLACE_CHECK(unit_weight.empty() || unit_weight.size() == dag.num_units) << "one weight per unit";
  const size_t m = dag.num_units;
  uint64_t seed = 0x5EEDBA5E0F1DEA15ULL;
  // Count first, storing nothing: on a DAG with far too many ideals (an unrolled recurrent
  // network) storing them up to the limit took most of the time and about 1.6 GB.
  {
    const std::vector<uint64_t> no_keys(m, 0);
    if (!Enumerator(dag, max_ideals, no_keys, {}, /*count_only=*/true).run()) return std::nullopt;
  }
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<uint64_t> keys(m);
    for (uint64_t& k : keys) k = splitmix64(seed);
    Enumerator e(dag, max_ideals, keys, unit_weight);
    if (!e.run()) return std::nullopt;

    // Renumber by cardinality (stable): every proper subset gets a smaller id.
    const size_t n = e.hashes_.size();
    std::vector<uint32_t> bucket_start(m + 2, 0);
    for (uint32_t c : e.cardinality_) ++bucket_start[c + 1];
    for (size_t c = 1; c < bucket_start.size(); ++c) bucket_start[c] += bucket_start[c - 1];
    std::vector<uint32_t> order(n);
    for (uint32_t old = 0; old < n; ++old) order[bucket_start[e.cardinality_[old]]++] = old;

    IdealLattice lat;
    lat.num_units_ = m;
    lat.words_ = (m + 63) / 64;
    lat.keys_ = keys;
    lat.bits_.resize(n * lat.words_);
    lat.hashes_.resize(n);
    lat.cardinality_.resize(n);
    if (!unit_weight.empty()) lat.weights_.resize(n);
    lat.addable_offsets_.resize(n + 1);
    lat.addable_.reserve(e.addable_.size());
    lat.addable_offsets_[0] = 0;
    for (size_t id = 0; id < n; ++id) {
      const uint32_t old = order[id];
      std::copy_n(e.bits_.begin() + static_cast<ptrdiff_t>(old * lat.words_), lat.words_,
                  lat.bits_.begin() + static_cast<ptrdiff_t>(id * lat.words_));
      lat.hashes_[id] = e.hashes_[old];
      lat.cardinality_[id] = e.cardinality_[old];
      if (!unit_weight.empty()) lat.weights_[id] = e.weights_[old];
      lat.addable_.insert(lat.addable_.end(),
                          e.addable_.begin() + static_cast<ptrdiff_t>(e.offsets_[old]),
                          e.addable_.begin() + static_cast<ptrdiff_t>(e.offsets_[old + 1]));
      lat.addable_offsets_[id + 1] = lat.addable_.size();
    }
    DPLACE_CHECK(lat.cardinality_.front() == 0 && lat.cardinality_.back() == m)
        << "ideal enumeration lost the empty or the full set";

    size_t table_size = 16;
    while (table_size < 2 * n) table_size *= 2;
    lat.table_.assign(table_size, kNone);
    lat.mask_ = table_size - 1;
    bool collision = false;
    for (uint32_t id = 0; id < n && !collision; ++id) {
      size_t slot = static_cast<size_t>(lat.hashes_[id] >> 17) & lat.mask_;
      while (lat.table_[slot] != kNone) {
        if (lat.hashes_[lat.table_[slot]] == lat.hashes_[id]) {
          collision = true;
          break;
        }
        slot = (slot + 1) & lat.mask_;
      }
      lat.table_[slot] = id;
    }
    if (!collision) return lat;
  }
  DPLACE_CHECK(false) << "64-bit hash collisions between ideals on four seeds";
  return std::nullopt;
}

}  // namespace dplace
