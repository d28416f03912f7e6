// The cost model of docs/simulator.md, precomputed as a table for one (graph, cluster) pair.
//
//   time(op, d) = op.time_s[d.name], else op.time_s[d.kind], else
//                 0 if the op has no flops and no bytes_accessed, else
//                 d.op_overhead_s + max(flops / (d.peak_flops * eff), bytes_accessed /
//                 d.mem_bandwidth)
//   where eff = d.efficiency[op.type] or d.efficiency["default"] or 1.
//   transfer(bytes, a->b) = link(a, b).latency_s + bytes / link(a, b).bandwidth_bytes_per_s.
//
// An op may run on device d when op.devices is empty or lists d's kind or d's name.
//
// Thread safety: a built CostTable is immutable and safe to share.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/core/ids.h"
#include "dplace/ir/graph.h"

namespace dplace {

inline constexpr double kInfiniteTime = std::numeric_limits<double>::infinity();

// The formula for one op on one device, ignoring whether the device is allowed.
double op_time_s(const Graph& graph, OpId op, const Device& device);
// latency + bytes / bandwidth.
double transfer_time_s(int64_t bytes, const Link& link);
// Whether op.devices permits the device.
bool op_allows_device(const Op& op, const Device& device);

class CostTable {
 public:
  // Throws ConfigError "graph '<graph>': op '<name>': no device of cluster '<c>' is allowed
  // (devices: ...)" when an op has no allowed device, and the same for a colocation group whose
  // ops' allowed sets do not intersect.
  CostTable(const Graph& graph, const Cluster& cluster);

  size_t num_ops() const { return num_ops_; }
  size_t num_devices() const { return num_devices_; }

  bool allowed(OpId op, DeviceId d) const { return time_s(op, d) != kInfiniteTime; }
  // Execution time, or kInfiniteTime when the op may not run on d.
  double time_s(OpId op, DeviceId d) const { return times_[op.value() * num_devices_ + d.value()]; }
  // Minimum over allowed devices.
  double fastest_time_s(OpId op) const { return fastest_[op.value()]; }
  // Devices every op of the group may use, in cluster order (non-empty).
  const std::vector<DeviceId>& group_devices(GroupId g) const { return group_devices_[g.value()]; }

 private:
  size_t num_ops_ = 0;
  size_t num_devices_ = 0;
  std::vector<double> times_;
  std::vector<double> fastest_;
  std::vector<std::vector<DeviceId>> group_devices_;
};

}  // namespace dplace
