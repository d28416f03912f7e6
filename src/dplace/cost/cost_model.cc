#include "dplace/cost/cost_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>

#include "dplace/core/error.h"

namespace dplace {

double op_time_s(const Graph& graph, OpId id, const Device& device) {
  const Op& op = graph.op(id);
  for (const TimeOverride& t : op.time_s) {
    if (t.device == device.name) return t.time_s;
  }
  const std::string_view kind = device_kind_name(device.kind);
  for (const TimeOverride& t : op.time_s) {
    if (t.device == kind) return t.time_s;
  }
  const double flops = op.flops;
  const double bytes = graph.bytes_accessed(id);
  if (flops == 0 && bytes == 0) return 0;
  const double eff = device.efficiency_for(op.type);
  const double compute_s = flops / (device.peak_flops * eff);
  const double memory_s = bytes / device.mem_bandwidth_bytes_per_s;
  return device.op_overhead_s + std::max(compute_s, memory_s);
}

double transfer_time_s(int64_t bytes, const Link& link) {
  return link.latency_s + static_cast<double>(bytes) / link.bandwidth_bytes_per_s;
}

bool op_allows_device(const Op& op, const Device& device) {
  if (op.devices.empty()) return true;
  const std::string_view kind = device_kind_name(device.kind);
  for (const std::string& d : op.devices) {
    if (d == kind || d == device.name) return true;
  }
  return false;
}

CostTable::CostTable(const Graph& graph, const Cluster& cluster)
    : num_ops_(graph.num_ops()), num_devices_(cluster.num_devices()) {
  times_.assign(num_ops_ * num_devices_, kInfiniteTime);
  fastest_.assign(num_ops_, kInfiniteTime);
  for (size_t i = 0; i < num_ops_; ++i) {
    const OpId id = OpId::from_index(i);
    const Op& op = graph.op(id);
    for (size_t d = 0; d < num_devices_; ++d) {
      const Device& device = cluster.device(DeviceId::from_index(d));
      if (!op_allows_device(op, device)) continue;
      const double t = op_time_s(graph, id, device);
      times_[i * num_devices_ + d] = t;
      fastest_[i] = std::min(fastest_[i], t);
    }
    if (fastest_[i] == kInfiniteTime) {
      throw ConfigError(
          fmt::format("graph '{}': op '{}': no device of cluster '{}' is allowed (devices: {})",
                      graph.name(), op.name, cluster.name(), fmt::join(op.devices, ", ")));
    }
  }

  group_devices_.resize(graph.num_groups());
  std::vector<uint8_t> common(num_devices_);
  for (size_t g = 0; g < graph.num_groups(); ++g) {
    const GroupId gid = GroupId::from_index(g);
    std::fill(common.begin(), common.end(), 1);
    for (OpId id : graph.group_ops(gid)) {
      size_t left = 0;
      for (size_t d = 0; d < num_devices_; ++d) {
        common[d] = common[d] && allowed(id, DeviceId::from_index(d));
        left += common[d];
      }
      if (left == 0) {
        throw ConfigError(
            fmt::format("graph '{}': colocation group '{}': op '{}' (devices: {}) shares no "
                        "allowed device of cluster '{}' with the group's earlier ops",
                        graph.name(), graph.group_name(gid), graph.op(id).name,
                        fmt::join(graph.op(id).devices, ", "), cluster.name()));
      }
    }
    for (size_t d = 0; d < num_devices_; ++d) {
      if (common[d]) group_devices_[g].push_back(DeviceId::from_index(d));
    }
  }
}

}  // namespace dplace
