// What scotch, mincut and metis share: the weighted group graph handed to a partitioner, and
// turning its parts back into a device per group (memory is then checked and repaired by
// place_groups_with_repair(), common/memory.h).
//
// Vertices are the colocation groups that may run on at least one target device (the devices the
// partitioner maps onto); a group allowed on no target is placed outside the partitioner, on its
// fastest allowed device (mincut: a CPU-only op stays on the CPU). Weights are integers:
//  * vertex weight: the group's reference_time_s (GroupGraph), scaled so the total is ~1e6, >= 1;
//  * edge weight: the bytes between two groups (GroupGraph::neighbors), scaled so the total is
//    ~1e7, >= 1; both directions are listed (CSR, as METIS and Scotch want);
//  * target weight: relative_speed of each target device, scaled to at most 1000, >= 1.
// A vertex whose group allows exactly one target is fixed to it.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dplace/placers/common/group_graph.h"
#include "dplace/placers/placer.h"

namespace dplace {

struct PartitionProblem {
  std::vector<DeviceId> targets;
  std::vector<GroupId> vertex_group;      // per vertex
  std::vector<int32_t> xadj;              // per vertex + 1
  std::vector<int32_t> adjncy;            // neighbour vertices
  std::vector<int32_t> adjwgt;            // per adjncy entry
  std::vector<int32_t> vwgt;              // per vertex
  std::vector<int32_t> fixed;             // per vertex: target index, or -1 when free
  std::vector<int32_t> target_weight;     // per target
  std::vector<DeviceId> device_of_group;  // groups outside the problem already assigned
};

// REQUIRES: targets non-empty, in cluster order.
PartitionProblem build_partition_problem(const GroupGraph& groups, const CostTable& costs,
                                         std::vector<DeviceId> targets);

// Applies part[v] (a target index per vertex). A group on a target it does not allow, or that the
// partitioner left unmapped (a part outside [0, targets): libscotch does this for some fixed-vertex
// mappings onto targets of unequal weight), goes to the allowed target with the least vertex
// weight so far, or to its fastest allowed device.
std::vector<DeviceId> assign_parts(const PartitionProblem& problem, const GroupGraph& groups,
                                   const CostTable& costs, std::span<const int32_t> part);

// The libraries' seeds are 31-bit. METIS: --seed values from 1 to 2^31 - 2 pass unchanged; 0,
// which METIS takes as 1, becomes 2^31 - 1; larger ones are mixed (splitmix64) into [1, 2^31 - 2],
// so that every bit of the seed counts (a seed of 2^32 used to give seed 2's result).
int32_t metis_seed(uint64_t seed);
// Scotch's generator gives the same result for the seeds 2k and 2k + 1 (seeds 2 and 3, 4 and 5
// gave identical mappings), so seeds 1 .. 2^30 map to the odd numbers 2s - 1 (seed 1 stays 1) and
// others to an even number mixed from the whole seed.
int32_t scotch_seed(uint64_t seed);

}  // namespace dplace
