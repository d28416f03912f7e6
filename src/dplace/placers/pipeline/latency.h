// Single-sample latency (Tarnawski et al., NeurIPS 2020, section 5): the time for one sample to
// pass through the whole graph, with
//  * one contiguous subgraph per device of a type that pays communication (an accelerator): it
//    starts when every tensor entering it is ready, then runs for
//      (cost of tensors entering) + (sum of its nodes' times) + (cost of tensors leaving),
//    and all its nodes finish together at its end;
//  * every other node on the "pool": the first type that pays no communication (CPU cores),
//    taken as unboundedly parallel, as in the paper; a pool node finishes at
//      max(finish of its predecessors) + its pool time.
// Latency = the latest finish. Memory caps apply per accelerator; colour classes co-locate.
//
// evaluate_latency computes it for a given split; latency_greedy is the paper's baseline (colour
// classes fused into strongly connected blocks, taken in depth-first topological order, each
// accelerator filled with consecutive blocks up to its memory cap, the rest on the pool);
// latency_ilp is the paper's integer program solved by CBC (big-M start/finish constraints,
// contiguity through the z-variables of the paper), warm-started with the greedy split.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "dplace/placers/pipeline/problem.h"

namespace dplace {

struct LatencyEvaluation {
  bool valid = false;  // false: a subgraph cycle (non-contiguous split) or a disallowed node
  std::string problem;
  double latency_s = 0;
  std::vector<double> finish_of_node_s;
  // Per global device (accelerators only; 0 elsewhere).
  std::vector<double> start_s;
  std::vector<double> finish_s;
};

// REQUIRES: device_of_node has one entry per node. Nodes on devices of non-paying types are all
// pool nodes.
LatencyEvaluation evaluate_latency(const PipelineProblem& problem,
                                   const std::vector<int>& device_of_node);

struct LatencyResult {
  bool feasible = false;
  bool optimal = false;
  std::vector<int> device_of_node;
  double latency_s = 0;     // evaluated
  double best_bound_s = 0;  // proven lower bound (the ILP's; latency_lower_bound for the greedy)
  double seconds = 0;
  std::string note;
};

// The critical path with every node at its fastest allowed time and free communication: a lower
// bound on the latency of every split.
double latency_lower_bound(const PipelineProblem& problem);

LatencyResult latency_greedy(const PipelineProblem& problem);

struct LatencyIlpOptions {
  double time_limit_s = 60;  // Default: 60.
  int threads = 1;           // Default: 1.
};
LatencyResult latency_ilp(const PipelineProblem& problem, const LatencyIlpOptions& options);

}  // namespace dplace
