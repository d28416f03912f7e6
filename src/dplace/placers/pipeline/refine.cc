#include "dplace/placers/pipeline/refine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <utility>

#include "dplace/core/rng.h"

namespace dplace {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Clock = std::chrono::steady_clock;

// The search state: stages ("slots", one per device) in a sequence, a slot per unit, and per slot
// the sums the paper's load needs for every device type, so that a slot's load under another
// device's type is O(1).
class SplitSearch {
 public:
  SplitSearch(const PipelineProblem& p, const UnitDag& dag, bool contiguous)
      : p_(p),
        dag_(dag),
        contiguous_(contiguous),
        num_slots_(static_cast<size_t>(p.num_devices())),
        num_types_(p.types.size()) {}

  // Loads `device_of_unit`; false when it is not a feasible split (contiguous, in contiguous
  // mode).
  bool load(const std::vector<int>& device_of_unit) {
    const size_t S = num_slots_, T = num_types_;
    if (device_of_unit.size() != dag_.num_units) return false;
    slot_device_.resize(S);
    for (size_t s = 0; s < S; ++s) slot_device_[s] = static_cast<int>(s);
    time_.assign(S * T, 0.0);
    inf_count_.assign(S * T, 0);
    comm_.assign(S * T, 0.0);
    size_.assign(S, 0.0);
    units_in_.assign(S, 0);
    unit_slot_.resize(dag_.num_units);
    for (size_t u = 0; u < dag_.num_units; ++u) {
      const int d = device_of_unit[u];
      if (d < 0 || static_cast<size_t>(d) >= S) return false;
      unit_slot_[u] = static_cast<uint32_t>(d);
      add_unit_sums(u, static_cast<size_t>(d), +1);
    }
    presence_.assign(dag_.tensors.size(), {});
    for (size_t x = 0; x < dag_.tensors.size(); ++x) {
      for (uint32_t u : dag_.tensors[x].units) bump(x, unit_slot_[u], +1);
      for (const auto& [slot, count] : presence_[x]) {
        if (crosses(x, count)) add_comm(x, slot, +1);
      }
    }
    for (size_t s = 0; s < S; ++s) {
      if (!fits(s, slot_device_[s])) return false;
    }
    if (!order_slots() && contiguous_) return false;
    loads_.resize(S);
    for (size_t s = 0; s < S; ++s) loads_[s] = slot_load(s, slot_device_[s]);
    return true;
  }

  double max_load() const { return *std::max_element(loads_.begin(), loads_.end()); }
  double cost(double weight) const {
    double sum = 0;
    for (double l : loads_) sum += l;
    return combine(max_load(), sum, weight);
  }
  double combine(double mx, double sum, double weight) const {
    return mx + weight * sum / double(num_slots_);
  }

  std::vector<int> device_of_unit() const {
    std::vector<int> out(dag_.num_units);
    for (size_t u = 0; u < dag_.num_units; ++u) out[u] = slot_device_[unit_slot_[u]];
    return out;
  }

  // One proposal at temperature `temp`; true when it was accepted.
  bool propose(Rng& rng, double temp, double weight, int max_block) {
    const double r = rng.uniform01();
    if (r < 0.1 && num_slots_ > 1) return propose_swap(rng, temp, weight);
    if (r < 0.2 && contiguous_) {
      if (propose_idle_move(rng)) return true;
    }
    return propose_block(rng, temp, weight, max_block);
  }

 private:
  const PipelineProblem& p_;
  const UnitDag& dag_;
  bool contiguous_;
  size_t num_slots_;
  size_t num_types_;

  std::vector<int> slot_device_;     // global device of each slot
  std::vector<uint32_t> slot_at_;    // slot at each position of the sequence
  std::vector<uint32_t> pos_of_;     // position of each slot
  std::vector<uint32_t> unit_slot_;  // slot of each unit
  std::vector<double> time_;         // [slot][type]: finite unit times summed
  std::vector<uint32_t> inf_count_;  // [slot][type]: units not allowed on the type
  std::vector<double> comm_;         // [slot][type]: costs of the tensors crossing the slot
  std::vector<double> size_;         // [slot]
  std::vector<uint32_t> units_in_;   // [slot]
  std::vector<double> loads_;        // [slot], under its device
  // Per tensor: (slot, number of the tensor's units on it), for slots holding at least one.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> presence_;

  std::vector<uint32_t> empty_;  // scratch of an idle move: the empty slots

  // Scratch of a block move.
  std::vector<uint32_t> block_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> touched_;  // tensors of the block
  std::vector<uint32_t> tensor_stamp_;
  std::vector<uint32_t> inside_;  // per touched tensor: its units in the block
  std::vector<double> dtime_, dcomm_a_, dcomm_b_;
  std::vector<uint32_t> dinf_;

  bool crosses(size_t x, uint32_t count) const {
    return count > 0 && count < dag_.tensors[x].units.size();
  }
  int type_of(int device) const { return p_.type_of_device(device); }

  void add_unit_sums(size_t u, size_t slot, int sign) {
    for (size_t t = 0; t < num_types_; ++t) {
      const double v = dag_.time_s[u][t];
      if (std::isinf(v)) {
        inf_count_[slot * num_types_ + t] += sign;
      } else {
        time_[slot * num_types_ + t] += sign * v;
      }
    }
    size_[slot] += sign * dag_.size_bytes[u];
    units_in_[slot] += sign;
  }
  void add_comm(size_t x, size_t slot, int sign) {
    for (size_t t = 0; t < num_types_; ++t) {
      comm_[slot * num_types_ + t] += sign * dag_.tensors[x].comm_s[t];
    }
  }
  uint32_t count_on(size_t x, uint32_t slot) const {
    for (const auto& [s, c] : presence_[x]) {
      if (s == slot) return c;
    }
    return 0;
  }
  void bump(size_t x, uint32_t slot, int delta) {
    auto& v = presence_[x];
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].first == slot) {
        v[i].second = static_cast<uint32_t>(static_cast<int>(v[i].second) + delta);
        if (v[i].second == 0) {
          v[i] = v.back();
          v.pop_back();
        }
        return;
      }
    }
    v.emplace_back(slot, static_cast<uint32_t>(delta));
  }

  bool fits(size_t slot, int device) const {
    const int t = type_of(device);
    return inf_count_[slot * num_types_ + t] == 0 && size_[slot] <= p_.types[t].memory_cap_bytes;
  }
  double slot_load(size_t slot, int device) const {
    const int t = type_of(device);
    if (inf_count_[slot * num_types_ + t] > 0) return kInf;
    const double comm = p_.types[t].pays_communication ? comm_[slot * num_types_ + t] : 0.0;
    return time_[slot * num_types_ + t] + comm;
  }

  // Orders the slots topologically by the quotient DAG (ties by device index), empty ones last;
  // false when the quotient has a cycle (the split is not contiguous).
  bool order_slots() {
    const size_t S = num_slots_;
    std::vector<std::vector<uint32_t>> out(S);
    std::vector<uint32_t> indegree(S, 0);
    for (size_t u = 0; u < dag_.num_units; ++u) {
      for (uint32_t v : dag_.succ[u]) {
        const uint32_t a = unit_slot_[u], b = unit_slot_[v];
        if (a != b) out[a].push_back(b);
      }
    }
    for (auto& o : out) {
      std::sort(o.begin(), o.end());
      o.erase(std::unique(o.begin(), o.end()), o.end());
      for (uint32_t b : o) ++indegree[b];
    }
    slot_at_.clear();
    std::vector<uint32_t> ready;
    for (uint32_t s = 0; s < S; ++s) {
      if (units_in_[s] > 0 && indegree[s] == 0) ready.push_back(s);
    }
    while (!ready.empty()) {
      const auto it = std::min_element(ready.begin(), ready.end());
      const uint32_t s = *it;
      ready.erase(it);
      slot_at_.push_back(s);
      for (uint32_t b : out[s]) {
        if (--indegree[b] == 0) ready.push_back(b);
      }
    }
    size_t non_empty = 0;
    for (uint32_t s = 0; s < S; ++s) non_empty += units_in_[s] > 0;
    if (slot_at_.size() != non_empty) return false;
    for (uint32_t s = 0; s < S; ++s) {
      if (units_in_[s] == 0) slot_at_.push_back(s);
    }
    pos_of_.assign(S, 0);
    for (uint32_t i = 0; i < S; ++i) pos_of_[slot_at_[i]] = i;
    return true;
  }

  static bool accept(double delta, double temp, Rng& rng) {
    if (delta <= 0) return true;
    if (temp <= 0 || std::isinf(delta)) return false;
    return rng.uniform01() < std::exp(-delta / temp);
  }

  // Cost with slots a and b at new loads (the others unchanged).
  double cost_with(uint32_t a, double load_a, uint32_t b, double load_b, double weight) const {
    double mx = std::max(load_a, load_b), sum = load_a + load_b;
    for (uint32_t s = 0; s < num_slots_; ++s) {
      if (s == a || s == b) continue;
      mx = std::max(mx, loads_[s]);
      sum += loads_[s];
    }
    return combine(mx, sum, weight);
  }

  bool propose_swap(Rng& rng, double temp, double weight) {
    const auto a = static_cast<uint32_t>(rng.uniform_int(num_slots_));
    auto b = static_cast<uint32_t>(rng.uniform_int(num_slots_ - 1));
    if (b >= a) ++b;
    const int da = slot_device_[a], db = slot_device_[b];
    if (type_of(da) == type_of(db)) return false;  // identical devices: nothing changes
    if (!fits(a, db) || !fits(b, da)) return false;
    const double la = slot_load(a, db), lb = slot_load(b, da);
    const double delta = cost_with(a, la, b, lb, weight) - cost(weight);
    if (!accept(delta, temp, rng)) return false;
    std::swap(slot_device_[a], slot_device_[b]);
    loads_[a] = la;
    loads_[b] = lb;
    return true;
  }

  bool propose_idle_move(Rng& rng) {
    const size_t S = num_slots_;
    empty_.clear();
    for (uint32_t s = 0; s < S; ++s) {
      if (units_in_[s] == 0) empty_.push_back(s);
    }
    if (empty_.empty() || S < 2) return false;
    const uint32_t s = empty_[rng.uniform_int(empty_.size())];
    const auto to = static_cast<uint32_t>(rng.uniform_int(S));
    const uint32_t from = pos_of_[s];
    if (to == from) return false;
    slot_at_.erase(slot_at_.begin() + from);
    slot_at_.insert(slot_at_.begin() + to, s);
    for (uint32_t i = std::min(from, to); i <= std::max(from, to); ++i) pos_of_[slot_at_[i]] = i;
    return true;
  }

  bool propose_block(Rng& rng, double temp, double weight, int max_block) {
    const size_t n = dag_.num_units;
    const auto u = static_cast<uint32_t>(rng.uniform_int(n));
    const bool forward = rng.uniform01() < 0.5;
    const uint32_t a = unit_slot_[u];
    uint32_t b = 0;
    if (contiguous_) {
      const uint32_t pa = pos_of_[a];
      if (forward ? pa + 1 >= num_slots_ : pa == 0) return false;
      b = slot_at_[forward ? pa + 1 : pa - 1];
    } else {
      if (num_slots_ < 2) return false;
      b = static_cast<uint32_t>(rng.uniform_int(num_slots_ - 1));
      if (b >= a) ++b;
    }
    const size_t limit = std::max<size_t>(
        1, static_cast<size_t>(
               std::floor(std::exp(rng.uniform01() * std::log(double(max_block) + 1.0)))));

    // The block. Contiguous: u and its descendants (ancestors, moving backward) on slot a, all
    // or nothing. Otherwise: u and up to limit - 1 of its neighbours on slot a, breadth first.
    if (stamp_.size() != n) stamp_.assign(n, 0);
    if (++epoch_ == 0) {
      std::fill(stamp_.begin(), stamp_.end(), 0);
      epoch_ = 1;
    }
    block_.clear();
    block_.push_back(u);
    stamp_[u] = epoch_;
    for (size_t i = 0; i < block_.size() && (contiguous_ || block_.size() < limit); ++i) {
      for (int side = 0; side < (contiguous_ ? 1 : 2); ++side) {
        const bool down = contiguous_ ? forward : side == 0;
        for (uint32_t v : down ? dag_.succ[block_[i]] : dag_.pred[block_[i]]) {
          if (unit_slot_[v] != a || stamp_[v] == epoch_) continue;
          if (block_.size() >= limit) {
            if (contiguous_) return false;
            break;
          }
          stamp_[v] = epoch_;
          block_.push_back(v);
        }
      }
    }

    // Sums of the block, and its tensors with how many of their units it holds.
    const size_t T = num_types_;
    dtime_.assign(T, 0.0);
    dinf_.assign(T, 0);
    double dsize = 0;
    if (tensor_stamp_.size() != dag_.tensors.size()) tensor_stamp_.assign(dag_.tensors.size(), 0);
    touched_.clear();
    inside_.clear();
    for (uint32_t v : block_) {
      for (size_t t = 0; t < T; ++t) {
        const double x = dag_.time_s[v][t];
        if (std::isinf(x)) {
          ++dinf_[t];
        } else {
          dtime_[t] += x;
        }
      }
      dsize += dag_.size_bytes[v];
      for (uint32_t x : dag_.tensors_of_unit[v]) {
        if (tensor_stamp_[x] != epoch_) {
          tensor_stamp_[x] = epoch_;
          touched_.push_back(x);
          inside_.push_back(0);
        }
      }
    }
    // Count the block's units per touched tensor (the stamp marks tensors, not their index).
    for (size_t i = 0; i < touched_.size(); ++i) {
      for (uint32_t v : dag_.tensors[touched_[i]].units) inside_[i] += stamp_[v] == epoch_;
    }
    const int db = slot_device_[b];
    const int tb = type_of(db);
    if (dinf_[tb] > 0 || inf_count_[b * T + tb] > 0) return false;
    if (size_[b] + dsize > p_.types[tb].memory_cap_bytes) return false;

    dcomm_a_.assign(T, 0.0);
    dcomm_b_.assign(T, 0.0);
    for (size_t i = 0; i < touched_.size(); ++i) {
      const uint32_t x = touched_[i], k = inside_[i];
      const uint32_t ca = count_on(x, a), cb = count_on(x, b);
      const int change_a = int(crosses(x, ca - k)) - int(crosses(x, ca));
      const int change_b = int(crosses(x, cb + k)) - int(crosses(x, cb));
      if (change_a == 0 && change_b == 0) continue;
      for (size_t t = 0; t < T; ++t) {
        dcomm_a_[t] += change_a * dag_.tensors[x].comm_s[t];
        dcomm_b_[t] += change_b * dag_.tensors[x].comm_s[t];
      }
    }
    const int da = slot_device_[a];
    const int ta = type_of(da);
    // Both devices allow every unit they hold after the move (a's by the invariant, b's checked
    // above), so the loads are finite.
    auto load_after = [&](uint32_t s, int t, int sign, const std::vector<double>& dcomm) {
      const double comm = p_.types[t].pays_communication ? comm_[s * T + t] + dcomm[t] : 0.0;
      return time_[s * T + t] + sign * dtime_[t] + comm;
    };
    const double la = units_in_[a] == block_.size() ? 0.0 : load_after(a, ta, -1, dcomm_a_);
    const double lb = load_after(b, tb, +1, dcomm_b_);
    const double delta = cost_with(a, la, b, lb, weight) - cost(weight);
    if (!accept(delta, temp, rng)) return false;

    // Apply.
    for (uint32_t v : block_) {
      add_unit_sums(v, a, -1);
      add_unit_sums(v, b, +1);
      unit_slot_[v] = b;
    }
    for (size_t i = 0; i < touched_.size(); ++i) {
      const uint32_t x = touched_[i], k = inside_[i];
      const uint32_t ca = count_on(x, a), cb = count_on(x, b);
      if (crosses(x, ca)) add_comm(x, a, -1);
      if (crosses(x, cb)) add_comm(x, b, -1);
      bump(x, a, -static_cast<int>(k));
      bump(x, b, static_cast<int>(k));
      if (crosses(x, ca - k)) add_comm(x, a, +1);
      if (crosses(x, cb + k)) add_comm(x, b, +1);
    }
    if (units_in_[a] == 0) {  // no rounding residue on an idle device
      std::fill_n(time_.begin() + a * T, T, 0.0);
      std::fill_n(comm_.begin() + a * T, T, 0.0);
      size_[a] = 0;
    }
    loads_[a] = slot_load(a, da);
    loads_[b] = slot_load(b, db);
    return true;
  }
};

}  // namespace

SplitRefineResult refine_split(const PipelineProblem& problem, const UnitDag& dag,
                               const std::vector<int>& start_device_of_unit,
                               const SplitRefineOptions& options) {
  const auto start = Clock::now();
  SplitRefineResult result;
  result.device_of_unit = start_device_of_unit;
  result.max_load_s = kInf;
  result.start_max_load_s = kInf;
  SplitSearch search(problem, dag, options.contiguous);
  if (dag.num_units == 0 || !search.load(start_device_of_unit)) return result;
  result.start_max_load_s = result.max_load_s = search.max_load();
  if (std::isinf(result.max_load_s)) return result;

  const uint64_t per_unit = options.contiguous ? 400 : 200;
  const uint64_t moves = options.moves > 0
                             ? options.moves
                             : std::clamp<uint64_t>(per_unit * uint64_t(dag.num_units), 200'000,
                                                    options.contiguous ? 4'000'000 : 2'000'000);
  // Non-contiguous blocks are taken as they come (breadth first, up to the drawn size), so most
  // are large unless capped; contiguous ones are all-or-nothing closures, mostly small.
  const int max_block = options.max_block > 0 ? options.max_block
                        : options.contiguous  ? std::max(8, int(dag.num_units / 16))
                                              : std::clamp(int(dag.num_units / 16), 8, 64);
  const double start_cost = search.cost(options.spread_weight);
  const double t0 = options.t_start * start_cost;
  const double ratio = options.t_end / options.t_start;
  Rng rng(options.seed);
  for (uint64_t i = 0; i < moves; ++i) {
    if ((i & 4095) == 0 &&
        std::chrono::duration<double>(Clock::now() - start).count() > options.time_limit_s) {
      result.stopped_by_time_limit = true;
      break;
    }
    const double temp = t0 * std::pow(ratio, double(i) / double(moves));
    ++result.moves_tried;
    if (!search.propose(rng, temp, options.spread_weight, max_block)) continue;
    ++result.moves_accepted;
    const double m = search.max_load();
    if (m < result.max_load_s) {
      result.max_load_s = m;
      result.device_of_unit = search.device_of_unit();
    }
  }
  return result;
}

HotAndColdRefineResult refine_split_hot_and_cold(const PipelineProblem& problem, const UnitDag& dag,
                                                 const std::vector<int>& start_device_of_unit,
                                                 const SplitRefineOptions& options,
                                                 double cold_t_start) {
  SplitRefineOptions cold_options = options;
  cold_options.t_start = cold_t_start;
  std::future<SplitRefineResult> cold = std::async(std::launch::async, [&] {
    return refine_split(problem, dag, start_device_of_unit, cold_options);
  });
  HotAndColdRefineResult result;
  result.best = refine_split(problem, dag, start_device_of_unit, options);
  SplitRefineResult cold_result = cold.get();
  if (cold_result.max_load_s < result.best.max_load_s) {
    result.best = std::move(cold_result);
    result.cold_won = true;
  }
  return result;
}

}  // namespace dplace
