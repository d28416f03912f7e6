// Memory feasibility shared by the classic placers.
//
// The simulator is the judge of memory (docs/simulator.md): a placement is feasible when no
// device's simulated peak exceeds its memory_bytes. Placers estimate memory while they work and
// then check the result with one simulation:
//  * Placers that ignore memory while placing (round-robin, scotch, mincut, metis) call
//    repair_memory(), which moves groups off the devices the simulator reports OOM.
//  * List schedulers (heft, m-*) track an estimate as they go (list_schedule.h) and call
//    schedule_with_memory_retries(), which lowers the estimate's limit on a device that still
//    overflowed in the simulation and schedules again.
//
// Thread safety: pure functions of their arguments (each runs its own simulations).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dplace/placers/common/group_graph.h"
#include "dplace/placers/placer.h"

namespace dplace {

// floor(memory_bytes * fraction) per device. REQUIRES: fraction > 0.
std::vector<int64_t> memory_limits(const Cluster& cluster, double fraction);

// A memory amount for messages, two decimals in the largest decimal unit it reaches: "12.15 GB",
// "6.00 MB", "512 B" (so that small devices do not read "0.01 GB ... by 0.00 GB").
std::string memory_amount(int64_t bytes);

// "/gpu:0 needs 13.2 GB of 12.0 GB, /gpu:1 needs ..." (empty when feasible).
std::string describe_oom(const Cluster& cluster, const SimResult& result);

struct MemoryRepairResult {
  std::vector<DeviceId> device_of_group;
  bool feasible = false;
  int64_t evaluations = 0;  // simulations run
  size_t moved_groups = 0;  // groups whose device differs from the input
  std::string reason;       // why no feasible placement was found; empty when feasible
};

// Returns `device_of_group` unchanged when it fits. Otherwise, in order, until one fits:
//  1. up to `max_rounds` rounds of moves: from each device the simulator reports OOM, move groups
//     (largest memory_upper_bytes first, only to devices they allow) to the allowed device with
//     the most simulated free memory that can take them, until the overflow is covered;
//  2. first-fit decreasing by memory, each group kept on its current device when it fits there,
//     with memory_upper_bytes as each group's size (conservative), then with
//     param_bytes + max_temp_bytes (optimistic); each result is simulated.
// When none fits, returns the candidate with the least total overflow and says why.
MemoryRepairResult repair_memory(const PlaceRequest& request, const GroupGraph& groups,
                                 std::vector<DeviceId> device_of_group, int max_rounds = 8);

// The PlaceResult of a placer that assigns groups without regard to memory: repair_memory() on
// `device_of_group`, its evaluations and infeasible reason, and `note` followed by how many groups
// the repair moved, if any.
PlaceResult place_groups_with_repair(const PlaceRequest& request, const GroupGraph& groups,
                                     std::vector<DeviceId> device_of_group, std::string note = "");

// What a memory-aware scheduler returns for one set of per-device limits.
struct ScheduleOutcome {
  Placement placement;
  std::string no_fit_reason;    // set when some op fit on no device under the limits
  double estimated_step_s = 0;  // the scheduler's own makespan estimate
};

struct MemoryRetryResult {
  Placement placement;
  bool feasible = false;
  int64_t evaluations = 0;
  std::string reason;           // empty when feasible
  int retries = 0;              // schedules run after the first
  double estimated_step_s = 0;  // of the returned placement's schedule
};

// Runs schedule(memory_limits(cluster, fraction)) and simulates the placement. While the
// simulation is OOM (and at most `max_retries` times), scales the limit of every overflowing
// device by 0.97 * capacity / peak and schedules again. Returns the first feasible placement, or
// the one with the least overflow and the reason.
MemoryRetryResult schedule_with_memory_retries(
    const PlaceRequest& request, double fraction, int max_retries,
    const std::function<ScheduleOutcome(const std::vector<int64_t>& limits)>& schedule);

// The PlaceResult of a scheduler run through schedule_with_memory_retries: its placement, its
// simulation count, the reason when infeasible, and a note with the schedule's own step estimate
// and how often the limits had to be lowered.
PlaceResult to_place_result(MemoryRetryResult result);

}  // namespace dplace
