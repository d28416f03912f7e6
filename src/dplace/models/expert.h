// Internal helpers for the models' expert placements. Every helper places whole colocation
// groups, so a training graph's backward and update ops follow their forward op, and the
// result is valid for any cluster (no op of the built-in models restricts its device).
//
// Thread safety: pure functions.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/ir/graph.h"
#include "dplace/sim/placement.h"

namespace dplace::models {

// The cluster's GPUs in cluster order; when it has none, its accelerators; when it has neither,
// its first device alone.
std::vector<DeviceId> expert_devices(const Cluster& cluster);

// Component `index` of a '/'-separated name ("" when it has fewer components).
std::string_view name_component(std::string_view name, size_t index);

// Places each colocation group by the name of its first op: slot(name) is an index into
// `devices` (taken modulo its size).
Placement place_by_name(const Graph& graph, const std::vector<DeviceId>& devices,
                        const std::function<size_t(std::string_view op_name)>& slot);

// The conventional model-parallel split: blocks (the first name component of each group's first
// op, in order of first appearance) are cut into devices.size() contiguous stages of about equal
// work (the flops of every op in the block's groups, backward and update included). A block goes
// to the stage where the midpoint of its work falls.
Placement contiguous_split(const Graph& graph, const std::vector<DeviceId>& devices);

// Device slot of layer `layer` of `layers` over `slots` devices: the layer's own slot when there
// are enough, else the layers cut evenly into `slots` contiguous stages.
size_t layer_slot(size_t layer, size_t layers, size_t slots);

}  // namespace dplace::models
