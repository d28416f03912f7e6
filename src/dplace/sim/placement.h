// A placement: one device per op. Valid for (graph, cluster) when every op is assigned, every op
// sits on a device it allows, every colocation group is on one device, and every pair of devices
// that must exchange a tensor has a link.
//
// Thread safety: plain value; check_placement is a pure function.
#pragma once

#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/core/ids.h"
#include "dplace/cost/cost_model.h"
#include "dplace/ir/graph.h"

namespace dplace {

struct Placement {
  std::vector<DeviceId> device_of_op;  // indexed by OpId; size == graph.num_ops()

  DeviceId operator[](OpId op) const { return device_of_op[op.value()]; }
  friend bool operator==(const Placement&, const Placement&) = default;
};

// Every op of each group on the group's device. REQUIRES: device_of_group.size() == num_groups.
Placement placement_from_groups(const Graph& graph, const std::vector<DeviceId>& device_of_group);
// The inverse: each group's device, read from its first op. REQUIRES: no group is split (as
// placement_problem checks).
std::vector<DeviceId> groups_from_placement(const Graph& graph, const Placement& placement);
// Every op on one device.
Placement single_device_placement(const Graph& graph, DeviceId device);

// Empty string when valid; otherwise one line naming the first problem found, e.g.
// "op 'mm' is on '/cpu:0' but allows only gpu" or "colocation group 'layer1' is split over
// '/gpu:0' and '/gpu:1'" or "tensor 'mm:0' must move '/gpu:0' -> '/gpu:1' but there is no link".
std::string placement_problem(const Graph& graph, const Cluster& cluster, const CostTable& costs,
                              const Placement& placement);
// placement_problem without the link part: entries, allowed devices, colocation groups.
std::string placement_structure_problem(const Graph& graph, const Cluster& cluster,
                                        const CostTable& costs, const Placement& placement);
// The link part of placement_problem alone: empty when every tensor that changes device has a
// link, else "tensor 'mm:0' must move '/gpu:0' -> '/gpu:1' but there is no link".
// Ops not assigned to a device of the cluster are skipped (placement_problem reports them).
std::string missing_link_problem(const Graph& graph, const Cluster& cluster,
                                 const Placement& placement);

}  // namespace dplace
