#include "dplace/placers/common/group_graph.h"

#include <algorithm>
#include <limits>

namespace dplace {

GroupGraph::GroupGraph(const Graph& graph, const Cluster& cluster, const CostTable& costs)
    : costs_(costs), num_groups_(graph.num_groups()), num_devices_(cluster.num_devices()) {
  const size_t n = graph.num_ops();
  time_s_.assign(num_groups_ * num_devices_, 0.0);
  reference_time_s_.assign(num_groups_, 0.0);
  param_bytes_.assign(num_groups_, 0);
  output_bytes_.assign(num_groups_, 0);
  max_temp_bytes_.assign(num_groups_, 0);

  std::vector<double> fastest_sum(num_devices_, 0.0), device_sum(num_devices_, 0.0);
  std::vector<uint32_t> first_rank(num_groups_, std::numeric_limits<uint32_t>::max());
  for (size_t i = 0; i < n; ++i) {
    const OpId op = OpId::from_index(i);
    const Op& o = graph.op(op);
    const size_t g = graph.group_of(op).value();
    for (size_t d = 0; d < num_devices_; ++d) {
      const double t = costs.time_s(op, DeviceId::from_index(d));
      time_s_[g * num_devices_ + d] += t;  // inf stays inf
      if (t != kInfiniteTime) {
        fastest_sum[d] += costs.fastest_time_s(op);
        device_sum[d] += t;
      }
    }
    reference_time_s_[g] += costs.fastest_time_s(op);
    param_bytes_[g] += o.param_bytes;
    for (int64_t b : o.output_bytes) output_bytes_[g] += b;
    max_temp_bytes_[g] = std::max(max_temp_bytes_[g], o.temp_bytes);
    first_rank[g] = std::min(first_rank[g], graph.topo_rank(op));
  }
  // A group may be disallowed on a device even when each op's time is finite there only if the
  // ops' allowed sets differ; the cost table's group_devices is the authority.
  // Each group's allowed devices are marked once: groups x devices, not groups x devices^2.
  std::vector<uint8_t> allowed_here(num_devices_);
  for (size_t g = 0; g < num_groups_; ++g) {
    std::fill(allowed_here.begin(), allowed_here.end(), 0);
    for (DeviceId d : costs.group_devices(GroupId::from_index(g))) allowed_here[d.value()] = 1;
    for (size_t d = 0; d < num_devices_; ++d) {
      if (!allowed_here[d]) time_s_[g * num_devices_ + d] = kInfiniteTime;
    }
  }
  relative_speed_.assign(num_devices_, 1.0);
  for (size_t d = 0; d < num_devices_; ++d) {
    if (device_sum[d] > 0) relative_speed_[d] = fastest_sum[d] / device_sum[d];
  }

  // Byte-weighted group edges: each tensor once per distinct consumer group.
  std::vector<std::vector<GroupNeighbor>> adj(num_groups_);
  std::vector<uint32_t> seen(num_groups_, std::numeric_limits<uint32_t>::max());
  uint32_t stamp = 0;
  for (size_t i = 0; i < n; ++i) {
    const OpId op = OpId::from_index(i);
    const GroupId a = graph.group_of(op);
    for (uint32_t k = 0; k < graph.num_outputs(op); ++k) {
      const TensorRef t{op, k};
      const int64_t bytes = graph.tensor_bytes(t);
      ++stamp;
      for (OpId c : graph.consumers(t)) {
        const GroupId b = graph.group_of(c);
        if (b == a || seen[b.value()] == stamp) continue;
        seen[b.value()] = stamp;
        adj[a.value()].push_back({b, bytes});
        adj[b.value()].push_back({a, bytes});
        total_edge_bytes_ += bytes;
      }
    }
  }
  neighbor_offsets_.assign(num_groups_ + 1, 0);
  for (size_t g = 0; g < num_groups_; ++g) {
    std::vector<GroupNeighbor>& list = adj[g];
    std::sort(list.begin(), list.end(),
              [](const GroupNeighbor& x, const GroupNeighbor& y) { return x.group < y.group; });
    size_t out = 0;
    for (size_t j = 0; j < list.size(); ++j) {
      if (out > 0 && list[out - 1].group == list[j].group) {
        list[out - 1].bytes += list[j].bytes;
      } else {
        list[out++] = list[j];
      }
    }
    list.resize(out);
    neighbor_offsets_[g + 1] = neighbor_offsets_[g] + static_cast<uint32_t>(out);
  }
  neighbors_.reserve(neighbor_offsets_.back());
  for (const auto& list : adj) neighbors_.insert(neighbors_.end(), list.begin(), list.end());

  order_.resize(num_groups_);
  for (size_t g = 0; g < num_groups_; ++g) order_[g] = GroupId::from_index(g);
  std::sort(order_.begin(), order_.end(),
            [&](GroupId x, GroupId y) { return first_rank[x.value()] < first_rank[y.value()]; });
}

DeviceId GroupGraph::fastest_allowed_device(GroupId g) const {
  DeviceId best = DeviceId::invalid();
  for (DeviceId d : allowed(g)) {
    if (!best.valid() || time_s(g, d) < time_s(g, best)) best = d;
  }
  return best;
}

}  // namespace dplace
