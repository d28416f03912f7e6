// Graph coarsening: groups the ops of a Graph into a bounded number of coarse groups that a placer
// treats as units (the grouping step of Mirhoseini et al., ICML 2017).
//
// Three stages, each only ever merging whole groups, so every colocation group of the graph stays
// inside one coarse group (a placement made per coarse group is colocation-valid):
//  1. Colocation: start from Graph's colocation groups (ops sharing a `colocate` name).
//  2. Sole consumer (the paper's heuristic): an op whose outputs are all consumed by one single op
//     joins that consumer's group. Chains of such ops collapse into their final consumer, unless
//     the merged group would exceed `sole_consumer_max_weight`. With `sole_consumer_chains_only`,
//     the op joins only along a chain: when no other working op (op_weight > 0) outside the two
//     groups feeds the consumer, and the consumer's group has not already taken in another
//     working group this way. Producers fanning in (a gradient sum, the branches of a concat, the
//     time steps of a shared weight's gradient) then stay apart; followed one merge at a time,
//     the paper's rule would collapse them all into the consumer's group.
//  3. Cap: while there are more than `target_groups` groups, merge the pair of groups joined by a
//     dataflow edge that `cap_merge` ranks first (ties: the pair whose earlier group comes first
//     in topological order); when no joined pair is left (disconnected components) the lightest
//     pair of groups adjacent in the topological order merges instead.
//       kLightestPair: the smallest combined weight, which keeps groups of similar weight.
//       kCommunication: the largest communication(a, b) - min(weight(a), weight(b)), where
//         communication is the time the tensors crossing between the two groups would take to
//         send (each tensor once per receiving group, `transfer_latency` plus bytes times
//         `transfer_weight_per_byte`): groups that exchange more than the lighter one computes
//         merge first, so a layer's time steps stay together and separate from the next layer.
// Stages 2 and 3 merge two groups only when their `merge_class` is equal (e.g. ops allowed on the
// same devices), so a coarse group never combines ops that could not share a device.
//
// Levels: coarsen_graph_levels() returns the groupings at several targets from one run of stage
// 3, so that each coarser grouping is a union of groups of every finer one (nested).
//
// Coarse groups are numbered in topological order: by the smallest topo rank of their ops.
// The result is deterministic: it depends only on the graph and the options.
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dplace/core/ids.h"
#include "dplace/ir/graph.h"

namespace dplace {

struct CoarseningOptions {
  // Upper bound on the number of coarse groups; 0 means no cap (stages 1-2 only). The result can
  // have more groups than this only when incompatible merge classes prevent further merging.
  // Default: 256.
  size_t target_groups = 256;
  // Stage 2 on or off. Default: true.
  bool merge_sole_consumer = true;
  // Stage 2 skips a merge whose group would weigh more than this; 0: no limit. (On training
  // graphs, where backward ops are colocated with their forward ops, chains of gradient ops with
  // sole consumers otherwise fuse the colocation groups of many layers into a few huge groups.)
  // Default: 0.
  double sole_consumer_max_weight = 0;
  // Stage 2 only along chains (see above). Default: false (the paper's rule).
  bool sole_consumer_chains_only = false;
  // Stage 3's ranking of merges (see above). Default: kLightestPair.
  enum class CapMerge { kLightestPair, kCommunication };
  CapMerge cap_merge = CapMerge::kLightestPair;
  // kCommunication's estimate of the cost of sending one tensor, in the units of op_weight:
  // transfer_latency + bytes * transfer_weight_per_byte. Default: 0, 0.
  double transfer_weight_per_byte = 0;
  double transfer_latency = 0;
  // Weight of each op (e.g. its fastest execution time), indexed by OpId; empty means 1 per op.
  // A group's weight is the sum of its ops'. Default: empty.
  std::vector<double> op_weight;
  // Per colocation group (indexed by Graph GroupId): groups merge only within one class; empty
  // means every group is in class 0. Default: empty.
  std::vector<uint32_t> merge_class;
};

struct Coarsening {
  // Coarse group of each op, indexed by OpId; values in [0, num_groups).
  std::vector<GroupId> group_of_op;
  size_t num_groups = 0;
  // Ops of each coarse group, ascending by op index.
  std::vector<std::vector<OpId>> group_ops;
  // Group counts after each stage, for reporting.
  size_t colocation_groups = 0;
  size_t after_sole_consumer = 0;
};

// REQUIRES: options.op_weight is empty or has graph.num_ops() entries; options.merge_class is
// empty or has graph.num_groups() entries (checked with DPLACE_CHECK).
Coarsening coarsen_graph(const Graph& graph, const CoarseningOptions& options = {});

// One grouping per entry of `targets` (in that order), all from one run of the three stages with
// options.target_groups ignored: stage 3 merges down to each target in turn, from the largest to
// the smallest, so a grouping for a smaller target is a union of groups of any larger one. A
// target of 0 (or one above the groups left after stage 2) gives the uncapped grouping.
std::vector<Coarsening> coarsen_graph_levels(const Graph& graph, const CoarseningOptions& options,
                                             std::span<const size_t> targets);

// The coarsest grouping nested in every one of `groupings`: two ops share a group exactly when
// they share one in each. Groups are numbered by their smallest topo rank, as above;
// colocation_groups and after_sole_consumer are copied from the first grouping.
// REQUIRES: groupings is not empty and each was made from `graph` (checked with DPLACE_CHECK).
Coarsening common_refinement(const Graph& graph, std::span<const Coarsening> groupings);

}  // namespace dplace
