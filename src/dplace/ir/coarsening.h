// Graph coarsening: groups the ops of a Graph into a bounded number of coarse groups that a placer
// treats as units (the grouping step of Mirhoseini et al., ICML 2017).
//
// Three stages, each only ever merging whole groups, so every colocation group of the graph stays
// inside one coarse group (a placement made per coarse group is colocation-valid):
//  1. Colocation: start from Graph's colocation groups (ops sharing a `colocate` name).
//  2. Sole consumer (the paper's heuristic): an op whose outputs are all consumed by one single op
//     joins that consumer's group. Chains of such ops collapse into their final consumer, unless
//     the merged group would exceed `sole_consumer_max_weight`.
//  3. Cap: while there are more than `target_groups` groups, merge the two groups joined by a
//     dataflow edge whose combined weight is smallest (ties: the pair whose earlier group comes
//     first in topological order). This keeps groups of similar weight and merges only
//     neighbours; when no joined pair is left (disconnected components) the lightest pair of
//     groups adjacent in the topological order merges instead.
// Stages 2 and 3 merge two groups only when their `merge_class` is equal (e.g. ops allowed on the
// same devices), so a coarse group never combines ops that could not share a device.
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

}  // namespace dplace
