// round-robin: colocation groups in topological order dealt to the devices in turn.
#include "dplace/placers/builtin.h"
#include "dplace/placers/common/group_graph.h"
#include "dplace/placers/common/memory.h"
#include "dplace/placers/common/params.h"

namespace dplace {
namespace {

// Groups in GroupGraph::order() go to the target devices in turn: accelerators (GPUs and other
// accelerators, in cluster order) with --param devices=accelerators (Default), every device with
// devices=all; all devices when the cluster has no accelerator. A group that allows the next
// device takes the first one after it in the rotation that it allows; a group allowed on no target
// goes to its fastest allowed device without advancing the rotation. Memory: repair_memory().
class RoundRobinPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    const PlacerParams params("round-robin", request.params, {"devices"});
    const std::string which = params.get_choice("devices", "accelerators", {"accelerators", "all"});
    const Cluster& cluster = *request.cluster;
    std::vector<DeviceId> targets;
    if (which == "accelerators") {
      targets = cluster.devices_of_kind(DeviceKind::kGpu);
      for (DeviceId d : cluster.devices_of_kind(DeviceKind::kAccel)) targets.push_back(d);
    }
    if (targets.empty()) {
      for (size_t d = 0; d < cluster.num_devices(); ++d) targets.push_back(DeviceId::from_index(d));
    }
    const GroupGraph groups(*request.graph, cluster, *request.costs);
    std::vector<DeviceId> device_of_group(groups.num_groups());
    size_t cursor = 0;
    for (GroupId g : groups.order()) {
      DeviceId chosen = DeviceId::invalid();
      for (size_t step = 0; step < targets.size(); ++step) {
        const size_t t = (cursor + step) % targets.size();
        if (groups.allows(g, targets[t])) {
          chosen = targets[t];
          cursor = t + 1;
          break;
        }
      }
      device_of_group[g.value()] = chosen.valid() ? chosen : groups.fastest_allowed_device(g);
    }
    return place_groups_with_repair(request, groups, std::move(device_of_group));
  }
};

}  // namespace

std::unique_ptr<Placer> make_round_robin_placer() { return std::make_unique<RoundRobinPlacer>(); }

}  // namespace dplace
