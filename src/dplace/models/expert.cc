#include "dplace/models/expert.h"

#include <algorithm>
#include <unordered_map>

#include "dplace/core/error.h"

namespace dplace::models {

std::vector<DeviceId> expert_devices(const Cluster& cluster) {
  std::vector<DeviceId> devices = cluster.devices_of_kind(DeviceKind::kGpu);
  if (devices.empty()) devices = cluster.devices_of_kind(DeviceKind::kAccel);
  if (devices.empty()) devices.push_back(DeviceId(0));
  return devices;
}

std::string_view name_component(std::string_view name, size_t index) {
  for (size_t i = 0; i < index; ++i) {
    const size_t slash = name.find('/');
    if (slash == std::string_view::npos) return {};
    name.remove_prefix(slash + 1);
  }
  return name.substr(0, name.find('/'));
}

Placement place_by_name(const Graph& graph, const std::vector<DeviceId>& devices,
                        const std::function<size_t(std::string_view op_name)>& slot) {
  DPLACE_CHECK(!devices.empty());
  std::vector<DeviceId> device_of_group(graph.num_groups());
  for (size_t g = 0; g < graph.num_groups(); ++g) {
    const OpId first = graph.group_ops(GroupId::from_index(g)).front();
    device_of_group[g] = devices[slot(graph.op(first).name) % devices.size()];
  }
  return placement_from_groups(graph, device_of_group);
}

size_t layer_slot(size_t layer, size_t layers, size_t slots) {
  DPLACE_CHECK(layer < layers && slots > 0);
  return layers <= slots ? layer : layer * slots / layers;
}

Placement contiguous_split(const Graph& graph, const std::vector<DeviceId>& devices) {
  DPLACE_CHECK(!devices.empty());
  std::vector<size_t> block_of_group(graph.num_groups());
  std::vector<double> block_flops;
  std::unordered_map<std::string_view, size_t> block_index;
  for (size_t g = 0; g < graph.num_groups(); ++g) {
    const auto ops = graph.group_ops(GroupId::from_index(g));
    const std::string_view block = name_component(graph.op(ops.front()).name, 0);
    auto [it, inserted] = block_index.emplace(block, block_flops.size());
    if (inserted) block_flops.push_back(0);
    block_of_group[g] = it->second;
    for (OpId op : ops) block_flops[it->second] += graph.op(op).flops;
  }
  double total = 0;
  for (double f : block_flops) total += f;
  std::vector<size_t> stage_of_block(block_flops.size(), 0);
  double before = 0;
  const size_t k = devices.size();
  for (size_t b = 0; b < block_flops.size(); ++b) {
    const double mid = before + block_flops[b] / 2;
    stage_of_block[b] =
        total > 0 ? std::min(k - 1, static_cast<size_t>(mid / total * static_cast<double>(k))) : 0;
    before += block_flops[b];
  }
  std::vector<DeviceId> device_of_group(graph.num_groups());
  for (size_t g = 0; g < graph.num_groups(); ++g) {
    device_of_group[g] = devices[stage_of_block[block_of_group[g]]];
  }
  return placement_from_groups(graph, device_of_group);
}

}  // namespace dplace::models
