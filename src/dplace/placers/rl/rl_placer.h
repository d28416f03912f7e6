// The reinforcement-learning placer of Mirhoseini et al., "Device Placement Optimization with
// Reinforcement Learning" (ICML 2017), placer name `rl`. See docs/rl.md.
//
//  1. Grouping: ir/coarsening.h (colocation groups, the sole-consumer merge, capped to `groups`),
//     at several nested levels: the policy places coarse groups first, then finer ones.
//  2. Group embeddings: placers/learning/features.h (op-type counts, output sizes, adjacency).
//  3. Policy: policy.h (LSTM encoder, attentional LSTM decoder emitting one device per group).
//  4. Training: REINFORCE on reward -sqrt(step time / lower bound) with an exponential moving
//     average baseline; K placements sampled per update in one batched forward pass and evaluated
//     concurrently (simulator or --param measure-cmd); OOM placements get a fixed large step time;
//     Adam with gradient-norm clipping; an entropy bonus that decays to zero; the best placement
//     ever seen (and the final greedy decoding, if better) is returned. A converged policy that
//     stops finding better placements restarts from fresh weights (restart_patience).
//  5. Polishing (by the registered placer in registration.cc, not by run_rl): whole-device moves,
//     then rounds of simulated annealing from the learned placement (search/anneal.h,
//     polish_learned; RlOptions::polish_evaluations, polish_rounds).
//
// Options come from PlaceRequest::params (the CLI's --param key=value); rl_options_from_params
// lists them. Determinism: for one seed, the sequence of sampled placements, the learning curve
// and the result are identical for every thread count, as long as the run is cut by `samples`
// rather than by the wall-clock budget (which stops after a time-dependent number of updates).
//
// This header does not include LibTorch.
// Thread safety: run_rl is reentrant; a policy object lives inside one call.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dplace/placers/placer.h"
#include "dplace/placers/rl/reward.h"

namespace dplace::rl {

struct RlOptions {
  size_t groups = 256;  // groups placed at the finest level. Default: 256.
  // Stage 2 of the grouping (ir/coarsening.h), the paper's merge of an op into its sole consumer:
  // "full" (the paper's rule), "chains" (only along chains: no merge of several producers fanning
  // into one consumer group), "limited" (the paper's rule, but no merge builds a group heavier
  // than sole_consumer_limit times the average group at `groups`) or "off". Default: chains (see
  // docs/rl.md for the measurements behind the defaults).
  std::string sole_consumer = "chains";
  double sole_consumer_limit = 64;  // for "limited". Default: 64.
  // Stage 3 of the grouping: "lightest" merges the lightest joined pair, "communication" the pair
  // exchanging the most time in tensors beyond the lighter one's compute, tensors costed on the
  // cluster's median link times cap_transfer_scale. Default: communication, 0.3.
  std::string cap = "communication";
  double cap_transfer_scale = 0.3;
  // Shared weights in the grouping (not in the paper): "apart" keeps the colocation group of every
  // shared weight (an op with no inputs that holds parameters and is read by more than one forward
  // op, e.g. an LSTM kernel read at every time step, with its gradient sums and optimizer update)
  // out of stages 2 and 3, a group of its own at every level; "merged" groups it like any other;
  // "alternate" builds both groupings and switches between them at each restart (merged first),
  // keeping the best placement of either (a graph without shared weights has one grouping).
  // Default: alternate (apart alone wins on some graphs and seeds and loses on others; docs/rl.md).
  std::string shared_weights = "alternate";
  // Levels of grouping (not in the paper): the policy first places `groups` >> (levels - 1)
  // groups, then, each time it converges (see restart_patience), the next finer nested grouping
  // (twice as many groups), warm-started on the best placement so far by init_steps steps of
  // maximum likelihood, up to `groups`; from the finest level it restarts at the coarsest with
  // fresh weights. 1: one level of `groups`, as in the paper. Default: 4.
  int levels = 4;
  int batch = 16;             // K placements sampled per update. Default: 16.
  int64_t max_samples = 0;    // stop after this many samples in total (0: budget only). Default: 0.
  int hidden = 64;            // LSTM / attention width. Default: 64 (see docs/rl.md).
  int device_embedding = 16;  // Default: 16.
  double learning_rate = 0.003;  // Adam. Default: 0.003.
  double grad_clip = 1.0;        // global gradient-norm cap; 0: off. Default: 1.0.
  // Entropy bonus (per group decision, next to advantages of unit scale): entropy_weight at the
  // start, falling linearly to entropy_final over the first entropy_samples samples.
  double entropy_weight = 0.01;    // Default: 0.01.
  double entropy_final = 0;        // Default: 0.
  int64_t entropy_samples = 2000;  // Default: 2000.
  double baseline_decay = 0.5;     // EMA baseline b <- decay * b + (1 - decay) * mean reward.
  // Convergence (not in the paper): once the policy's mean per-decision entropy is below
  // restart_entropy nats and restart_patience consecutive updates found no new best, it moves to
  // the next finer level (see `levels`) or, at the finest, starts over at the coarsest from fresh
  // weights (seeded from the seed and the restart count): a restart. Either way with a new
  // baseline and a new entropy schedule, keeping the best placement. 0: never. Default: 100
  // updates, 0.01 nats.
  int64_t restart_patience = 100;
  double restart_entropy = 0.01;
  // Self-imitation (not in the paper; Oh et al., ICML 2018): every batch also trains on the best
  // placement found so far, with advantage imitation * max(0, its reward - baseline) (then
  // normalised like the others), pulling the policy towards its best sample instead of letting it
  // settle on a worse one. 0: off. Default: 1.
  double imitation = 1;
  // Divide the advantages (reward - baseline) by the batch's reward standard deviation, so that
  // the step size does not shrink as the rewards of a converging policy get closer. Default: on.
  bool normalize_advantages = true;
  // Step time charged to an OOM placement. 0: twice an upper bound on any placement's step time
  // (all ops serially on their slowest devices plus every tensor sent serially to every other
  // device over the slowest link), so that any feasible placement is better. Default: 0.
  double oom_step_time_s = 0;
  // Worker threads: they evaluate the samples and, in between, run the policy's chunks (below).
  // 0: hardware concurrency. Default: 0.
  size_t threads = 0;
  // Samples per policy chunk: the policy decodes and back-propagates a batch in chunks of this
  // many samples on the workers (PolicyConfig::chunk); results do not depend on `threads`.
  // 0: half the batch, rounded up (two chunks, so two workers share the policy at any batch:
  // 8 at the default batch of 16, 4 at a batch of 8). Default: 0.
  int chunk = 0;
  std::string checkpoint;     // resume from / save to this file; empty: none. Default: none.
  int checkpoint_every = 25;  // updates between checkpoint saves (and one at the end).
  std::string curve;          // learning-curve CSV path; empty: none. Default: none.
  // Warm start (not in the paper): "expert" first trains the policy by maximum likelihood to
  // reproduce PlaceRequest::expert (the model's expert placement, or --placement FILE) projected
  // onto the (coarsest) groups, for init_steps Adam steps; "none" starts from random weights.
  // A move to a finer level warm-starts the same way on the best placement.
  std::string init = "none";  // Default: none.
  int init_steps = 200;       // Default: 200.
  std::string measure_cmd;    // external reward command (see reward.h); empty: the simulator.
  // Seconds after which one measurement is killed and its placement charged oom_step_time_s, as
  // for an OOM placement; 0: no limit of its own. Either way a measurement still running when
  // the budget ends is killed. Default: 0.
  double measure_timeout_s = 0;
  // Polishing (not in the paper; done by the registered placer `rl`, not by run_rl): the learned
  // placement is re-mapped by whole-device moves and refined by simulated annealing over
  // colocation-group moves (search/anneal.h, polish_learned) for polish_evaluations moves per
  // round, which places single ops and groups the policy's coarse groups cannot separate. -1:
  // kPolishFactor times anneal's default evaluations for the graph; 0: off (the paper's method
  // alone; forced with measure_cmd, whose reward the simulator cannot stand in for). The learning
  // stops at (1 - polish_share) of the budget so that the polishing has the rest. Default: -1, 0.1.
  int64_t polish_evaluations = -1;
  double polish_share = 0.1;
  // Annealing rounds of the polishing (search/anneal.h, AnnealOptions::rounds: waves of two from
  // the best so far, at anneal's temperatures and ten times hotter). Default: 8.
  int polish_rounds = 8;
  double progress_seconds = 2;  // seconds between progress lines (with --progress).
  // Not in the paper: a search space of at most this many placements (one device per group of
  // the finest grouping, among the devices each may use; a one-op graph, a one-device cluster, a
  // handful of groups) is enumerated instead of learned, and the best is exact. 0: always learn.
  // Default: 256.
  int64_t enumerate = 256;
};

// Reads options from --param key=value pairs. Keys: groups, sole-consumer (full/chains/limited/
// off), sole-consumer-limit, cap (lightest/communication), cap-transfer-scale, shared-weights
// (merged/apart/alternate), levels, batch, restart-patience, restart-entropy, imitation, samples,
// hidden, embedding, lr, clip, entropy, entropy-final, entropy-samples, baseline-decay, oom-time,
// normalize, threads, chunk, checkpoint, checkpoint-every, curve, init (none/expert), init-steps,
// measure-cmd, measure-timeout, polish, polish-share, polish-rounds, progress-seconds, enumerate
// (docs/rl.md
// has a table of them). Throws ConfigError for an unknown key or a bad value, naming both, and for
// polish > 0 together with measure-cmd.
RlOptions rl_options_from_params(const std::map<std::string, std::string>& params);

// One row of the learning curve (one policy update).
struct CurvePoint {
  int64_t update = 0;
  int64_t samples = 0;                // total, after this update
  double elapsed_s = 0;               // wall time since the run started (plus resumed time)
  double mean_step_time_s = 0;        // batch mean of penalised step times
  double batch_best_step_time_s = 0;  // batch minimum
  double best_step_time_s = 0;        // best ever, penalised
  double oom_fraction = 0;            // share of the batch that was OOM
  double entropy = 0;                 // mean per-group policy entropy (nats)
  double baseline = 0;                // after the update
  double policy_s = 0;                // cumulative time in sampling + updates
  double evaluate_s = 0;              // cumulative time evaluating placements
  int64_t restarts = 0;               // policy restarts so far
  int level = 0;                      // grouping level the update sampled (0: coarsest)
  int grouping = 0;                   // index in RlRun::groupings of the grouping it sampled
};

struct RlRun {
  PlaceResult result;
  // The groupings: one, or "merged" and "apart" with shared_weights=alternate.
  std::vector<std::string> groupings;
  std::vector<std::vector<size_t>> level_groups;  // per grouping: groups per level, coarsest first
  size_t num_groups = 0;                          // at the finest level of the first grouping
  size_t base_groups = 0;  // nested in every level of every grouping (num_groups if one grouping)
  size_t colocation_groups = 0;
  size_t after_sole_consumer = 0;
  int64_t samples = 0;      // total, including samples of a resumed checkpoint
  int64_t evaluations = 0;  // this call's placements evaluated (identical samples of a batch once)
  int64_t measure_timeouts = 0;  // measure-cmd runs killed at their time limit
  int64_t updates = 0;
  int64_t refinements = 0;  // moves to a finer level, including those of a resumed checkpoint
  double seconds = 0;       // this call's wall time
  double policy_seconds = 0;
  double evaluate_seconds = 0;
  // Mean over this call's updates of UpdateStats::decoder_rows_fraction (1: no prefix shared).
  double decoder_rows_fraction = 1;
  double best_step_time_s = 0;  // penalised
  bool best_feasible = false;
  // Device index per base group (base_groups). When no placement fits: of the OOM placements
  // evaluated, the one with the least memory over capacity, then the shortest step.
  std::vector<int32_t> best_group_devices;
  std::vector<int32_t> greedy_group_devices;  // the final policy's greedy decoding, ditto; or empty
  double greedy_step_time_s = 0;              // penalised
  // false: not decoded (greedy_abandoned, or after an enumeration), or measure-cmd and no budget
  // left to measure it.
  bool greedy_evaluated = true;
  bool greedy_abandoned = false;      // the decoding ran past the budget (see run_rl)
  double warm_start_step_time_s = 0;  // penalised; init=expert only
  Outcome warm_start_outcome;         // as evaluated; init=expert only
  // Non-empty when the budget ran out before a placement was sampled or decoded: what was
  // returned instead ("the expert placement on the groups", or "every group on the first device
  // it may use" when there is no expert).
  std::string fallback;
  bool resumed = false;
  // Non-empty: the policy's pass that --budget-seconds cut short ("the sampling of a batch", "the
  // update of a batch ...").
  std::string pass_cut;
  // Placements of the base groups when there are at most RlOptions::enumerate of them: all were
  // evaluated and nothing was learned (no policy updates). 0: the policy learned.
  int64_t enumerated = 0;
  int64_t enumerated_evaluated = 0;  // of those, evaluated before the budget ran out
  std::vector<CurvePoint> curve;     // this call's updates
};

// Trains the policy on request.graph / request.cluster and returns the best placement found.
// Uses request.seed, request.budget_seconds and request.progress (lines on stderr). Loads the
// LibTorch module (torch_module.h) first, outside the budget; throws ConfigError when it cannot.
RlRun run_rl(const PlaceRequest& request, const RlOptions& options);

}  // namespace dplace::rl
