#include "dplace/placers/pipeline/throughput_dp.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "dplace/core/clock.h"
#include "dplace/core/error.h"
#include "dplace/placers/pipeline/ideals.h"
#include "dplace/placers/pipeline/refine.h"

namespace dplace {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Device-count states: s = sum_t used_t * stride_t, used_t in [0, count_t].
struct StateSpace {
  size_t num_types = 0;
  std::vector<int> count;
  std::vector<uint32_t> stride;
  uint32_t num_states = 1;
  std::vector<double> cap;
  std::vector<uint8_t> pays;

  explicit StateSpace(const PipelineProblem& p) : num_types(p.types.size()) {
    for (const PipelineDeviceType& t : p.types) {
      count.push_back(t.count);
      stride.push_back(num_states);
      const uint64_t next = uint64_t{num_states} * static_cast<uint64_t>(t.count + 1);
      if (next > 1'000'000) {
        throw ConfigError(fmt::format(
            "pipeline problem '{}': too many device-count combinations ({} and more) for the "
            "dynamic program; group identical devices into fewer types",
            p.name, next));
      }
      num_states = static_cast<uint32_t>(next);
      cap.push_back(t.memory_cap_bytes);
      pays.push_back(t.pays_communication ? 1 : 0);
    }
  }
  int used(uint32_t s, size_t t) const {
    return static_cast<int>((s / stride[t]) % (count[t] + 1));
  }
  int remaining(uint32_t s) const {
    int r = 0;
    for (size_t t = 0; t < num_types; ++t) r += count[t] - used(s, t);
    return r;
  }
  // Whether state a uses no more devices of any type than state b.
  bool no_more(uint32_t a, uint32_t b) const {
    for (size_t t = 0; t < num_types; ++t) {
      if (used(a, t) > used(b, t)) return false;
    }
    return true;
  }
};

// Per-unit least work over the types (the remaining-work bound) and the simple lower bound.
// A device of type t with load < UB holds units of total work < UB / ratio[t], where ratio[t]
// is the smallest time_t(u) / work(u) over units (e.g. 10 for CPU cores 10x slower than the
// accelerators): the capacity used by the remaining-work bound.
struct WorkBounds {
  std::vector<double> unit_work;
  std::vector<double> ratio;  // per type; infinity: holds no unit with work
  double total_work = 0;
  double lower_bound = 0;
};

WorkBounds work_bounds(const PipelineProblem& p, const UnitDag& dag) {
  WorkBounds w;
  w.unit_work.resize(dag.num_units, 0.0);
  for (size_t u = 0; u < dag.num_units; ++u) {
    double best = kInf;
    for (size_t t = 0; t < dag.num_types; ++t) {
      if (p.types[t].count > 0) best = std::min(best, dag.time_s[u][t]);
    }
    w.unit_work[u] = best == kInf ? 0.0 : best;
    w.total_work += w.unit_work[u];
    w.lower_bound = std::max(w.lower_bound, w.unit_work[u]);
  }
  w.ratio.assign(dag.num_types, kInf);
  for (size_t u = 0; u < dag.num_units; ++u) {
    if (!(w.unit_work[u] > 0)) continue;
    for (size_t t = 0; t < dag.num_types; ++t) {
      if (dag.time_s[u][t] < kInf) {
        w.ratio[t] = std::min(w.ratio[t], dag.time_s[u][t] / w.unit_work[u]);
      }
    }
  }
  // total work <= sum_t count_t * load / ratio_t  =>  load >= total / sum_t (count_t / ratio_t).
  double capacity = 0;
  for (size_t t = 0; t < dag.num_types; ++t) {
    if (w.ratio[t] < kInf) capacity += p.types[t].count / w.ratio[t];
  }
  if (capacity > 0) w.lower_bound = std::max(w.lower_bound, w.total_work / capacity);
  return w;
}

// A set S being grown unit by unit: per-type time, size and crossing-tensor cost.
// Tensor counters are shared and restored by the caller on backtrack.
struct Accumulator {
  const UnitDag& dag;
  const StateSpace& space;
  std::vector<uint32_t> count;      // per tensor: units of S it touches
  std::vector<double> tensor_comm;  // [tensor * T + t]
  std::vector<uint32_t> tensor_units;
  std::vector<uint32_t> producer_unit;

  Accumulator(const UnitDag& d, const StateSpace& s) : dag(d), space(s) {
    count.assign(dag.tensors.size(), 0);
    const size_t T = space.num_types;
    tensor_comm.resize(dag.tensors.size() * T);
    tensor_units.resize(dag.tensors.size());
    producer_unit.resize(dag.tensors.size());
    for (size_t x = 0; x < dag.tensors.size(); ++x) {
      tensor_units[x] = static_cast<uint32_t>(dag.tensors[x].units.size());
      producer_unit[x] = dag.tensors[x].producer_unit;
      for (size_t t = 0; t < T; ++t) tensor_comm[x * T + t] = dag.tensors[x].comm_s[t];
    }
  }
  // Adds unit u: comm (per type) changes by the tensors that start or stop crossing.
  void add(uint32_t u, const double* comm_in, double* comm_out) {
    const size_t T = space.num_types;
    for (size_t t = 0; t < T; ++t) comm_out[t] = comm_in[t];
    for (uint32_t x : dag.tensors_of_unit[u]) {
      const uint32_t c = ++count[x];
      if (c == 1) {
        for (size_t t = 0; t < T; ++t) comm_out[t] += tensor_comm[x * T + t];
      } else if (c == tensor_units[x]) {
        for (size_t t = 0; t < T; ++t) comm_out[t] -= tensor_comm[x * T + t];
      }
    }
  }
  // As add(), and also grows `fixed`: the cost of tensors produced in `base` (a set disjoint
  // from S) that start crossing. Such a tensor crosses S for every superset of S, so `fixed` is
  // a lower bound on the communication of every superset.
  template <typename InBase>
  void add_with_fixed(uint32_t u, const double* comm_in, double* comm_out, const double* fixed_in,
                      double* fixed_out, InBase in_base) {
    const size_t T = space.num_types;
    for (size_t t = 0; t < T; ++t) {
      comm_out[t] = comm_in[t];
      fixed_out[t] = fixed_in[t];
    }
    for (uint32_t x : dag.tensors_of_unit[u]) {
      const uint32_t c = ++count[x];
      if (c == 1) {
        const bool from_base = in_base(producer_unit[x]);
        for (size_t t = 0; t < T; ++t) {
          comm_out[t] += tensor_comm[x * T + t];
          if (from_base) fixed_out[t] += tensor_comm[x * T + t];
        }
      } else if (c == tensor_units[x]) {
        for (size_t t = 0; t < T; ++t) comm_out[t] -= tensor_comm[x * T + t];
      }
    }
  }
  void remove(uint32_t u) {
    for (uint32_t x : dag.tensors_of_unit[u]) --count[x];
  }
};

// Assigns devices to the stages of a chain, in chain order: the j-th stage of type t gets the
// type's j-th device.
std::vector<int> assign_stages(const PipelineProblem& p, size_t num_units,
                               const std::vector<std::pair<std::vector<uint32_t>, int>>& stages) {
  std::vector<int> device_of_unit(num_units, -1);
  std::vector<int> next(p.types.size(), 0);
  for (const auto& [units, type] : stages) {
    const int device = p.first_device_of_type(type) + next[type]++;
    DPLACE_CHECK(next[type] <= p.types[type].count) << "more stages than devices of a type";
    for (uint32_t u : units) device_of_unit[u] = device;
  }
  for (int d : device_of_unit) DPLACE_CHECK(d >= 0) << "a unit was left unassigned";
  return device_of_unit;
}

class IdealDp {
 public:
  IdealDp(const PipelineProblem& p, const UnitDag& dag, const IdealLattice& lat,
          const StateSpace& space, const WorkBounds& work, double upper_bound,
          Clock::time_point deadline)
      : p_(p),
        dag_(dag),
        lat_(lat),
        space_(space),
        work_(work),
        acc_(dag, space),
        ub_(upper_bound),
        deadline_(deadline) {
    const size_t n = lat.size();
    const size_t S = space.num_states;
    dp_.assign(n * S, kInf);
    back_prev_.assign(n * S, IdealLattice::kNone);
    back_type_.assign(n * S, 0);
    dp_[0] = 0;
    const size_t T = space.num_types;
    const size_t depth = dag.num_units + 2;
    time_.assign(depth * T, 0.0);
    comm_.assign(depth * T, 0.0);
    fixed_.assign(depth * T, 0.0);
    work_sum_.assign(depth, 0.0);
    need_.assign(T, 0.0);
    size_.assign(depth, 0.0);
    mask_.assign(depth, 0);
    cands_.resize(depth);
    cur_.assign(lat.words(), 0);
    active_by_type_.resize(T);
  }

  // Returns false when the deadline passed before the search finished.
  bool run() {
    const size_t n = lat_.size();
    for (uint32_t j = 0; j + 1 < n; ++j) {
      if ((j & 255) == 0 && Clock::now() > deadline_) return false;
      push_from(j);
    }
    return true;
  }

  double best_value() const { return ub_; }
  bool improved() const { return best_idx_ != SIZE_MAX; }
  uint64_t pairs_visited() const { return pairs_; }
  uint64_t states_pushed() const { return states_pushed_; }

  // The chain of the best split: (units, type) per stage, first stage first.
  std::vector<std::pair<std::vector<uint32_t>, int>> stages() const {
    std::vector<std::pair<std::vector<uint32_t>, int>> out;
    const size_t S = space_.num_states;
    size_t idx = best_idx_;
    uint32_t id = static_cast<uint32_t>(idx / S);
    uint32_t s = static_cast<uint32_t>(idx % S);
    while (id != 0) {
      const uint32_t prev = back_prev_[static_cast<size_t>(id) * S + s];
      const int type = back_type_[static_cast<size_t>(id) * S + s];
      DPLACE_CHECK(prev != IdealLattice::kNone) << "broken back pointer";
      std::vector<uint32_t> units;
      for (uint32_t u = 0; u < dag_.num_units; ++u) {
        if (lat_.contains(id, u) && !lat_.contains(prev, u)) units.push_back(u);
      }
      out.emplace_back(std::move(units), type);
      s -= space_.stride[type];
      id = prev;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }

 private:
  void push_from(uint32_t j) {
    const size_t S = space_.num_states;
    const size_t T = space_.num_types;
    const double* row = &dp_[static_cast<size_t>(j) * S];
    const double remaining_work = work_.total_work - lat_.weight(j);
    active_.clear();
    for (uint32_t s = 0; s < S; ++s) {
      const double v = row[s];
      if (!(v < ub_)) continue;
      if (space_.remaining(s) == 0) continue;
      // Work capacity of the devices still unused in state s, below UB each.
      double capacity = 0;
      for (size_t t = 0; t < T; ++t) {
        if (work_.ratio[t] < kInf) {
          capacity += (space_.count[t] - space_.used(s, t)) * ub_ / work_.ratio[t];
        }
      }
      if (remaining_work > capacity * (1 + 1e-9) + 1e-12) continue;
      active_.push_back(s);
    }
    if (active_.empty()) return;
    // Drop dominated states.
    kept_.clear();
    for (uint32_t s : active_) {
      bool dominated = false;
      for (uint32_t s2 : active_) {
        if (s2 != s && row[s2] <= row[s] && space_.no_more(s2, s)) {
          dominated = true;
          break;
        }
      }
      if (!dominated) kept_.push_back(s);
    }
    uint32_t usable = 0;
    for (size_t t = 0; t < T; ++t) {
      active_by_type_[t].clear();
      for (uint32_t s : kept_) {
        if (space_.used(s, t) < space_.count[t]) active_by_type_[t].push_back(s);
      }
      if (!active_by_type_[t].empty()) usable |= 1u << t;
    }
    if (usable == 0) return;
    states_pushed_ += kept_.size();
    // need_[t]: the least work S must add for some state reached through type t to pass the
    // remaining-work test at I = J + S. Smaller S are searched through but not recorded.
    for (size_t t = 0; t < T; ++t) {
      need_[t] = kInf;
      for (uint32_t s : active_by_type_[t]) {
        double capacity = 0;
        for (size_t t2 = 0; t2 < T; ++t2) {
          if (work_.ratio[t2] < kInf) {
            const int left = space_.count[t2] - space_.used(s, t2) - (t2 == t ? 1 : 0);
            capacity += left * ub_ / work_.ratio[t2];
          }
        }
        need_[t] = std::min(need_[t], remaining_work - capacity * (1 + 1e-9) - 1e-12);
      }
    }

    j_ = j;
    std::copy_n(lat_.bits(j), lat_.words(), cur_.begin());
    hash_ = lat_.hash(j);
    std::fill_n(time_.begin(), T, 0.0);
    std::fill_n(comm_.begin(), T, 0.0);
    std::fill_n(fixed_.begin(), T, 0.0);
    size_[0] = 0;
    work_sum_[0] = 0;
    mask_[0] = usable;
    const auto addable = lat_.addable(j);
    cands_[0].assign(addable.begin(), addable.end());
    extend(0);
  }

  bool in_cur(uint32_t u) const { return (cur_[u >> 6] >> (u & 63)) & 1; }

  void extend(uint32_t depth) {
    const size_t T = space_.num_types;
    const size_t S = space_.num_states;
    const std::vector<uint32_t>& cands = cands_[depth];
    const double* time = &time_[depth * T];
    double* next_time = &time_[(depth + 1) * T];
    for (size_t i = 0; i < cands.size(); ++i) {
      const uint32_t v = cands[i];
      const double next_size = size_[depth] + dag_.size_bytes[v];
      uint32_t mask = 0;
      for (size_t t = 0; t < T; ++t) {
        if (!((mask_[depth] >> t) & 1)) continue;
        next_time[t] = time[t] + dag_.time_s[v][t];
        if (next_time[t] < ub_ && next_size <= space_.cap[t]) mask |= 1u << t;
      }
      if (mask == 0) continue;  // every superset of S + v is too slow or too big on every type

      // Tensors produced in J and consumed in S cross every superset of S: a lower bound.
      cur_[v >> 6] |= uint64_t{1} << (v & 63);
      hash_ ^= lat_.unit_key(v);
      double* next_comm = &comm_[(depth + 1) * T];
      double* next_fixed = &fixed_[(depth + 1) * T];
      acc_.add_with_fixed(v, &comm_[depth * T], next_comm, &fixed_[depth * T], next_fixed,
                          [this, v](uint32_t u) { return u != v && in_cur(u); });
      for (size_t t = 0; t < T; ++t) {
        if (((mask >> t) & 1) && space_.pays[t] && !(next_time[t] + next_fixed[t] < ub_)) {
          mask &= ~(1u << t);
        }
      }
      if (mask == 0) {
        acc_.remove(v);
        cur_[v >> 6] &= ~(uint64_t{1} << (v & 63));
        hash_ ^= lat_.unit_key(v);
        continue;
      }
      size_[depth + 1] = next_size;
      mask_[depth + 1] = mask;
      const double work = work_sum_[depth] + work_.unit_work[v];
      work_sum_[depth + 1] = work;

      uint32_t record = 0;
      for (size_t t = 0; t < T; ++t) {
        if (((mask >> t) & 1) && work >= need_[t]) record |= 1u << t;
      }
      const uint32_t id = record != 0 ? lat_.find(hash_) : IdealLattice::kNone;
      DPLACE_CHECK(record == 0 || id != IdealLattice::kNone)
          << "superset of an ideal by an addable unit is not an ideal";
      ++pairs_;
      for (size_t t = 0; t < T; ++t) {
        if (!((record >> t) & 1)) continue;
        const double cost = next_time[t] + (space_.pays[t] ? next_comm[t] : 0.0);
        if (!(cost < ub_)) continue;
        const double* row = &dp_[static_cast<size_t>(j_) * S];
        for (uint32_t s : active_by_type_[t]) {
          const double value = std::max(row[s], cost);
          if (!(value < ub_)) continue;
          const size_t idx = static_cast<size_t>(id) * S + s + space_.stride[t];
          if (value < dp_[idx]) {
            dp_[idx] = value;
            back_prev_[idx] = j_;
            back_type_[idx] = static_cast<uint8_t>(t);
            if (id == lat_.full_id()) {
              ub_ = value;
              best_idx_ = idx;
            }
          }
        }
      }

      std::vector<uint32_t>& next = cands_[depth + 1];
      next.assign(cands.begin() + static_cast<ptrdiff_t>(i) + 1, cands.end());
      for (uint32_t w : dag_.succ[v]) {
        bool ready = true;
        for (uint32_t q : dag_.pred[w]) {
          if (!in_cur(q)) {
            ready = false;
            break;
          }
        }
        if (ready) next.push_back(w);
      }
      if (!next.empty()) extend(depth + 1);

      acc_.remove(v);
      cur_[v >> 6] &= ~(uint64_t{1} << (v & 63));
      hash_ ^= lat_.unit_key(v);
    }
  }

  const PipelineProblem& p_;
  const UnitDag& dag_;
  const IdealLattice& lat_;
  const StateSpace& space_;
  const WorkBounds& work_;
  Accumulator acc_;
  double ub_;
  Clock::time_point deadline_;

  std::vector<double> dp_;
  std::vector<uint32_t> back_prev_;
  std::vector<uint8_t> back_type_;
  size_t best_idx_ = SIZE_MAX;

  // Search state.
  uint32_t j_ = 0;
  std::vector<uint64_t> cur_;
  uint64_t hash_ = 0;
  std::vector<double> time_, comm_, fixed_, size_, work_sum_;
  std::vector<double> need_;
  std::vector<uint32_t> mask_;
  std::vector<std::vector<uint32_t>> cands_;
  std::vector<uint32_t> active_, kept_;
  std::vector<std::vector<uint32_t>> active_by_type_;
  uint64_t pairs_ = 0;
  uint64_t states_pushed_ = 0;
};

}  // namespace

namespace {

using Stages = std::vector<std::pair<std::vector<uint32_t>, int>>;

// The chain DP over the prefixes of `order`; returns the value (infinity if nothing fits) and the
// stages (units, type) in chain order.
double chain_stages(const PipelineProblem& p, const UnitDag& dag,
                    const std::vector<uint32_t>& order, Stages& stages) {
  const StateSpace space(p);
  const size_t m = order.size();
  const size_t S = space.num_states;
  const size_t T = space.num_types;
  DPLACE_CHECK(m == dag.num_units) << "order must list every unit";
  std::vector<double> dp((m + 1) * S, kInf);
  std::vector<uint32_t> back_prev((m + 1) * S, 0);
  std::vector<uint8_t> back_type((m + 1) * S, 0);
  dp[0] = 0;
  double best = kInf;
  size_t best_idx = SIZE_MAX;
  Accumulator acc(dag, space);
  std::vector<double> time(T), comm(T), next_comm(T);
  std::vector<uint32_t> active;
  for (size_t j = 0; j < m; ++j) {
    active.clear();
    for (uint32_t s = 0; s < S; ++s) {
      if (dp[j * S + s] < best && space.remaining(s) > 0) active.push_back(s);
    }
    if (active.empty()) continue;
    std::fill(time.begin(), time.end(), 0.0);
    std::fill(comm.begin(), comm.end(), 0.0);
    double size = 0;
    size_t added = 0;
    for (size_t i = j + 1; i <= m; ++i) {
      const uint32_t u = order[i - 1];
      acc.add(u, comm.data(), next_comm.data());
      comm = next_comm;
      ++added;
      size += dag.size_bytes[u];
      bool any = false;
      for (size_t t = 0; t < T; ++t) {
        time[t] += dag.time_s[u][t];
        if (!(time[t] < best) || size > space.cap[t]) continue;
        any = true;
        const double cost = time[t] + (space.pays[t] ? comm[t] : 0.0);
        if (!(cost < best)) continue;
        for (uint32_t s : active) {
          if (space.used(s, t) >= space.count[t]) continue;
          const double value = std::max(dp[j * S + s], cost);
          const size_t idx = i * S + s + space.stride[t];
          if (value < dp[idx]) {
            dp[idx] = value;
            back_prev[idx] = static_cast<uint32_t>(j);
            back_type[idx] = static_cast<uint8_t>(t);
            if (i == m && value < best) {
              best = value;
              best_idx = idx;
            }
          }
        }
      }
      if (!any) break;
    }
    for (size_t k = 0; k < added; ++k) acc.remove(order[j + k]);
  }
  stages.clear();
  if (best_idx == SIZE_MAX) {
    if (m == 0) return 0.0;
    return kInf;
  }
  size_t i = best_idx / S;
  uint32_t s = static_cast<uint32_t>(best_idx % S);
  while (i != 0) {
    const size_t idx = i * S + s;
    const size_t j = back_prev[idx];
    const int type = back_type[idx];
    stages.emplace_back(std::vector<uint32_t>(order.begin() + static_cast<ptrdiff_t>(j),
                                              order.begin() + static_cast<ptrdiff_t>(i)),
                        type);
    s -= space.stride[type];
    i = j;
  }
  std::reverse(stages.begin(), stages.end());
  return best;
}

// Contracts chains of the unit DAG (a unit whose only predecessor has it as only successor)
// into blocks of least-work at most `cap`; block_of_unit receives the block of every unit.
// Contracting a chain keeps the DAG acyclic, and every ideal of the block DAG is an ideal of the
// unit DAG, so a split of the blocks is a contiguous split of the units with the same cost.
UnitDag coarsen_chains(const UnitDag& dag, const std::vector<double>& unit_work, double cap,
                       std::vector<uint32_t>& block_of_unit) {
  const size_t m = dag.num_units;
  block_of_unit.assign(m, UINT32_MAX);
  std::vector<double> block_work;
  for (uint32_t u : dag.topo_order) {
    if (dag.pred[u].size() == 1) {
      const uint32_t q = dag.pred[u][0];
      const uint32_t b = block_of_unit[q];
      if (dag.succ[q].size() == 1 && block_work[b] + unit_work[u] <= cap) {
        block_of_unit[u] = b;
        block_work[b] += unit_work[u];
        continue;
      }
    }
    block_of_unit[u] = static_cast<uint32_t>(block_work.size());
    block_work.push_back(unit_work[u]);
  }
  UnitDag c;
  c.num_units = block_work.size();
  c.num_types = dag.num_types;
  c.unit_of_node.resize(dag.unit_of_node.size());
  for (size_t i = 0; i < dag.unit_of_node.size(); ++i) {
    c.unit_of_node[i] = block_of_unit[dag.unit_of_node[i]];
  }
  c.nodes_of_unit.resize(c.num_units);
  c.time_s.assign(c.num_units, std::vector<double>(dag.num_types, 0.0));
  c.size_bytes.assign(c.num_units, 0.0);
  c.succ.resize(c.num_units);
  c.pred.resize(c.num_units);
  for (uint32_t u = 0; u < m; ++u) {
    const uint32_t b = block_of_unit[u];
    auto& nodes = c.nodes_of_unit[b];
    nodes.insert(nodes.end(), dag.nodes_of_unit[u].begin(), dag.nodes_of_unit[u].end());
    for (size_t t = 0; t < dag.num_types; ++t) c.time_s[b][t] += dag.time_s[u][t];
    c.size_bytes[b] += dag.size_bytes[u];
    for (uint32_t v : dag.succ[u]) {
      if (block_of_unit[v] != b) c.succ[b].push_back(block_of_unit[v]);
    }
  }
  for (uint32_t b = 0; b < c.num_units; ++b) {
    std::sort(c.succ[b].begin(), c.succ[b].end());
    c.succ[b].erase(std::unique(c.succ[b].begin(), c.succ[b].end()), c.succ[b].end());
    for (uint32_t v : c.succ[b]) c.pred[v].push_back(b);
  }
  // Blocks were numbered in topological order of their first unit.
  c.topo_order.resize(c.num_units);
  for (uint32_t b = 0; b < c.num_units; ++b) c.topo_order[b] = b;
  c.tensors_of_unit.resize(c.num_units);
  for (const UnitTensor& t : dag.tensors) {
    UnitTensor ct;
    ct.producer_unit = block_of_unit[t.producer_unit];
    for (uint32_t u : t.units) ct.units.push_back(block_of_unit[u]);
    std::sort(ct.units.begin(), ct.units.end());
    ct.units.erase(std::unique(ct.units.begin(), ct.units.end()), ct.units.end());
    if (ct.units.size() < 2) continue;
    ct.comm_s = t.comm_s;
    const auto index = static_cast<uint32_t>(c.tensors.size());
    for (uint32_t b : ct.units) c.tensors_of_unit[b].push_back(index);
    c.tensors.push_back(std::move(ct));
  }
  return c;
}

// A split that is not proven optimal: improve it by local search, and say so in the note.
void refine_unproven(const PipelineProblem& p, const UnitDag& dag,
                     const ThroughputDpOptions& options, Clock::time_point deadline,
                     ThroughputDpResult& result) {
  if (!options.refine || !result.feasible) return;
  // The time left, but at least a tenth of the limit (the DP may have used all of it).
  const double left_s = std::chrono::duration<double>(deadline - Clock::now()).count();
  const auto start = Clock::now();
  SplitRefineOptions refine;
  refine.seed = options.refine_seed;
  refine.time_limit_s = std::max(left_s, 0.1 * options.time_limit_s);
  const SplitRefineResult r = refine_split(p, dag, result.device_of_unit, refine);
  result.refine_seconds = seconds_since(start);
  if (!(r.max_load_s < result.max_load_s * (1 - 1e-9))) {
    if (r.stopped_by_time_limit) {
      result.note += "; local search found nothing better before its time limit";
    }
    return;
  }
  result.refine_start_s = result.max_load_s;
  result.max_load_s = r.max_load_s;
  result.device_of_unit = r.device_of_unit;
  result.note +=
      fmt::format("; local search improved it from {:.4f} to {:.4f} ms in {:.1f} s{}",
                  1e3 * result.refine_start_s, 1e3 * result.max_load_s, result.refine_seconds,
                  r.stopped_by_time_limit ? " (stopped by the time limit)" : "");
}

}  // namespace

double chain_throughput_dp(const PipelineProblem& p, const UnitDag& dag,
                           const std::vector<uint32_t>& order, std::vector<int>& device_of_unit) {
  Stages stages;
  const double value = chain_stages(p, dag, order, stages);
  device_of_unit.clear();
  if (value < kInf && dag.num_units > 0) {
    device_of_unit = assign_stages(p, dag.num_units, stages);
  }
  return value;
}

ThroughputDpResult solve_contiguous_throughput(const PipelineProblem& p, const UnitDag& dag,
                                               const ThroughputDpOptions& options) {
  const auto start = Clock::now();
  const auto deadline = start + steady_seconds(std::max(0.0, options.time_limit_s));
  ThroughputDpResult result;
  const StateSpace space(p);
  const WorkBounds work = work_bounds(p, dag);
  result.lower_bound_s = work.lower_bound;

  if (dag.num_units == 0) {
    result.feasible = true;
    result.optimal = true;
    result.num_ideals = 1;
    return result;
  }

  // Upper bound from two chains.
  std::vector<int> chain_assignment;
  double chain_value = kInf;
  for (const std::vector<uint32_t>& order : {dag.topo_order, depth_first_topological_order(dag)}) {
    std::vector<int> assignment;
    const double v = chain_throughput_dp(p, dag, order, assignment);
    if (v < chain_value) {
      chain_value = v;
      chain_assignment = std::move(assignment);
    }
  }
  result.chain_upper_bound_s = chain_value;

  const size_t per_ideal =
      IdealLattice::bytes_per_ideal(dag.num_units) + space.num_states * (8 + 4 + 1) + 8;
  size_t max_ideals = std::max<size_t>(2, options.memory_budget_bytes / per_ideal);
  if (options.max_ideals > 0) max_ideals = std::min(max_ideals, options.max_ideals);
  const auto lattice = IdealLattice::build(dag, max_ideals, work.unit_work);
  result.enumerate_seconds = seconds_since(start);
  if (!lattice) {
    result.note = fmt::format(
        "more than {} ideals (memory budget {} MiB): kept the best chain split, not proven optimal",
        max_ideals, options.memory_budget_bytes >> 20);
    result.feasible = chain_value < kInf;
    result.device_of_unit = chain_assignment;
    result.max_load_s = chain_value;
    refine_unproven(p, dag, options, deadline, result);
    return result;
  }
  result.num_ideals = lattice->size();

  // A tighter upper bound from the exact DP on a coarser DAG: chains contracted into blocks of at
  // most 2% of the work lower bound (far fewer ideals when branches are long chains). Only worth
  // it when the coarse DAG has at most a quarter of the ideals.
  if (options.coarsen && dag.num_units > 32) {
    const auto coarse_start = Clock::now();
    std::vector<uint32_t> block_of_unit;
    const UnitDag coarse =
        coarsen_chains(dag, work.unit_work, 0.02 * work.lower_bound, block_of_unit);
    if (coarse.num_units < dag.num_units) {
      ThroughputDpOptions coarse_options = options;
      coarse_options.coarsen = false;
      coarse_options.max_ideals = std::max<size_t>(2, lattice->size() / 4);
      coarse_options.time_limit_s = options.time_limit_s / 4;
      const ThroughputDpResult r = solve_contiguous_throughput(p, coarse, coarse_options);
      if (r.feasible && r.max_load_s < chain_value) {
        chain_value = r.max_load_s;
        chain_assignment.assign(dag.num_units, -1);
        for (size_t u = 0; u < dag.num_units; ++u) {
          chain_assignment[u] = r.device_of_unit[block_of_unit[u]];
        }
      }
      result.coarse_upper_bound_s = r.feasible ? r.max_load_s : kInf;
      result.coarse_ideals = r.num_ideals;
    }
    result.coarse_seconds = seconds_since(coarse_start);
  }

  // Search for a split strictly better than the chain's (inf when the chains found none).
  const auto dp_start = Clock::now();
  IdealDp dp(p, dag, *lattice, space, work, chain_value, deadline);
  const bool finished = dp.run();
  result.dp_seconds = seconds_since(dp_start);
  result.pairs_visited = dp.pairs_visited();
  result.states_pushed = dp.states_pushed();
  if (dp.improved()) {
    result.feasible = true;
    result.max_load_s = dp.best_value();
    result.device_of_unit = assign_stages(p, dag.num_units, dp.stages());
  } else {
    result.feasible = chain_value < kInf;
    result.max_load_s = chain_value;
    result.device_of_unit = chain_assignment;
  }
  result.optimal = finished;
  if (!finished) {
    result.note = fmt::format("time limit {} s reached: best split so far, not proven optimal",
                              options.time_limit_s);
    refine_unproven(p, dag, options, deadline, result);
  }
  return result;
}

}  // namespace dplace
