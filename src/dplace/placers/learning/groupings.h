// What the learning placers (rl, post) share: the groupings they place, and an upper bound on any
// placement's step time (from which they charge an OOM placement).
//
// Groupings follow the 2017 paper's grouping (ir/coarsening.h: colocation groups, the merge of an
// op into its sole consumer, a cap on the group count) with dplace's defaults (docs/rl.md,
// "Grouping"): stage 2 along chains, stage 3 by communication with tensors costed on the cluster's
// median link, ops allowed on different devices never merged. Two variants handle shared weights
// (an op with no inputs that holds parameters and is read by more than one forward op, e.g. an LSTM
// kernel read at every time step): "merged" groups them like any other op; "apart" keeps each
// one's colocation group (with its gradient sums and optimizer update) a group of its own.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/cost/cost_model.h"
#include "dplace/ir/coarsening.h"
#include "dplace/ir/graph.h"

namespace dplace {

struct LearningGroupingOptions {
  size_t groups = 256;  // groups at the finest level. Default: 256.
  // Stage 2: "full" (the paper's rule), "chains", "limited" (the paper's rule, no merge heavier
  // than sole_consumer_limit times the average group at `groups`) or "off". Default: chains.
  std::string sole_consumer = "chains";
  double sole_consumer_limit = 64;  // Default: 64.
  // Stage 3: "lightest" or "communication" (tensors costed on the median link times
  // cap_transfer_scale). Default: communication, 0.3.
  std::string cap = "communication";
  double cap_transfer_scale = 0.3;
  // "merged", "apart" or "alternate" (both, merged first). A graph without shared weights gets one
  // grouping, named "merged", whatever this says. Default: alternate.
  std::string shared_weights = "alternate";
  // Nested levels: groups >> (levels - 1), ..., groups >> 1, groups (each at least 2); levels with
  // as many groups as the next finer one are dropped. Default: 1.
  int levels = 1;
};

struct NamedGrouping {
  std::string name;                // "merged" or "apart"
  std::vector<Coarsening> levels;  // coarsest first, each nested in the next
};

// REQUIRES: costs were built from graph and cluster; options.levels >= 1; options.groups >= 2;
// option strings are
// among the values listed above (checked with DPLACE_CHECK).
std::vector<NamedGrouping> make_learning_groupings(const Graph& graph, const Cluster& cluster,
                                                   const CostTable& costs,
                                                   const LearningGroupingOptions& options);

// Whether an op is a shared weight (see above).
bool is_shared_weight(const Graph& graph, OpId op);

// An upper bound on the step time of any placement: every op on its slowest allowed device, one
// after another, then every tensor sent to every other device, one after another, over the slowest
// link (the simulator never idles while work is pending, so no schedule takes longer). At least
// 1 ns.
double step_time_upper_bound_s(const Graph& graph, const Cluster& cluster, const CostTable& costs);

}  // namespace dplace
