// The hierarchical planner: Mirhoseini, Goldie, Pham, Steiner, Le and Dean, "A Hierarchical Model
// for Device Placement" (ICLR 2018); placer name `hierarchical`. See docs/hierarchical.md.
//
// The units are the graph's colocation groups (TensorFlow's constraints, which the paper's planner
// also had to keep: an op with its gradient and update ops), and a learned grouper sorts them into
// G groups, which a seq2seq placer places (hierarchical/network.h). Beyond the paper, the grouping
// starts near a given one (HierarchicalOptions::prior; by default the learning placers' coarsening)
// rather than at random. Per update:
//  1. one grouper pass gives each unit a softmax over the G groups; each of the K samples draws
//     a group for every unit;
//  2. each sample's group embeddings (the parts the paper's code uses): the edges from the group
//     to every group and from every group to it (2G columns, counts of op-to-op edges, each
//     log1p(count) / log1p(all edges)), the op-type counts of its ops (a vocabulary of the 32
//     most frequent types and "other", log1p(count) / log1p(ops)), and, beyond the paper, its
//     share of the compute and of the parameter bytes (log1p(G share) / log1p(G)) and each
//     device's time for it relative to its fastest allowed one (log ratio / 10, capped at 1);
//  3. the placer gives each group a device (its allowed devices: those every unit of the group
//     may use; when none, those any may use, and a unit that may not use the group's device runs
//     on its own fastest one, as TensorFlow's soft placement does);
//  4. the K placements are simulated concurrently (placers/learning/evaluation.h: identical ones
//     once, the OOM charge, reward -sqrt(step time / lower bound));
//  5. REINFORCE on both networks with the same advantage (the paper's joint training): reward
//     minus an exponential-moving-average baseline, divided by the batch's reward spread, an
//     entropy bonus on both networks' distributions, the gradient clipped to a global norm, Adam.
// Not in the paper: a restart from fresh weights after restart_patience updates without a new
// best; the polishing of the result by whole-device moves and annealing, as for rl, post and
// hsdag (search/anneal.h; polish=0 gives the planner alone).
//
// Determinism: for one seed the samples, the curve (but its elapsed_s) and the result are the same
// for every thread count while the run is cut by `samples` rather than by the budget (gradients
// are summed in a fixed number of chunks, in a fixed order).
//
// Thread safety: run_hierarchical is reentrant (concurrent runs need distinct `curve` paths).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dplace/placers/placer.h"
#include "dplace/placers/search/anneal.h"

namespace dplace {

struct HierarchicalOptions {
  int groups = 0;           // G; 0: min(256, 20 x devices), the paper's code. Default: 0.
  int grouper_hidden = 64;  // Default: 64 (the paper's).
  int hidden = 64;          // placer width (even). Default: 64 (the paper: 512).
  double init_scale = 1;    // Default: 1.
  // Where the grouping starts (beyond the paper; the grouper learns from there): a fixed term
  // added to the grouper's logits, of strength s = prior_strength:
  //   "chunks": -(s / 2) (G (u + 1/2) / U - (g + 1/2))^2 for unit u (the u-th in topological
  //     order) and group g: soft contiguous stretches of the topological order;
  //   "coarsening": s for the unit's group in the learning placers' grouping at G groups
  //     (placers/learning/groupings.h, the grouping rl starts from), 0 for the others;
  //   "none": the paper's start, every grouping about as likely.
  // Default: "coarsening", 8.
  std::string prior = "coarsening";
  double prior_strength = 8;
  int batch = 16;                // K placements per update, at least 2. Default: 16.
  double learning_rate = 0.001;  // Adam. Default: 0.001.
  double entropy_weight = 0.01;  // beta. Default: 0.01.
  double grad_clip = 1;          // global gradient norm; 0: off. Default: 1 (the paper's code).
  // b <- decay * b + (1 - decay) * batch mean reward. Default: 0.5.
  double baseline_decay = 0.5;
  // Stop at the first whole batch that reaches this many samples; 0: the budget only. Default: 0.
  int64_t max_samples = 0;
  // Updates without a new best before fresh weights; 0: never. Default: 400.
  int64_t restart_patience = 400;
  size_t threads = 0;           // workers; 0: hardware concurrency. Default: 0.
  std::string curve;            // learning-curve CSV path; empty: none. Default: empty.
  PolishOptions polish;         // as rl's and post's (search/anneal.h); evaluations 0: off.
  double progress_seconds = 2;  // seconds between progress lines (with --progress). Default: 2.
};

// Reads --param key=value pairs: groups, grouper-hidden, hidden, init-scale, prior,
// prior-strength, batch, lr, entropy, grad-clip, baseline-decay, samples, restart-patience,
// threads, curve, polish, polish-share, polish-rounds, progress-seconds (bounds: groups 2..4096,
// hidden even 2..1024, grouper-hidden 1..1024, prior chunks|coarsening|none, prior-strength
// 0..1000, batch 2..4096, lr <= 1, init-scale >= 0.001). Throws ConfigError naming the key for an
// unknown key or a bad value.
HierarchicalOptions hierarchical_options_from_params(
    const std::map<std::string, std::string>& params);

// One row of the learning curve (one update).
struct HierarchicalCurvePoint {
  int64_t update = 0;
  int64_t samples = 0;  // after this batch
  double elapsed_s = 0;
  double mean_step_time_s = 0;        // batch mean, OOM placements at their charge
  double batch_best_step_time_s = 0;  // ditto
  double best_step_time_s = 0;        // best ever, ditto
  double oom_fraction = 0;
  double grouper_entropy = 0;  // mean per-unit entropy (nats) of the grouper's distributions
  double placer_entropy = 0;   // mean per-group entropy of the placer's, over the batch
  double used_groups = 0;      // groups holding at least one unit, batch mean
  int64_t restarts = 0;
};

struct HierarchicalRun {
  PlaceResult result;  // the learned placement (not polished)
  size_t units = 0;
  int groups = 0;
  int64_t samples = 0;
  int64_t evaluations = 0;  // simulations run (repeated placements are simulated once)
  int64_t updates = 0;
  int64_t restarts = 0;
  double seconds = 0;
  double policy_seconds = 0;    // network passes
  double evaluate_seconds = 0;  // simulations
  double best_step_time_s = 0;  // OOM at its charge
  bool best_feasible = false;
  std::vector<HierarchicalCurvePoint> curve;
  // The final networks' most likely placement: each unit's likeliest group, then the placer's
  // likeliest device step by step (the first of equal ones).
  Placement mode_placement;
};

// Learns on request.graph / request.cluster within request.budget_seconds (request.seed,
// request.progress) and returns the best placement sampled. No polishing. At least one batch is
// sampled, whatever the budget; exactly one when every unit may use one device only. The budget
// is checked between batches, and a batch that ends past it updates nothing. Networks whose
// outputs are no longer finite start again (counted as a restart). Throws ConfigError,
// before learning, when one update would take more than 2e10 multiply-adds or the networks and a
// batch more than 4 GB.
HierarchicalRun run_hierarchical(const PlaceRequest& request, const HierarchicalOptions& options);

}  // namespace dplace
