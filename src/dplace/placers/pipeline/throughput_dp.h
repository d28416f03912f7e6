// Exact contiguous max-load partitioning by dynamic programming over ideals (Tarnawski et al.,
// NeurIPS 2020, section 4), with bounds.
//
// A contiguous split is a chain of ideals {} = I0 < I1 < ... < Ir = V of the unit DAG (units.h);
// each difference I_j \ I_{j-1} goes to one device. With device types t of counts n_t, the state
// is (ideal, devices used per type) and
//   dp[I][s + e_t] = min over ideals J < I of max(dp[J][s], cost_t(I \ J)),
// where cost_t(S) = sum of times of S on t + (t pays communication ? the cost of the tensors
// crossing S : 0), infinite if S exceeds t's memory cap or holds a unit t may not run.
//
// How it is made fast (docs/pipeline.md):
//  * "push" form: from each ideal J with a useful state, a depth-first search over the supersets
//    I = J + S (include/exclude on addable units, so each superset once) updates dp[I]; times,
//    sizes and crossing tensors are updated incrementally per added unit (a per-tensor counter of
//    touched units inside S), and the hash of I is hash(J) ^ hash(S).
//  * Upper bound UB: the same DP restricted to two chains of prefix ideals (linear extensions),
//    then the exact DP on a coarser DAG (chains of units contracted into blocks of at most 2% of
//    the work bound), give feasible splits first; later, every split reaching V lowers UB. Only
//    values < UB are kept, so the search from J stops as soon as S's time alone reaches UB on every
//    usable type (times and sizes only grow with S; communication need not).
//  * States at J are skipped when dominated (another state with no more devices of any type and
//    no larger value) or hopeless (the remaining units' least work exceeds the remaining devices
//    times UB).
// The result is exact: it is the best split with value < UB if one exists, else the chain split.
// When it cannot be (the ideals exceed the memory budget, or the time limit stops the search), the
// best split found is improved by a local search over contiguous splits (refine.h).
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dplace/placers/pipeline/problem.h"
#include "dplace/placers/pipeline/units.h"

namespace dplace {

struct ThroughputDpOptions {
  // Default: 2 GiB. Memory for the ideals and the DP table; beyond it the solver falls back to
  // the chain heuristic and says so.
  size_t memory_budget_bytes = size_t{2} << 30;
  // Default: 600. Wall-clock limit of the DP; on expiry the best split found so far is returned
  // with optimal = false.
  double time_limit_s = 600;
  // Default: true. First solve a coarser DAG (chains contracted into small blocks) exactly, for a
  // tighter upper bound than the chain heuristic.
  bool coarsen = true;
  // Default: 0 (no limit beyond the memory budget). At most this many ideals.
  size_t max_ideals = 0;
  // Default: true. When the split is not proven optimal (too many ideals, or the time limit),
  // improve it by local search over contiguous splits (refine.h), within the time left or a tenth
  // of time_limit_s, whichever is longer; the result stays "not proven optimal".
  bool refine = true;
  // Default: 1. Seed of that local search.
  uint64_t refine_seed = 1;
};

struct ThroughputDpResult {
  bool feasible = false;            // some split fits (memory caps, allowed types)
  bool optimal = false;             // proven optimal among contiguous splits
  std::vector<int> device_of_unit;  // global device index per unit (feasible only)
  double max_load_s = 0;            // as the DP computed it (feasible only)
  double chain_upper_bound_s = 0;   // the chain heuristic's value (infinity if none)
  double coarse_upper_bound_s = 0;  // the coarse DP's value (0: not run; infinity: none)
  size_t coarse_ideals = 0;         // ideals of the coarse DAG
  double lower_bound_s = 0;         // a simple bound: max(largest unit, total work / devices)
  size_t num_ideals = 0;            // 0 when not enumerated
  uint64_t pairs_visited = 0;       // (J, I) pairs the search looked at
  uint64_t states_pushed = 0;       // (J, state) pairs the search expanded
  double enumerate_seconds = 0;     // chains and ideals
  double coarse_seconds = 0;        // the coarse DP
  double dp_seconds = 0;
  double refine_start_s = 0;  // value before the local search (0: it did not run or improve)
  double refine_seconds = 0;
  std::string note;  // why the result is not optimal, if it is not
};

ThroughputDpResult solve_contiguous_throughput(const PipelineProblem& problem, const UnitDag& dag,
                                               const ThroughputDpOptions& options);

// The chain heuristic alone: the exact DP over the prefixes of one linear extension of the unit
// DAG. `order` must be a topological order of the units. Returns the value (infinity when no
// split of the chain fits) and the assignment in `device_of_unit`.
double chain_throughput_dp(const PipelineProblem& problem, const UnitDag& dag,
                           const std::vector<uint32_t>& order, std::vector<int>& device_of_unit);

}  // namespace dplace
