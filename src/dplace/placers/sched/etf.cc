#include "dplace/placers/sched/etf.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "dplace/core/error.h"
#include "dplace/placers/common/list_schedule.h"

namespace dplace {

ScheduleOutcome run_etf(const PlaceRequest& request, const GroupGraph& groups,
                        const std::vector<int64_t>& memory_limits, const EtfOptions& options) {
  const Graph& graph = *request.graph;
  const size_t n = graph.num_ops();
  const size_t nd = request.cluster->num_devices();
  const bool sct = !options.favourite_child.empty();
  const std::vector<double> level = upward_ranks(request, /*with_communication=*/false);
  ListSchedule schedule(request, groups, memory_limits,
                        ListScheduleOptions{.accelerators_only = options.accelerators_only});
  ScheduleOutcome outcome;

  std::vector<int64_t> favourite_parent;
  std::vector<int64_t> reserved_for(nd, -1);  // per device: op index of a pending favourite child
  if (sct) {
    DPLACE_CHECK(options.favourite_child.size() == n);
    favourite_parent.assign(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (options.favourite_child[i] >= 0)
        favourite_parent[options.favourite_child[i]] = int64_t(i);
    }
  }

  // Start time of every ready op on every device; after a placement on d only the column of d
  // (device availability, channels into d, arrivals at d) changes, and the rows of the readers
  // of the sources placed with it.
  std::vector<double> start(n * nd, kInfiniteTime);
  std::vector<OpId> ready;
  std::vector<uint8_t> is_ready(n, 0);
  auto refresh = [&](OpId op, DeviceId d) {
    start[op.value() * nd + d.value()] = schedule.start_s(op, d);
  };
  auto admit = [&] {
    for (OpId op : schedule.take_ready()) {
      for (DeviceId d : schedule.devices_for(op)) refresh(op, d);
      ready.push_back(op);
      is_ready[op.value()] = 1;
    }
  };
  admit();

  struct Choice {
    size_t index = 0;  // into ready
    DeviceId device;
    double start_s = kInfiniteTime;
    bool kept_for_another = false;  // the device is kept for another op's favourite child
  };
  auto better = [&](const Choice& a, const Choice& b) {  // is a better than b?
    if (!b.device.valid()) return true;
    if (a.start_s != b.start_s) return a.start_s < b.start_s;
    // At equal starts a device kept for a favourite child goes last (Baechi leaves this tie open).
    if (a.kept_for_another != b.kept_for_another) return !a.kept_for_another;
    const OpId x = ready[a.index], y = ready[b.index];
    if (level[x.value()] != level[y.value()]) return level[x.value()] > level[y.value()];
    if (x != y) return graph.topo_rank(x) < graph.topo_rank(y);
    return a.device < b.device;
  };

  // Per device: the favourite child it is kept for in this round, or -1.
  std::vector<int64_t> kept_for(nd, -1);
  auto fits_and_reaches = [&](OpId op, DeviceId d) {
    return schedule.fits(op, d) && start[op.value() * nd + d.value()] != kInfiniteTime;
  };
  // Whether op can start on d, and no device it fits on lets it start sooner (Baechi's test for
  // both favourite-child rules).
  auto starts_earliest_on = [&](OpId op, DeviceId d) {
    const double here = start[op.value() * nd + d.value()];
    if (here == kInfiniteTime) return false;
    for (DeviceId other : schedule.devices_for(op)) {
      if (other != d && schedule.fits(op, other) && start[op.value() * nd + other.value()] < here)
        return false;
    }
    return true;
  };
  // The deadline is read every 64 placements: a small graph is always placed.
  for (size_t round = 0; !ready.empty(); ++round) {
    check_deadline(request, round, n);
    bool any_kept = false;
    for (size_t d = 0; d < nd; ++d) {
      kept_for[d] = -1;
      const int64_t child = reserved_for[d];
      if (!sct || options.reservation == FavouriteReservation::kNone || child < 0 ||
          !is_ready[child]) {
        continue;
      }
      // Baechi: only a device the child would start on earliest waits for it.
      if (options.reservation == FavouriteReservation::kUrgent &&
          !starts_earliest_on(OpId::from_index(child), DeviceId::from_index(d))) {
        continue;
      }
      kept_for[d] = child;
      any_kept = true;
    }

    Choice best, best_ignoring_reservations;
    for (size_t r = 0; r < ready.size(); ++r) {
      const OpId op = ready[r];
      std::span<const DeviceId> devices = schedule.devices_for(op);
      // m-sct: a favourite child follows its parent when it fits there.
      DeviceId parent_device = DeviceId::invalid();
      if (sct && favourite_parent[op.value()] >= 0 && !schedule.group_pinned(op)) {
        const DeviceId pd = schedule.device(OpId::from_index(favourite_parent[op.value()]));
        // As in Baechi: only when the parent's device is (one of) the earliest for the child.
        if (std::find(devices.begin(), devices.end(), pd) != devices.end() &&
            schedule.fits(op, pd) && starts_earliest_on(op, pd)) {
          parent_device = pd;
        }
      }
      // The op's urgent time (kUrgent): its latest start over the devices it fits on.
      double urgent_s = 0;
      if (any_kept && options.reservation == FavouriteReservation::kUrgent) {
        for (DeviceId d : devices) {
          if (fits_and_reaches(op, d)) {
            urgent_s = std::max(urgent_s, start[op.value() * nd + d.value()]);
          }
        }
      }
      for (DeviceId d : devices) {
        if (parent_device.valid() && d != parent_device) continue;
        const Choice c{r, d, start[op.value() * nd + d.value()]};
        if (c.start_s == kInfiniteTime) continue;
        // The choice as a device kept for another op's favourite child sees it, if at all.
        Choice kept = c;
        bool excluded = false;
        const int64_t holder = kept_for[d.value()];
        if (holder >= 0 && holder != int64_t(op.value())) {
          if (options.reservation == FavouriteReservation::kUrgent) {
            kept.start_s = std::max(c.start_s, urgent_s);  // the device waits until op is urgent
            kept.kept_for_another = true;
          } else if (c.start_s + request.costs->time_s(op, d) > start[holder * nd + d.value()]) {
            excluded = true;  // kFinishBefore: op would still run when the child could start
          }
        }
        const bool beats_ignoring = better(c, best_ignoring_reservations);
        const bool beats = !excluded && better(kept, best);
        // The memory test (the costly part) only for a choice that would change a best one.
        if ((!beats_ignoring && !beats) || !schedule.fits(op, d)) continue;
        if (beats_ignoring) best_ignoring_reservations = c;
        if (beats) best = kept;
      }
    }
    if (!best.device.valid()) best = best_ignoring_reservations;
    if (!best.device.valid()) {
      // Nothing fits anywhere: force the most urgent ready op onto its roomiest device.
      size_t pick = 0;
      for (size_t r = 1; r < ready.size(); ++r) {
        if (level[ready[r].value()] > level[ready[pick].value()]) pick = r;
      }
      const OpId op = ready[pick];
      if (outcome.no_fit_reason.empty()) outcome.no_fit_reason = schedule.no_fit_message(op);
      best = {pick, schedule.fallback_device(op), 0};
    }
    const OpId op = ready[best.index];
    const DeviceId d = best.device;
    schedule.place(op, d, best.start_s);
    ready[best.index] = ready.back();
    ready.pop_back();
    is_ready[op.value()] = 0;
    if (sct) {
      for (int64_t& holder : reserved_for) {
        if (holder == int64_t(op.value())) holder = -1;
      }
      const int64_t child = options.favourite_child[op.value()];
      if (child >= 0 && !schedule.placed(OpId::from_index(child))) reserved_for[d.value()] = child;
    }
    for (OpId other : ready) refresh(other, d);
    // A source placed with op (a weight, an input) now sends its tensor from one device, so its
    // other ready readers' starts change on every device.
    for (OpId source : schedule.materialized_by_last_place()) {
      for (OpId reader : graph.successors(source)) {
        if (!is_ready[reader.value()]) continue;
        for (DeviceId e : schedule.devices_for(reader)) refresh(reader, e);
      }
    }
    admit();
  }
  outcome.placement = schedule.placement();
  outcome.estimated_step_s = schedule.makespan_s();
  return outcome;
}

}  // namespace dplace
