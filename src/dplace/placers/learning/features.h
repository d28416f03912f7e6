// Group embeddings of the learning placers (rl, after Mirhoseini et al. 2017, section 3; hsdag):
// one fixed-length feature vector per coarse group, concatenating
//   * op-type counts over a type vocabulary learned from the graph (the `type_vocabulary` most
//     frequent op types, ties by name, plus one "other" slot), each log1p(count) / log1p(max);
//   * output-tensor sizes: the `output_slots` largest tensors the group sends to other groups,
//     descending, each log1p(bytes) / log1p(largest tensor of the graph), zero-padded;
//   * adjacency: the ids of up to `adjacency_slots` predecessor groups and as many successor
//     groups (those exchanging the most bytes first), each (id + 1) / num_groups, zero-padded;
//   * three scalars beyond the paper: the group's compute (sum of each op's fastest time) and its
//     parameter bytes, each log1p-normalised by the graph's largest group, and its position
//     id / num_groups.
// Also the allowed-device mask of each group (the devices every op of the group may use).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dplace/cost/cost_model.h"
#include "dplace/ir/coarsening.h"
#include "dplace/ir/graph.h"

namespace dplace {

struct FeatureOptions {
  int type_vocabulary = 32;  // Default: 32 types + "other".
  int output_slots = 8;      // Default: 8.
  int adjacency_slots = 6;   // per direction. Default: 6.
};

struct GroupFeatures {
  int num_groups = 0;
  int num_devices = 0;
  int feature_dim = 0;
  std::vector<float> values;            // num_groups x feature_dim, row-major
  std::vector<uint8_t> allowed;         // num_groups x num_devices, row-major
  std::vector<std::string> vocabulary;  // the learned op types, in feature order
};

// REQUIRES: coarsening was made from `graph`; costs from `graph` and its cluster; every coarse
// group has at least one device that all of its ops allow (true when coarsening merged only ops
// with equal allowed-device sets).
GroupFeatures make_group_features(const Graph& graph, const CostTable& costs,
                                  const Coarsening& coarsening, const FeatureOptions& options = {});

// The node features of the hand-written networks (hsdag, hierarchical), in double precision:
// make_group_features' columns; each device's time for the node (the sum of its ops') relative to
// its fastest allowed device, log(t_d / t_min) capped at 10 (10 for a device it may not use: what
// tells a CPU from a GPU); the node's position p = id / N in topological order as sin(2^j pi p)
// and cos(2^j pi p), j < 6, so that nodes alike in every other feature (the branches of a block)
// look different to a linear layer. Every column is standardised (mean 0, deviation 1; a column
// equal on every node is 0).
struct NodeFeatures {
  int feature_dim = 0;
  std::vector<double> values;           // num_groups x feature_dim, row-major
  std::vector<uint8_t> allowed;         // num_groups x num_devices, row-major
  std::vector<double> time_s;           // num_groups x num_devices: the sum of its ops' times
  std::vector<std::string> vocabulary;  // make_group_features' op types, in feature order
};

// REQUIRES: as make_group_features.
NodeFeatures make_node_features(const Graph& graph, const CostTable& costs,
                                const Coarsening& coarsening);

}  // namespace dplace
