// Non-contiguous max-load partitioning as an integer program (Tarnawski et al., NeurIPS 2020,
// appendix), solved by CBC within a time limit.
//
// Over colour classes c and devices d (type t(d)):
//   x[c,d] in {0,1}, sum_d x[c,d] = 1                      every class on one allowed device
//   y[e,d] >= x[p,d] - x[q,d],  y[e,d] >= x[q,d] - x[p,d]  for each tensor e touching classes
//                                                          p (producer) and q (a consumer), and
//                                                          each device paying communication
//   sum_c time[c,t(d)] x[c,d] + sum_e comm[e,t(d)] y[e,d] <= M
//   sum_c size[c] x[c,d] <= cap[t(d)]
//   minimise M.
// Identical devices are symmetric; the program breaks it with x[c_i, d_j] = 0 for the j-th
// device of a type and the i-th class when j > i (relabel devices by their smallest class).
// M's lower bound is the simple work bound; a warm start (any feasible split, e.g. the
// contiguous optimum) gives CBC an incumbent from the start.
//
// Thread safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "dplace/placers/pipeline/problem.h"

namespace dplace {

struct ThroughputIlpOptions {
  double time_limit_s = 60;  // Default: 60.
  int threads = 1;           // Default: 1.
  // A feasible node -> device assignment to start from; may be empty.
  std::vector<int> warm_start;
};

struct ThroughputIlpResult {
  bool feasible = false;
  bool optimal = false;
  std::vector<int> device_of_node;
  double objective_s = 0;   // the program's M
  double best_bound_s = 0;  // CBC's proven lower bound
  double seconds = 0;
  size_t columns = 0;
  size_t rows = 0;
  std::string note;
};

ThroughputIlpResult solve_throughput_ilp(const PipelineProblem& problem,
                                         const ThroughputIlpOptions& options);

}  // namespace dplace
