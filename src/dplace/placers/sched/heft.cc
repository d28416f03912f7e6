// HEFT: Topcuoglu, Hariri and Wu, "Performance-effective and low-complexity task scheduling for
// heterogeneous computing", IEEE TPDS 13(3), 2002; with colocation and memory limits.
#include <algorithm>
#include <numeric>

#include "dplace/placers/common/list_schedule.h"
#include "dplace/placers/common/memory.h"
#include "dplace/placers/common/params.h"
#include "dplace/placers/sched/sched_placers.h"

namespace dplace {
namespace {

ScheduleOutcome run_heft(const PlaceRequest& request, const GroupGraph& groups,
                         const std::vector<double>& rank, const std::vector<int64_t>& limits,
                         bool insertion) {
  const Graph& graph = *request.graph;
  std::vector<OpId> order(graph.topo_order().begin(), graph.topo_order().end());
  // Decreasing rank is a topological order (a predecessor's rank is at least its successor's);
  // the topological rank breaks ties, so zero-time chains stay in order.
  std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) {
    if (rank[a.value()] != rank[b.value()]) return rank[a.value()] > rank[b.value()];
    return graph.topo_rank(a) < graph.topo_rank(b);
  });
  ListSchedule schedule(request, groups, limits, ListScheduleOptions{.insertion = insertion});
  ScheduleOutcome outcome;
  size_t step = 0;
  for (OpId op : order) {
    check_deadline(request, step++, order.size());
    if (schedule.placed(op) || schedule.deferred(op)) continue;
    DeviceId best = DeviceId::invalid();
    double best_finish = kInfiniteTime;
    for (DeviceId d : schedule.devices_for(op)) {
      if (!schedule.fits(op, d)) continue;
      const double f = schedule.finish_s_on(op, d);
      if (f < best_finish) {
        best = d;
        best_finish = f;
      }
    }
    if (!best.valid()) {
      if (outcome.no_fit_reason.empty()) outcome.no_fit_reason = schedule.no_fit_message(op);
      best = schedule.fallback_device(op);
    }
    schedule.place(op, best);
  }
  outcome.placement = schedule.placement();
  outcome.estimated_step_s = schedule.makespan_s();
  return outcome;
}

class HeftPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    const PlacerParams params("heft", request.params,
                              {"memory_fraction", "memory_retries", "insertion"});
    const bool insertion = params.get_choice("insertion", "true", {"true", "false"}) == "true";
    const double fraction = params.get_double("memory_fraction", 1.0, 1e-6, 1.0);
    const int retries = static_cast<int>(params.get_int("memory_retries", 4, 0, 100));
    const GroupGraph groups(*request.graph, *request.cluster, *request.costs);
    const std::vector<double> rank = upward_ranks(request, /*with_communication=*/true);
    return to_place_result(schedule_with_memory_retries(
        request, fraction, retries, [&](const std::vector<int64_t>& limits) {
          return run_heft(request, groups, rank, limits, insertion);
        }));
  }
};

}  // namespace

std::unique_ptr<Placer> make_heft_placer() { return std::make_unique<HeftPlacer>(); }

}  // namespace dplace
