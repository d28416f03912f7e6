// Pipeline partitioning (Tarnawski et al., NeurIPS 2020): the `dplace pipeline` solver.
//
// solve_pipeline is a pure function of a PipelineRequest:
//  * objective throughput, contiguous (default): the exact DP over ideals (throughput_dp.h);
//  * objective throughput, non-contiguous: an integer program solved by CBC within a time limit,
//    warm-started with the contiguous optimum, reporting the optimality gap (throughput_ilp.h);
//  * objective latency: the paper's single-sample-latency integer program (CBC) or its greedy
//    baseline (latency.h).
// Every plan is re-evaluated from scratch with the paper's cost model (problem.h), so the loads
// it reports do not depend on the solver's internal arithmetic.
//
// Output helpers: pipeline_plan_to_json (the `--json` object), pipeline_plan_table (text),
// pipeline_placement (a dplace Placement when the problem came from a Graph + Cluster).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dplace/core/json.h"
#include "dplace/placers/pipeline/problem.h"
#include "dplace/sim/placement.h"

namespace dplace {

enum class PipelineObjective { kThroughput, kLatency };
std::string_view pipeline_objective_name(PipelineObjective objective);
// "throughput" / "latency"; nullopt otherwise.
std::optional<PipelineObjective> parse_pipeline_objective(std::string_view word);

enum class LatencyMethod { kIlp, kGreedy };

struct PipelineOptions {
  PipelineObjective objective = PipelineObjective::kThroughput;  // Default: throughput.
  // Default: true. Throughput only: restrict to contiguous splits (exact DP); false solves the
  // non-contiguous integer program. The latency program always uses contiguous subgraphs.
  bool contiguous = true;
  LatencyMethod latency_method = LatencyMethod::kIlp;  // Default: the integer program.
  // Default: 60. Wall-clock limit for CBC (the integer programs).
  double time_limit_s = 60;
  // Default: 600. Wall-clock limit for the DP over ideals; on expiry it returns its best split
  // so far, marked not optimal.
  double dp_time_limit_s = 600;
  // Default: 2 GiB. Memory budget of the DP over ideals.
  size_t memory_budget_bytes = size_t{2} << 30;
  // Default: 1. CBC threads.
  int threads = 1;
  // Default: 1. Throughput: seed of the local searches (refine.h) that improve a contiguous split
  // the DP cannot prove optimal and give CBC its warm start.
  uint64_t seed = 1;
};

struct PipelineRequest {
  const PipelineProblem* problem = nullptr;  // REQUIRES: non-null, valid
  PipelineOptions options;
};

struct PipelineDevicePlan {
  std::string name;  // device name
  std::string type;  // device type name
  double load_s = 0;
  double compute_s = 0;
  double comm_s = 0;
  double memory_bytes = 0;
  double memory_cap_bytes = kUncappedBytes;
  std::vector<uint32_t> nodes;  // ascending
  // Latency objective: when this device's subgraph starts and ends (accelerators only).
  std::optional<double> start_s;
  std::optional<double> finish_s;
};

struct PipelinePlan {
  PipelineObjective objective = PipelineObjective::kThroughput;
  bool contiguous = true;  // whether the returned split is contiguous
  std::string method;      // "ideal-dp", "chain-dp", "ilp-cbc", "latency-ilp-cbc", "latency-greedy"
  bool feasible = false;   // a split respecting memory, allowed types and colours was found
  std::string infeasible_reason;
  std::vector<int> device_of_node;          // global device index per node (feasible only)
  std::vector<PipelineDevicePlan> devices;  // every device of the problem
  double max_load_s = 0;                    // throughput cost of the split (both objectives)
  double latency_s = 0;                     // single-sample latency (latency objective only)
  double objective_s = 0;                   // max_load_s or latency_s
  double lower_bound_s = 0;
  double gap = 0;        // (objective - lower bound) / objective; 0 when proven optimal
  bool optimal = false;  // proven optimal for its objective and contiguity
  double solve_seconds = 0;
  // Throughput DP statistics.
  uint64_t ideals = 0;
  uint64_t ideal_pairs = 0;
  double chain_upper_bound_s = 0;
  std::string note;
};

// Solves the request. Throws ConfigError for an invalid problem.
PipelinePlan solve_pipeline(const PipelineRequest& request);

// A split given as node ids per machine (the dnn-partitioning "cpus"/"fpgas" output format,
// human-experts/ files): the i-th CPU set goes to the i-th device of the first type that pays no
// communication, the i-th accelerator set to the i-th device of the first type that pays it.
// Ids are PipelineNode::external_id. Nodes not listed take the device of a listed node of their
// colour class (expert splits of training graphs list forward nodes only), as the authors'
// evaluator does. Throws ConfigError for an unknown or repeated id, more sets than devices, or a
// node that cannot be inferred.
std::vector<int> assignment_from_split(const PipelineProblem& problem,
                                       const std::vector<std::vector<int64_t>>& cpu_sets,
                                       const std::vector<std::vector<int64_t>>& accel_sets);

// Fills devices, max_load_s and the feasibility fields of `plan` from plan.device_of_node.
void evaluate_plan(const PipelineProblem& problem, PipelinePlan& plan);

// The `--json` object: graph, objective, method, max_load (s), latency (s, latency objective),
// optimal, gap, lower_bound, solve_seconds, ideals, and per device name, type, load, compute,
// communication (s), memory_bytes, memory_cap_bytes (null when uncapped) and ops (node names).
Json pipeline_plan_to_json(const PipelineProblem& problem, const PipelinePlan& plan);
// A per-device table; times printed in ms.
std::string pipeline_plan_table(const PipelineProblem& problem, const PipelinePlan& plan);
// node i -> the cluster device of its global device. REQUIRES: the problem was made by
// pipeline_problem_from_graph (one node per op, cluster devices known) and plan.feasible.
Placement pipeline_placement(const PipelineProblem& problem, const PipelinePlan& plan);

}  // namespace dplace
