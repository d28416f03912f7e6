// m-topo: Baechi's memory-constrained topological placement (Jeon et al., SoCC 2020): ops in
// topological order fill one device up to an equal share of the graph's memory, then the next.
#include <algorithm>

#include "dplace/placers/common/list_schedule.h"
#include "dplace/placers/common/memory.h"
#include "dplace/placers/common/params.h"
#include "dplace/placers/sched/sched_placers.h"

namespace dplace {
namespace {

// The devices m-topo fills, in order: accelerators (GPUs, then other accelerators) in cluster
// order; every device with devices=all or when the cluster has no accelerator.
std::vector<DeviceId> fill_order(const Cluster& cluster, bool accelerators_only) {
  std::vector<DeviceId> order;
  if (accelerators_only) {
    order = cluster.devices_of_kind(DeviceKind::kGpu);
    for (DeviceId d : cluster.devices_of_kind(DeviceKind::kAccel)) order.push_back(d);
  }
  if (order.empty()) {
    for (size_t d = 0; d < cluster.num_devices(); ++d) order.push_back(DeviceId::from_index(d));
  }
  return order;
}

ScheduleOutcome run_m_topo(const PlaceRequest& request, const GroupGraph& groups,
                           const std::vector<int64_t>& limits, bool accelerators_only) {
  const Graph& graph = *request.graph;
  const std::vector<DeviceId> order = fill_order(*request.cluster, accelerators_only);
  // Share per device: total memory of the groups / devices + the largest group (Baechi's
  // "uniform" variant), never above the device's limit.
  int64_t total = 0, largest = 0;
  for (size_t g = 0; g < groups.num_groups(); ++g) {
    const int64_t m = groups.memory_upper_bytes(GroupId::from_index(g));
    total += m;
    largest = std::max(largest, m);
  }
  const int64_t share = total / int64_t(order.size()) + largest;
  std::vector<int64_t> used(request.cluster->num_devices(), 0);

  // Sources are placed in topological order like every other op, so the share accounts for their
  // memory (no deferral).
  ListSchedule schedule(
      request, groups, limits,
      ListScheduleOptions{.accelerators_only = accelerators_only, .defer_free_sources = false});
  ScheduleOutcome outcome;
  size_t cursor = 0;
  size_t step = 0;
  for (OpId op : graph.topo_order()) {
    check_deadline(request, step++, graph.num_ops());
    if (schedule.placed(op) || schedule.deferred(op)) continue;
    DeviceId chosen = DeviceId::invalid();
    if (schedule.group_pinned(op)) {
      chosen = schedule.devices_for(op).front();
    } else {
      const GroupId g = graph.group_of(op);
      const int64_t need = groups.memory_upper_bytes(g);
      const auto candidates = schedule.devices_for(op);
      auto offered = [&](DeviceId d) {
        return std::find(candidates.begin(), candidates.end(), d) != candidates.end();
      };
      auto takes = [&](DeviceId d) {
        return offered(d) && used[d.value()] + need <= std::min(share, limits[d.value()]) &&
               schedule.fits(op, d);
      };
      // Fill in order: a device the op may use but that cannot take it is done; a device the op
      // may not use (a CPU-only op, a restricted one) stays the current one for the next op,
      // which it may take from there.
      while (cursor < order.size() && offered(order[cursor]) && !takes(order[cursor])) ++cursor;
      for (size_t next = cursor; next < order.size() && !chosen.valid(); ++next) {
        if (takes(order[next])) chosen = order[next];
      }
      if (!chosen.valid()) {
        // Not an accelerator op, or every device is past its share: the allowed device with the
        // most room that fits.
        for (DeviceId d : schedule.devices_for(op)) {
          if (!schedule.fits(op, d)) continue;
          if (!chosen.valid() || schedule.free_bytes(d) > schedule.free_bytes(chosen)) chosen = d;
        }
      }
      if (!chosen.valid()) {
        if (outcome.no_fit_reason.empty()) outcome.no_fit_reason = schedule.no_fit_message(op);
        chosen = schedule.fallback_device(op);
      }
      used[chosen.value()] += need;
    }
    schedule.place(op, chosen);
  }
  outcome.placement = schedule.placement();
  outcome.estimated_step_s = schedule.makespan_s();
  return outcome;
}

class MTopoPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    const PlacerParams params("m-topo", request.params,
                              {"memory_fraction", "memory_retries", "devices"});
    const bool accelerators_only =
        params.get_choice("devices", "accelerators", {"accelerators", "all"}) == "accelerators";
    const double fraction = params.get_double("memory_fraction", 1.0, 1e-6, 1.0);
    const int retries = static_cast<int>(params.get_int("memory_retries", 4, 0, 100));
    const GroupGraph groups(*request.graph, *request.cluster, *request.costs);
    return to_place_result(schedule_with_memory_retries(
        request, fraction, retries, [&](const std::vector<int64_t>& limits) {
          return run_m_topo(request, groups, limits, accelerators_only);
        }));
  }
};

}  // namespace

std::unique_ptr<Placer> make_m_topo_placer() { return std::make_unique<MTopoPlacer>(); }

}  // namespace dplace
