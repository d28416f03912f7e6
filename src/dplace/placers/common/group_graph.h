// The group quotient graph shared by the classic placers: one vertex per colocation group
// (Graph::group_of), with per-device compute time, memory figures and byte-weighted edges.
//
// Definitions (all derived from the graph and the cost table, nothing measured):
//  * time_s(g, d): sum over the group's ops of CostTable::time_s(op, d); kInfiniteTime when d is
//    not in CostTable::group_devices(g).
//  * reference_time_s(g): sum over the group's ops of their fastest allowed time; the compute
//    weight partitioners balance.
//  * edge bytes between groups a != b: for every tensor produced in a, its bytes once per distinct
//    consumer group b (the simulator moves a tensor once per destination device). neighbors() is
//    undirected: the bytes of a->b and b->a are summed.
//  * memory: param_bytes(g) is resident all step; memory_upper_bytes(g) = params + every output
//    + the largest temp_bytes, an upper bound on what the group's own ops can hold at once.
//  * order(): groups sorted by the smallest Graph::topo_rank of their ops (a topological order of
//    the groups whenever the quotient graph is acyclic).
//  * relative_speed(d): sum of fastest op times / sum of op times on d, over the ops d allows;
//    1.0 for the fastest device, 0.2 for one five times slower on this graph.
//
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/cost/cost_model.h"
#include "dplace/ir/graph.h"

namespace dplace {

struct GroupNeighbor {
  GroupId group;
  int64_t bytes = 0;  // both directions summed
};

class GroupGraph {
 public:
  GroupGraph(const Graph& graph, const Cluster& cluster, const CostTable& costs);

  size_t num_groups() const { return num_groups_; }
  size_t num_devices() const { return num_devices_; }

  double time_s(GroupId g, DeviceId d) const {
    return time_s_[g.value() * num_devices_ + d.value()];
  }
  bool allows(GroupId g, DeviceId d) const { return time_s(g, d) != kInfiniteTime; }
  const std::vector<DeviceId>& allowed(GroupId g) const { return costs_.group_devices(g); }
  // The allowed device on which the group runs fastest (ties: the first in cluster order).
  DeviceId fastest_allowed_device(GroupId g) const;
  double reference_time_s(GroupId g) const { return reference_time_s_[g.value()]; }

  int64_t param_bytes(GroupId g) const { return param_bytes_[g.value()]; }
  int64_t output_bytes(GroupId g) const { return output_bytes_[g.value()]; }
  int64_t max_temp_bytes(GroupId g) const { return max_temp_bytes_[g.value()]; }
  int64_t memory_upper_bytes(GroupId g) const {
    return param_bytes(g) + output_bytes(g) + max_temp_bytes(g);
  }

  // Neighbours ascending by group id.
  std::span<const GroupNeighbor> neighbors(GroupId g) const {
    return {neighbors_.data() + neighbor_offsets_[g.value()],
            neighbors_.data() + neighbor_offsets_[g.value() + 1]};
  }
  int64_t total_edge_bytes() const { return total_edge_bytes_; }

  std::span<const GroupId> order() const { return order_; }
  double relative_speed(DeviceId d) const { return relative_speed_[d.value()]; }

 private:
  const CostTable& costs_;
  size_t num_groups_ = 0;
  size_t num_devices_ = 0;
  std::vector<double> time_s_;
  std::vector<double> reference_time_s_;
  std::vector<int64_t> param_bytes_;
  std::vector<int64_t> output_bytes_;
  std::vector<int64_t> max_temp_bytes_;
  std::vector<uint32_t> neighbor_offsets_;
  std::vector<GroupNeighbor> neighbors_;
  int64_t total_edge_bytes_ = 0;
  std::vector<GroupId> order_;
  std::vector<double> relative_speed_;
};

}  // namespace dplace
