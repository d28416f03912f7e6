// anneal: simulated annealing over colocation-group moves with the simulator as the objective
// (Kirkpatrick, Gelatt and Vecchi, Science 1983). The strongest non-learning placer in dplace and
// the bar a learning placer must clear.
//
// Starts: the candidates are the expert placement (when given) and the results of every classic
// placer but m-sct (single-gpu, m-etf, heft, m-topo, scotch, mincut, metis, round-robin,
// single-cpu). With --param start=best (the default) one search runs from each of the `starts`
// (Default: 2) least-cost candidates, side by side, and the best result is kept; the search from
// the least-cost one is the same as with starts=1. --param start=NAME runs one search from NAME.
// Cost of a placement: its simulated step time; an OOM placement costs
//   step + P * (1 + 10 * overflow / capacity of the overflowing devices),
// where P is twice the larger of the fastest start's step time and the simulator's lower bound,
// so any fitting placement beats any OOM one of similar speed. Fitting starts rank before OOM
// ones. The result is the best fitting placement simulated, whether its move was accepted or not
// (the least-cost one when none fits).
// Moves (each proposes new devices for whole colocation groups; the seed group is one that allows
// more than one device; a size L is log-uniform in [1, block_size]):
//   30% move one group to another allowed device;
//   20% pull one group onto the device of a neighbour (a group it exchanges tensors with);
//   25% move a block: the group and up to L - 1 groups reached from it, breadth first, through
//       neighbours on the same device, to another device (those of them that allow it);
//   25% move a segment: the L groups from the seed on in topological group order (GroupGraph::
//       order) to another device (those that allow it): a pipeline-boundary move.
// A move is accepted when it does not raise the cost, else with probability exp(-delta / T); T
// falls geometrically from t_start * start cost to t_end * start cost over the evaluations.
//
// Determinism: the move sequence depends only on --seed and the evaluation count, so a run that
// finishes its evaluations gives the same placement on any machine. --budget-seconds is only a
// safety cap: a run that hits it stops early, says so in the note, and then depends on speed.
//
// Parameters (--param): evaluations (Default: clamp(1e8 / (ops + edges), 2000, 20000)),
// t_start (Default: 1e-4), t_end (Default: 1e-6), block_size (Default: max(8, groups / 8)),
// start (Default: best), starts (Default: 2), rounds (Default: 1) and threads (Default: all
// cores): AnnealOptions.
//
// anneal_from() runs the same search from a given placement (the rl and post placers polish their
// results with it, through polish_learned), after whole-device moves that single-group moves cannot
// make: merges (every group on device a that allows device b moves to b) and swaps (a's groups go
// to b and b's to a, those that allow it). Each pass simulates every merge and swap and takes the
// best when it beats the placement so far (by at least 1% when both fit: near-ties of symmetric
// devices are left alone); the passes stop when one finds nothing so (at most one pass per device).
// So a placement that is all on a slow device, with a latency barrier around every single move,
// becomes the same placement on the fast one (docs/rl.md, "Known weak case").
//
// Thread safety: a placer object runs one place() at a time; anneal_from is reentrant.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dplace/ir/graph.h"
#include "dplace/placers/placer.h"

namespace dplace {

std::unique_ptr<Placer> make_anneal_placer();

struct AnnealOptions {
  int64_t evaluations = 20000;  // moves tried. REQUIRES: >= 0
  double t_start = 1e-4;        // temperatures, relative to the start's cost
  double t_end = 1e-6;
  int64_t block_size = 0;  // largest block or segment move; 0: max(8, groups / 8). Default: 0.
  // Rounds (not in Kirkpatrick et al.): more searches of `evaluations` moves each, in waves of two
  // from the best placement so far: one at these temperatures, one at ten times t_start, with
  // seeds seed + 2w and seed + 2w + 1, side by side on `threads` (at most two are used; 0: all
  // cores; the result does not depend on it). Stops after `rounds` rounds, after a wave that found
  // nothing better, or at the budget. 1: the single search. Default: 1.
  int rounds = 1;
  size_t threads = 0;
  // Starts each progress line (with --progress), followed by the round when there are several.
  std::string progress_label = "anneal";
};

// Simulated annealing from `start` (REQUIRES: a valid placement for the request's graph and
// cluster; start_name names it in the note), with the OOM penalty scale taken from the start.
// Uses request.seed, request.budget_seconds (a cap, reported in the note) and request.progress;
// ignores request.params and request.expert. The whole-device moves come first (see above); the
// note begins with them ("whole-device moves: /cpu:0 onto /gpu:0 (3.24e-09 s to 3.24e-11 s); "
// or "whole-device moves: none 1% faster; "). The result is the best placement seen, the start
// included, so it is never worse than the start; evaluations count every simulation, the start's
// included.
PlaceResult anneal_from(const PlaceRequest& request, const std::string& start_name,
                        const Placement& start, const AnnealOptions& options);
// The default of --param evaluations for this graph.
int64_t default_anneal_evaluations(const Graph& graph);

// The learning placers' default polishing effort (rl, post, hsdag), in multiples of
// default_anneal_evaluations.
inline constexpr int64_t kPolishFactor = 10;

// How much of a learning placer's run polishes its result.
struct PolishOptions {
  // Annealing moves; -1: kPolishFactor x default_anneal_evaluations; 0: no polishing. Default: -1.
  int64_t evaluations = -1;
  double share = 0.1;  // of the budget; the learning stops at (1 - share). Default: 0.1.
  int rounds = 8;      // AnnealOptions::rounds. Default: 8.
};

// The polishing of a learning placer's result (rl, post, hsdag): anneal_from the learned placement
// with what is left of request.budget_seconds since `start` (none left: the whole-device moves and
// the start alone), its evaluations added to learned.evaluations and its note appended to
// learned.note as "; polished by anneal: learned 0.31 s, polished 0.3 s in 6.1 s (<anneal's
// note>)". `placer` names the start in anneal's note.
PlaceResult polish_learned(const PlaceRequest& request, const std::string& placer,
                           const PlaceResult& learned, std::chrono::steady_clock::time_point start,
                           const AnnealOptions& options);

// A learning placer's run (post, hsdag): `learn` on the request with (1 - polish.share) of its
// budget, then polish_learned with polish.evaluations moves in polish.rounds rounds on `threads`
// workers; with no polishing, `learn` gets the whole budget and its result is returned as is.
PlaceResult learn_then_polish(const PlaceRequest& request, const std::string& placer,
                              const PolishOptions& polish, size_t threads,
                              const std::function<PlaceResult(const PlaceRequest&)>& learn);

// The names --param start=best chooses among, in the order that breaks ties between equal-cost
// starts: placer names, and "expert" for the expert placement.
const std::vector<std::string>& anneal_start_candidates();

}  // namespace dplace
