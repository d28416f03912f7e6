// HSDAG: Duan et al., "A Structure-Aware Framework for Learning Device Placements on Computation
// Graphs" (NeurIPS 2024); placer name `hsdag`. See docs/hsdag.md.
//
// The paper's five steps, as dplace does them:
//  1. Graph coarsening: the learning placers' grouping (placers/learning/groupings.h: colocation
//     groups, an op merged into its sole consumer along chains, as the paper's coarsening merges
//     an op with a sole successor whose sole predecessor it is; capped at `groups`).
//  2. Features per coarse node: placers/learning/features.h (op-type counts, output-tensor sizes,
//     neighbour ids, compute, parameters, topological position), plus, beyond the paper, each
//     device's time for the node relative to its fastest device (what tells a CPU from a GPU
//     here; the paper had one CPU and one GPU and measured). Each column is standardised.
//  3-4. Node embeddings and the grouping, learned jointly: the network of hsdag/network.h (GCN
//     layers, then a graph-parsing pooling whose number of clusters follows from the learned edge
//     scores).
//  5. Placement: an MLP gives each cluster a softmax over its devices; K placements are sampled
//     per update from one forward pass and evaluated concurrently by the simulator (the paper
//     measured each on OpenVINO), and the whole network is trained by REINFORCE, as the paper's
//     code does: the reward -sqrt(step time / lower bound) minus an exponential-moving-average
//     baseline, divided by the batch's reward spread (the paper: reward 1 / runtime, no
//     baseline), an entropy bonus, Adam.
// Not in the paper: a restart from fresh weights after restart_patience updates without a new
// best; identical placements simulated once; the OOM charge and least-overflow result of
// placers/learning/evaluation.h; the polishing of the result by whole-device moves and
// annealing, as for rl and post (search/anneal.h, polish_learned; polish=0 gives HSDAG alone).
//
// Determinism: for one seed the samples, the curve (but its elapsed_s) and the result are the
// same for every thread count while the run is cut by `samples` rather than by the budget.
//
// Thread safety: run_hsdag is reentrant (concurrent runs need distinct `curve` paths).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dplace/placers/hsdag/network.h"
#include "dplace/placers/learning/groupings.h"
#include "dplace/placers/placer.h"
#include "dplace/placers/search/anneal.h"

namespace dplace {

struct HsdagOptions {
  // levels 1; shared_weights "merged" or "apart". Default: groupings.h's, "merged".
  LearningGroupingOptions grouping;
  hsdag::NetworkConfig network;
  int batch = 16;                // K placements per update, at least 2. Default: 16.
  double learning_rate = 0.001;  // Adam. Default: 0.001.
  double entropy_weight = 0.01;  // beta. Default: 0.01.
  // b <- decay * b + (1 - decay) * batch mean reward. Default: 0.5.
  double baseline_decay = 0.5;
  // Stop at the first whole batch that reaches this many samples; 0: the budget only. Default: 0.
  int64_t max_samples = 0;
  // Updates without a new best before fresh weights; 0: never. Default: 400.
  int64_t restart_patience = 400;
  size_t threads = 0;  // simulation workers; 0: hardware concurrency. Default: 0.
  std::string curve;   // learning-curve CSV path; empty: none. Default: empty.
  // Polishing, as rl's and post's (search/anneal.h, learn_then_polish); evaluations 0: off.
  PolishOptions polish;
  double progress_seconds = 2;  // seconds between progress lines (with --progress). Default: 2.
};

// Reads --param key=value pairs: groups, sole-consumer, sole-consumer-limit, cap,
// cap-transfer-scale, shared-weights, hidden, layers, parse, init-scale, batch, lr, entropy,
// baseline-decay, samples, restart-patience, threads, curve, polish, polish-share, polish-rounds,
// progress-seconds (bounds: batch >= 2, lr <= 1, init-scale >= 0.001, hidden <= 1024, layers <=
// 16, groups <= 65536). Throws ConfigError naming the key for an unknown key or a bad value.
HsdagOptions hsdag_options_from_params(const std::map<std::string, std::string>& params);

// One row of the learning curve (one update).
struct HsdagCurvePoint {
  int64_t update = 0;
  int64_t samples = 0;  // after this batch
  double elapsed_s = 0;
  double mean_step_time_s = 0;        // batch mean, OOM placements at their charge
  double batch_best_step_time_s = 0;  // ditto
  double best_step_time_s = 0;        // best ever, ditto
  double oom_fraction = 0;
  double entropy = 0;  // mean per-cluster entropy of the distribution the batch was sampled from
  int clusters = 0;    // clusters the parsing made for this batch
  int64_t restarts = 0;
};

struct HsdagRun {
  PlaceResult result;  // the learned placement (not polished)
  size_t coarse_nodes = 0;
  int64_t samples = 0;
  int64_t evaluations = 0;  // simulations run (repeated placements are simulated once)
  int64_t updates = 0;
  int64_t restarts = 0;
  double seconds = 0;
  double policy_seconds = 0;    // forward, sampling and backward passes
  double evaluate_seconds = 0;  // simulations
  double best_step_time_s = 0;  // OOM at its charge
  bool best_feasible = false;
  std::vector<HsdagCurvePoint> curve;
  // The most likely placement under the final network (each cluster's likeliest device, the
  // first of equal ones), and that forward pass's cluster count. After a restart in the last
  // update: the fresh network's.
  Placement mode_placement;
  int mode_clusters = 0;
};

// Learns on request.graph / request.cluster within request.budget_seconds (request.seed,
// request.progress) and returns the best placement sampled. No polishing. At least one batch is
// sampled, whatever the budget; exactly one when every coarse node may use one device only.
// A network whose outputs are no longer finite starts again (counted as a restart). Throws
// ConfigError, before learning, when one update would take more than 2e10 multiply-adds or the
// network, a batch and the cache more than 4 GB.
HsdagRun run_hsdag(const PlaceRequest& request, const HsdagOptions& options);

}  // namespace dplace
