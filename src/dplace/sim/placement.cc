#include "dplace/sim/placement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dplace/core/error.h"

namespace dplace {

Placement placement_from_groups(const Graph& graph, const std::vector<DeviceId>& device_of_group) {
  DPLACE_CHECK(device_of_group.size() == graph.num_groups())
      << "placement_from_groups: " << device_of_group.size() << " devices for "
      << graph.num_groups() << " groups";
  Placement p;
  p.device_of_op.resize(graph.num_ops());
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    p.device_of_op[i] = device_of_group[graph.group_of(OpId::from_index(i)).value()];
  }
  return p;
}

std::vector<DeviceId> groups_from_placement(const Graph& graph, const Placement& placement) {
  std::vector<DeviceId> device_of_group(graph.num_groups());
  for (size_t g = 0; g < graph.num_groups(); ++g) {
    device_of_group[g] = placement[graph.group_ops(GroupId::from_index(g)).front()];
  }
  return device_of_group;
}

Placement single_device_placement(const Graph& graph, DeviceId device) {
  Placement p;
  p.device_of_op.assign(graph.num_ops(), device);
  return p;
}

std::string placement_problem(const Graph& graph, const Cluster& cluster, const CostTable& costs,
                              const Placement& placement) {
  std::string problem = placement_structure_problem(graph, cluster, costs, placement);
  return problem.empty() ? missing_link_problem(graph, cluster, placement) : problem;
}

std::string placement_structure_problem(const Graph& graph, const Cluster& cluster,
                                        const CostTable& costs, const Placement& placement) {
  const size_t n = graph.num_ops();
  if (placement.device_of_op.size() != n) {
    return fmt::format("placement has {} entries but graph '{}' has {} ops",
                       placement.device_of_op.size(), graph.name(), n);
  }
  if (costs.num_ops() != n || costs.num_devices() != cluster.num_devices()) {
    return fmt::format("cost table is for {} ops x {} devices, not graph '{}' on cluster '{}'",
                       costs.num_ops(), costs.num_devices(), graph.name(), cluster.name());
  }
  for (size_t i = 0; i < n; ++i) {
    const OpId id = OpId::from_index(i);
    const DeviceId d = placement[id];
    if (!d.valid() || d.value() >= cluster.num_devices()) {
      return fmt::format("op '{}' is not assigned to a device of cluster '{}'", graph.op(id).name,
                         cluster.name());
    }
    if (!costs.allowed(id, d)) {
      return fmt::format("op '{}' is on '{}' but allows only {}", graph.op(id).name,
                         cluster.device(d).name, fmt::join(graph.op(id).devices, ", "));
    }
  }
  for (size_t g = 0; g < graph.num_groups(); ++g) {
    const auto ops = graph.group_ops(GroupId::from_index(g));
    const DeviceId first = placement[ops.front()];
    for (OpId id : ops) {
      if (placement[id] != first) {
        return fmt::format("colocation group '{}' is split over '{}' and '{}'",
                           graph.group_name(GroupId::from_index(g)), cluster.device(first).name,
                           cluster.device(placement[id]).name);
      }
    }
  }
  return "";
}

std::string missing_link_problem(const Graph& graph, const Cluster& cluster,
                                 const Placement& placement) {
  if (placement.device_of_op.size() != graph.num_ops()) return {};
  auto assigned = [&](DeviceId d) { return d.valid() && d.value() < cluster.num_devices(); };
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    const OpId id = OpId::from_index(i);
    const DeviceId from = placement[id];
    if (!assigned(from)) continue;
    for (uint32_t k = 0; k < graph.num_outputs(id); ++k) {
      for (OpId consumer : graph.consumers({id, k})) {
        const DeviceId to = placement[consumer];
        if (assigned(to) && to != from && cluster.link(from, to) == nullptr) {
          return fmt::format("tensor '{}:{}' must move '{}' -> '{}' but there is no link",
                             graph.op(id).name, k, cluster.device(from).name,
                             cluster.device(to).name);
        }
      }
    }
  }
  return {};
}

}  // namespace dplace
