// Small placement problems with hand-computed optima, shared by the placer tests (test-only
// library dplace_placer_testing). Op times are given as time_s overrides so every figure below is
// exact; links have zero latency unless stated.
//
//  * two_chains: /gpu:0, /gpu:1 (16 GB each, 1 GB/s both ways). Chains a0->a1->a2 and
//    b0->b1->b2, 1 s per op, 1 GB per tensor (1 s to move). Optimum 3 s: one chain per GPU.
//  * two_unlinked_chains: two_chains on GPUs with no link at all; the optimum needs none.
//  * memory_tight: two GPUs of 10.5 GB. Chain A->B->C->D, 1 s each, params 8, 6, 3, 2 GB,
//    1 kB tensors. Only {A, D} | {B, C} fits; its step is 4 s + two 1 us transfers.
//  * oversubscribed: the memory_tight chain on one 10.5 GB GPU: nothing fits (19 GB of params).
//  * oversubscribed_pair: the memory_tight chain on two 5 GB GPUs: nothing fits, and the
//    placements differ in how much memory they need beyond capacity.
//  * shared_parameter: two GPUs. W (1 MB of parameters, no inputs, 1 ms) is read by the forward
//    ops A and B (1 s each), which C (1 s) joins: W is a shared weight
//    (placers/learning/groupings.h). Its optimum is not worked out (optimum_s() is 0).
//  * colocation: two GPUs. a (3 s) -> b (1 s), and c (2 s) alone; a and c colocated ("ac").
//    Optimum 5 s: {a, c} on one GPU, b on the other (b with them gives 6 s).
//  * cpu_only: /cpu:0 + /gpu:0. load (CPU only, 0.5 s) -> mm1 -> mm2 -> loss; mm1, mm2 take 1 s on
//    the GPU and 10 s on the CPU, loss 0.1 s / 1 s; 1 MB tensors over 1 GB/s. Optimum 2.601 s:
//    load on the CPU, the rest on the GPU.
//  * heavy_light: /cpu:0 + /gpu:0, two independent ops: heavy (1 s on the GPU, 10 s on the CPU)
//    and light (0.2 s / 0.8 s). Optimum 1 s: heavy on the GPU, light on the CPU (both on the GPU
//    1.2 s). With heavy_params_gb above 16, heavy no longer fits on the GPU: optimum 10 s, heavy
//    on the CPU and light on the GPU.
//  * wide(n): two GPUs; src -> n parallel ops -> sink, 1 ms each, 1 kB tensors. For tests of time
//    limits: its optimum is not worked out (optimum_s() is 0).
//  * lone_op: /cpu:0 listed before /gpu:0, and one op (1 s on the GPU, 10 s on the CPU). Optimum
//    1 s; a placer that leaves an unpartitioned graph on the first device gets 10 s.
//  * shared_weight: /cpu:0, /gpu:0, /gpu:1. W (an input: no time, a 2 GB tensor) feeds A and B
//    (GPU only, 1 s each). Optimum 2 s: all three on one GPU; B on the other GPU waits 2 s for W.
//  * link_gap: /gpu:0, /gpu:1. X (1 s, 0.4 GB out) and Y (0.5 s, 0.5 GB out) are fixed to /gpu:0,
//    and so is D (0.7 s, reads X); C (0.5 s) reads Y then X. /gpu:0 runs X 0-1, Y 1-1.5, D
//    1.5-2.2, so C ends there at 2.7 s; on /gpu:1 it ends at 2.5 s: Y arrives 1.5-2.0 and X goes
//    first, 1.0-1.4, though C lists it second. Optimum 2.5 s.
//  * restricted_fill: /gpu:0-2 of 40 GB; six independent ops o0-o5 (1 s, 10 GB of params each),
//    o3 allowed on /gpu:0 and /gpu:2 only. m-topo's share is 60/3 + 10 = 30 GB a GPU. Optimum 2 s.
//  * oom_cheap_start: /cpu:0 + /gpu:0 of 3.9 GB; chain A0 -> A1 -> A2 -> A3, 1 s each on the GPU
//    and 30 s on the CPU, 1 GB of params each, 4-byte tensors. All on the GPU: 4 s but 0.1 GB
//    over, whose penalised cost is still below every fitting placement's; optimum 33 s (A3 on
//    the CPU) plus one 4-byte transfer.
//
// Thread safety: a PlacerCase is immutable after construction.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dplace/placers/placer.h"

namespace dplace::testing {

// Owns a graph, cluster, cost table and simulator. Never moved (the last two refer to the first).
class PlacerCase {
 public:
  PlacerCase(Graph graph, Cluster cluster, double optimum_s);
  PlacerCase(const PlacerCase&) = delete;
  PlacerCase& operator=(const PlacerCase&) = delete;

  const Graph& graph() const { return graph_; }
  const Cluster& cluster() const { return cluster_; }
  const CostTable& costs() const { return *costs_; }
  const Simulator& simulator() const { return *simulator_; }
  double optimum_s() const { return optimum_s_; }

  OpId op(const std::string& name) const;
  DeviceId device(const std::string& name) const;

 private:
  Graph graph_;
  Cluster cluster_;
  std::unique_ptr<CostTable> costs_;
  std::unique_ptr<Simulator> simulator_;
  double optimum_s_;
};

std::unique_ptr<PlacerCase> two_chains_case();
std::unique_ptr<PlacerCase> two_unlinked_chains_case();
std::unique_ptr<PlacerCase> memory_tight_case();
std::unique_ptr<PlacerCase> oversubscribed_case();
// oversubscribed_case's graph and GPU with a 64 GB CPU beside it: everything fits on the CPU.
std::unique_ptr<PlacerCase> oversubscribed_gpu_with_cpu_case();
std::unique_ptr<PlacerCase> oversubscribed_pair_case();
std::unique_ptr<PlacerCase> shared_parameter_case();
std::unique_ptr<PlacerCase> colocation_case();
std::unique_ptr<PlacerCase> cpu_only_case();
// cpu_only with mm1 GPU-only (no mm2): load -> mm -> loss, optimum 1.601 s. No device is allowed
// for both load and mm.
std::unique_ptr<PlacerCase> disjoint_devices_case();
std::unique_ptr<PlacerCase> heavy_light_case(double heavy_params_gb = 0);
std::unique_ptr<PlacerCase> lone_op_case();
std::unique_ptr<PlacerCase> wide_case(int width);
std::unique_ptr<PlacerCase> shared_weight_case();
std::unique_ptr<PlacerCase> link_gap_case();
std::unique_ptr<PlacerCase> restricted_fill_case();
std::unique_ptr<PlacerCase> oom_cheap_start_case();

// An op of type "Test" with explicit times on any GPU and any CPU and one output tensor.
Op timed(const std::string& name, std::vector<TensorRef> inputs, double gpu_s, double cpu_s,
         int64_t output_bytes);

struct PlacerRun {
  PlaceResult result;
  SimResult sim;  // of result.placement
};

struct RunOptions {
  std::map<std::string, std::string> params;
  uint64_t seed = 1;
  double budget_seconds = 60;
  std::optional<Placement> expert;
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// A request on the case (graph, cluster, costs, simulator) with PlaceRequest's defaults.
PlaceRequest case_request(const PlacerCase& c);

// make_placer(name)->place() on the case, then one simulation of the result.
PlacerRun run_placer(const PlacerCase& c, const std::string& name, const RunOptions& options = {});

// The least memory over capacity (SimResult::total_overflow_bytes) among all placements of the
// case's ops on its devices, each simulated (devices^ops of them: for cases of a few ops).
int64_t least_overflow_bytes(const PlacerCase& c);

// Device name of each op, "a0=/gpu:0 a1=/gpu:0 ..." in op order; for readable failures.
std::string describe(const PlacerCase& c, const Placement& p);

}  // namespace dplace::testing
