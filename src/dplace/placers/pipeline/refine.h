// Local search over splits (not in Tarnawski et al.): improves a split when the exact solvers
// cannot finish: the DP over ideals when there are too many ideals for its memory budget (as on
// unrolled recurrent networks) or it stops at its time limit, and the non-contiguous integer
// program when CBC stops at its limit (it is warm-started with the result).
//
// Contiguous mode: a split is kept as an ordered sequence of stages, one per device (empty stages
// are idle devices); a unit's stage is never after a successor's, so every state of the search is
// a contiguous split. Moves, proposed at random:
//  * block move: a unit and its descendants inside its stage (or its ancestors, moving backward)
//    go to the adjacent stage in the sequence; block sizes are log-uniform up to a cap;
//  * device swap: two stages exchange their devices (matters for device types and memory caps);
//  * idle device: an empty stage moves to another place in the sequence, so that later block
//    moves can fill it.
// Non-contiguous mode: a block move takes a unit and up to (log-uniform size - 1) of its
// neighbours on its device, breadth first, to any other device; device swaps as above. Units keep
// colour classes together (they may also fuse classes that only contiguity would need together).
// Every move keeps memory caps and allowed device types. Loads are the paper's (evaluate_pipeline)
// and are updated incrementally: a block move changes the loads of its two devices only.
// Acceptance is simulated annealing on max load + `spread_weight` x mean load over the devices (the
// second term rewards cutting fewer tensors on the plateaus of the max); the best split by max
// load is returned.
//
// Deterministic: the move sequence depends only on the seed and the number of moves; the time
// limit is a safety cap (the result says when it stopped the search).
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "dplace/placers/pipeline/problem.h"
#include "dplace/placers/pipeline/units.h"

namespace dplace {

struct SplitRefineOptions {
  uint64_t moves = 0;  // proposals. Default 0: 400 per unit within [2e5, 4e6] (contiguous), else
                       // 200 per unit within [2e5, 2e6].
  uint64_t seed = 1;   // Default: 1.
  double time_limit_s = 60;    // safety cap. Default: 60.
  double t_start = 0.1;        // temperature at the start, times the start cost. Default: 0.1.
  double t_end = 1e-4;         // at the end, times the start cost. Default: 1e-4.
  double spread_weight = 0.5;  // weight of the mean device load in the cost. Default: 0.5.
  int max_block = 0;       // largest block move. Default 0: max(8, units / 16) (contiguous), else
                           // units / 16 within [8, 64].
  bool contiguous = true;  // Default: true. false: any split (non-contiguous mode).
};

struct SplitRefineResult {
  std::vector<int> device_of_unit;  // the best split (the start when nothing was better)
  double max_load_s = 0;            // its max load (infinity when the start was infeasible)
  double start_max_load_s = 0;
  uint64_t moves_tried = 0;
  uint64_t moves_accepted = 0;
  bool stopped_by_time_limit = false;
};

// REQUIRES: start_device_of_unit is a split of `dag` (global device per unit), contiguous in
// contiguous mode, that respects memory caps and allowed types; otherwise the start is returned
// unchanged with max_load_s = infinity.
SplitRefineResult refine_split(const PipelineProblem& problem, const UnitDag& dag,
                               const std::vector<int>& start_device_of_unit,
                               const SplitRefineOptions& options);

struct HotAndColdRefineResult {
  SplitRefineResult best;  // the better of the two (ties: the hot one)
  bool cold_won = false;
};

// Two searches at once, the second on its own thread: `options` as given (hot) and the same with
// t_start = cold_t_start, which mostly descends near the start where the hot one explores. On
// rugged landscapes each wins on some inputs (docs/pipeline.md). Deterministic like refine_split.
HotAndColdRefineResult refine_split_hot_and_cold(const PipelineProblem& problem, const UnitDag& dag,
                                                 const std::vector<int>& start_device_of_unit,
                                                 const SplitRefineOptions& options,
                                                 double cold_t_start);

}  // namespace dplace
