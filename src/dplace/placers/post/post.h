// Post: Gao, Chen and Li, "Post: Device Placement with Cross-Entropy Minimization and Proximal
// Policy Optimization" (NeurIPS 2018); placer name `post`. See docs/placers.md, "post".
//
// The policy is the paper's: one softmax per group over the devices it may use, independent across
// groups, f(d | u) = prod_m softmax(u_m)[d_m], starting from u = 0 (uniform). Its learning
// interleaves two steps (the paper's Algorithm 1), on batches of K placements sampled from f and
// evaluated concurrently by the simulator:
//  * proximal policy optimization (Schulman et al. 2017) after each batch: ppo_epochs Adam steps
//    on the clipped surrogate objective over the batch, one ratio per group decision (as PPO takes
//    one per action of a trajectory), the advantage of a placement being its reward
//    -sqrt(step time / lower bound) minus an exponential-moving-average baseline, divided by the
//    batch's reward standard deviation;
//  * cross-entropy minimisation every ce_every batches, instead of that batch's PPO step: the
//    elite (the best `elite` fraction, at least one, of the ce_every x K samples since the last
//    such step or restart; ties: the first sampled) gives each group the maximum-likelihood
//    distribution, its devices' frequencies among the elite, which is mixed with the uniform
//    distribution over the group's devices, (1 - mix) p + mix / D_m, and becomes the new
//    u = log p. Adam's moments start over.
// A batch whose samples all have the same reward leaves the distribution as it is.
// Not in the paper: the groupings (placers/learning/groupings.h, as rl's; with shared weights,
// "merged" and "apart" in turn, one per restart); a restart from the uniform distribution after
// restart_patience batches without a new best placement; identical placements simulated once
// (a cache of recent placements); the polishing of the result by whole-device moves and annealing,
// as for rl (search/anneal.h, polish_learned).
//
// An OOM placement is charged twice an upper bound on any placement's step time
// (groupings.h, step_time_upper_bound_s), so that every fitting placement beats it. The best
// placement seen is returned; when none fits, the OOM one with the least memory over capacity.
//
// Determinism: for one seed the samples, the curve (but its elapsed_s) and the result are the
// same for every thread count while the run is cut by `samples` rather than by the budget.
//
// Thread safety: run_post is reentrant (concurrent runs need distinct `curve` paths).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dplace/placers/learning/groupings.h"
#include "dplace/placers/placer.h"
#include "dplace/placers/search/anneal.h"

namespace dplace {

struct PostOptions {
  LearningGroupingOptions grouping;  // levels is always 1
  int batch = 16;                    // K placements per update. Default: 16.
  int ce_every = 8;     // batches per cross-entropy step (the paper's N / K). Default: 8.
  double elite = 0.1;   // fraction of the samples since the last CE step kept. Default: 0.1.
  double mix = 0.01;    // weight of the uniform distribution after a CE step. Default: 0.01.
  int ppo_epochs = 10;  // Adam steps per PPO update (the paper's "e.g., 10"). Default: 10.
  double clip = 0.2;    // PPO's clipping of the ratio to [1 - clip, 1 + clip]. Default: 0.2.
  double learning_rate = 0.01;     // Adam on the logits. Default: 0.01.
  double baseline_decay = 0.5;     // b <- decay * b + (1 - decay) * batch mean reward.
  int64_t max_samples = 0;         // stop after this many samples (0: budget only). Default: 0.
  int64_t restart_patience = 400;  // batches without a new best before a restart; 0: never.
  size_t threads = 0;              // simulation workers; 0: hardware concurrency.
  std::string curve;               // learning-curve CSV path; empty: none.
  // Polishing, as rl's (search/anneal.h, learn_then_polish); evaluations 0: off (the paper's
  // method alone).
  PolishOptions polish;
  double progress_seconds = 2;  // seconds between progress lines (with --progress).
};

// Reads --param key=value pairs: groups, sole-consumer, sole-consumer-limit, cap,
// cap-transfer-scale, shared-weights, batch, ce-every, elite, mix, epochs, clip, lr,
// baseline-decay, samples, restart-patience, threads, curve, polish, polish-share, polish-rounds,
// progress-seconds. Throws ConfigError naming the key for an unknown key or a bad value, and for
// ce-every x batch above 2^20.
PostOptions post_options_from_params(const std::map<std::string, std::string>& params);

// One row of the learning curve (one batch).
struct PostCurvePoint {
  int64_t update = 0;
  int64_t samples = 0;  // after this batch
  double elapsed_s = 0;
  double mean_step_time_s = 0;        // batch mean, OOM placements at their charge
  double batch_best_step_time_s = 0;  // ditto
  double best_step_time_s = 0;        // best ever, ditto
  double oom_fraction = 0;
  double entropy = 0;  // mean per-group entropy of the distribution the batch was sampled from
  // The batch ended with a cross-entropy step; else with PPO's epochs (none when epochs is 0 or
  // every sample of the batch had the same reward).
  bool ce_step = false;
  int64_t restarts = 0;
  int grouping = 0;  // index into PostRun::groupings
};

struct PostRun {
  PlaceResult result;  // the learned placement (not polished)
  std::vector<std::string> groupings;
  int64_t samples = 0;
  int64_t evaluations = 0;  // simulations run (repeated placements are simulated once)
  int64_t updates = 0;      // batches
  int64_t ce_steps = 0;
  int64_t restarts = 0;
  double seconds = 0;
  double policy_seconds = 0;    // sampling and updates
  double evaluate_seconds = 0;  // simulations
  double best_step_time_s = 0;  // OOM at its charge
  bool best_feasible = false;
  std::vector<PostCurvePoint> curve;
  // The most likely placement under the distribution the run ended with (after a restart in
  // the last batch: the uniform one's, every group on its first device).
  Placement mode_placement;
};

// Learns on request.graph / request.cluster within request.budget_seconds (request.seed,
// request.progress) and returns the best placement sampled. No polishing. At least one batch is
// sampled, whatever the budget. Throws ConfigError when a batch and the elite would hold more
// than 4 GB.
PostRun run_post(const PlaceRequest& request, const PostOptions& options);

}  // namespace dplace
