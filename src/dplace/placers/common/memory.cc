#include "dplace/placers/common/memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "dplace/core/error.h"

namespace dplace {
namespace {

int64_t device_peak(const SimResult& r, DeviceId d) {
  return r.devices.empty() ? 0 : r.devices[d.value()].peak_memory_bytes;
}

// First-fit decreasing by size(g), keeping each group on its current device when it fits there.
// Returns false when some group fits on no device it allows.
bool first_fit_decreasing(const GroupGraph& groups, const Cluster& cluster,
                          const std::function<int64_t(GroupId)>& size,
                          std::vector<DeviceId>& device_of_group) {
  const size_t ng = groups.num_groups();
  std::vector<GroupId> by_size(ng);
  for (size_t g = 0; g < ng; ++g) by_size[g] = GroupId::from_index(g);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](GroupId a, GroupId b) { return size(a) > size(b); });
  std::vector<int64_t> used(cluster.num_devices(), 0);
  bool ok = true;
  for (GroupId g : by_size) {
    const int64_t s = size(g);
    DeviceId& dev = device_of_group[g.value()];
    if (used[dev.value()] + s <= cluster.device(dev).memory_bytes) {
      used[dev.value()] += s;
      continue;
    }
    DeviceId best = DeviceId::invalid();
    int64_t best_room = -1;
    for (DeviceId d : groups.allowed(g)) {
      const int64_t room = cluster.device(d).memory_bytes - used[d.value()];
      if (room >= s && room > best_room) {
        best = d;
        best_room = room;
      }
    }
    if (!best.valid()) {
      ok = false;
      best = dev;  // keep it; the result is reported as infeasible
    }
    dev = best;
    used[dev.value()] += s;
  }
  return ok;
}

}  // namespace

std::string memory_amount(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double magnitude = std::abs(b);
  if (magnitude >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (magnitude >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (magnitude >= 1e3) return fmt::format("{:.2f} kB", b / 1e3);
  return fmt::format("{} B", bytes);
}

std::vector<int64_t> memory_limits(const Cluster& cluster, double fraction) {
  DPLACE_CHECK(fraction > 0);
  std::vector<int64_t> out;
  for (const Device& d : cluster.devices()) {
    out.push_back(static_cast<int64_t>(std::floor(double(d.memory_bytes) * fraction)));
  }
  return out;
}

std::string describe_oom(const Cluster& cluster, const SimResult& result) {
  std::string out;
  for (const OomDevice& o : result.oom_devices) {
    out +=
        fmt::format("{}{} needs {} of {}", out.empty() ? "" : ", ", cluster.device(o.device).name,
                    memory_amount(o.peak_memory_bytes), memory_amount(o.capacity_bytes));
  }
  return out;
}

MemoryRepairResult repair_memory(const PlaceRequest& request, const GroupGraph& groups,
                                 std::vector<DeviceId> device_of_group, int max_rounds) {
  const Graph& graph = *request.graph;
  const Cluster& cluster = *request.cluster;
  const std::vector<DeviceId> original = device_of_group;
  SimWorkspace workspace;
  SimResult sim;
  MemoryRepairResult out;

  auto simulate = [&](const std::vector<DeviceId>& assignment) {
    request.simulator->run(placement_from_groups(graph, assignment), workspace, sim);
    ++out.evaluations;
    return sim.feasible;
  };
  auto finish = [&](std::vector<DeviceId> assignment, bool feasible, std::string reason) {
    out.moved_groups = 0;
    for (size_t g = 0; g < assignment.size(); ++g) out.moved_groups += assignment[g] != original[g];
    out.device_of_group = std::move(assignment);
    out.feasible = feasible;
    out.reason = std::move(reason);
    return out;
  };

  if (simulate(device_of_group)) return finish(std::move(device_of_group), true, "");
  std::vector<DeviceId> best = device_of_group;
  int64_t best_overflow = sim.total_overflow_bytes();
  std::string best_oom = describe_oom(cluster, sim);
  auto consider = [&](const std::vector<DeviceId>& assignment) {
    if (simulate(assignment)) return true;
    if (sim.total_overflow_bytes() < best_overflow) {
      best = assignment;
      best_overflow = sim.total_overflow_bytes();
      best_oom = describe_oom(cluster, sim);
    }
    return false;
  };

  // 1. Targeted moves off the overflowing devices.
  std::vector<DeviceId> current = device_of_group;
  for (int round = 0; round < max_rounds; ++round) {
    std::vector<int64_t> room(cluster.num_devices());
    for (size_t d = 0; d < cluster.num_devices(); ++d) {
      const DeviceId dev = DeviceId::from_index(d);
      room[d] = cluster.device(dev).memory_bytes - device_peak(sim, dev);
    }
    bool moved = false;
    for (const OomDevice& oom : sim.oom_devices) {
      std::vector<GroupId> on_device;
      for (size_t g = 0; g < current.size(); ++g) {
        const GroupId gid = GroupId::from_index(g);
        if (current[g] == oom.device && groups.allowed(gid).size() > 1) on_device.push_back(gid);
      }
      std::stable_sort(on_device.begin(), on_device.end(), [&](GroupId a, GroupId b) {
        return groups.memory_upper_bytes(a) > groups.memory_upper_bytes(b);
      });
      int64_t to_free = oom.overflow_bytes;
      for (GroupId g : on_device) {
        if (to_free <= 0) break;
        const int64_t size = groups.memory_upper_bytes(g);
        DeviceId dest = DeviceId::invalid();
        for (DeviceId d : groups.allowed(g)) {
          if (d == oom.device || room[d.value()] < size) continue;
          if (!dest.valid() || room[d.value()] > room[dest.value()]) dest = d;
        }
        if (!dest.valid()) continue;
        current[g.value()] = dest;
        room[dest.value()] -= size;
        to_free -= size;
        moved = true;
      }
    }
    if (!moved) break;
    if (consider(current)) return finish(std::move(current), true, "");
  }

  // 2. First-fit decreasing, conservative then optimistic sizes.
  const std::function<int64_t(GroupId)> sizes[] = {
      [&](GroupId g) { return groups.memory_upper_bytes(g); },
      [&](GroupId g) { return groups.param_bytes(g) + groups.max_temp_bytes(g); }};
  for (const auto& size : sizes) {
    std::vector<DeviceId> packed = device_of_group;
    first_fit_decreasing(groups, cluster, size, packed);
    if (consider(packed)) return finish(std::move(packed), true, "");
  }
  return finish(
      std::move(best), false,
      fmt::format("no placement found that fits in memory; least overflow: {}", best_oom));
}

PlaceResult place_groups_with_repair(const PlaceRequest& request, const GroupGraph& groups,
                                     std::vector<DeviceId> device_of_group, std::string note) {
  MemoryRepairResult repaired = repair_memory(request, groups, std::move(device_of_group));
  PlaceResult result;
  result.placement = placement_from_groups(*request.graph, repaired.device_of_group);
  result.evaluations = repaired.evaluations;
  result.infeasible_reason = repaired.reason;
  if (repaired.moved_groups > 0) {
    note += fmt::format("{}memory repair moved {} group(s)", note.empty() ? "" : "; ",
                        repaired.moved_groups);
  }
  result.note = std::move(note);
  return result;
}

MemoryRetryResult schedule_with_memory_retries(
    const PlaceRequest& request, double fraction, int max_retries,
    const std::function<ScheduleOutcome(const std::vector<int64_t>& limits)>& schedule) {
  const Cluster& cluster = *request.cluster;
  std::vector<int64_t> limits = memory_limits(cluster, fraction);
  SimWorkspace workspace;
  SimResult sim;
  MemoryRetryResult out;
  int64_t best_overflow = -1;
  for (int attempt = 0;; ++attempt) {
    ScheduleOutcome outcome = schedule(limits);
    request.simulator->run(outcome.placement, workspace, sim);
    ++out.evaluations;
    out.retries = attempt;
    if (sim.feasible) {
      out.estimated_step_s = outcome.estimated_step_s;
      out.placement = std::move(outcome.placement);
      out.feasible = true;
      out.reason.clear();
      return out;
    }
    const int64_t overflow = sim.total_overflow_bytes();
    if (best_overflow < 0 || overflow < best_overflow) {
      best_overflow = overflow;
      out.estimated_step_s = outcome.estimated_step_s;
      out.placement = std::move(outcome.placement);
      out.reason = outcome.no_fit_reason.empty()
                       ? fmt::format("simulated peak memory exceeds capacity: {}",
                                     describe_oom(cluster, sim))
                       : outcome.no_fit_reason;
    }
    // An op that fit nowhere under the current limits fits nowhere under lower ones either.
    if (!outcome.no_fit_reason.empty() || attempt >= max_retries) break;
    for (const OomDevice& o : sim.oom_devices) {
      const double scale = 0.97 * double(o.capacity_bytes) / double(o.peak_memory_bytes);
      limits[o.device.value()] = static_cast<int64_t>(double(limits[o.device.value()]) * scale);
    }
  }
  return out;
}

PlaceResult to_place_result(MemoryRetryResult result) {
  PlaceResult out;
  out.placement = std::move(result.placement);
  out.evaluations = result.evaluations;
  out.infeasible_reason = std::move(result.reason);
  out.note = fmt::format("schedule estimate {:.6g} s", result.estimated_step_s);
  if (result.feasible && result.retries > 0) {
    out.note += fmt::format("; memory estimate tightened {} time(s) to fit the simulated peak",
                            result.retries);
  }
  return out;
}

}  // namespace dplace
