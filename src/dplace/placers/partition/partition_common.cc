#include "dplace/placers/partition/partition_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "dplace/core/error.h"
#include "dplace/core/rng.h"

namespace dplace {

PartitionProblem build_partition_problem(const GroupGraph& groups, const CostTable& costs,
                                         std::vector<DeviceId> targets) {
  DPLACE_CHECK(!targets.empty());
  PartitionProblem p;
  p.targets = std::move(targets);
  const size_t ng = groups.num_groups();
  p.device_of_group.assign(ng, DeviceId::invalid());
  std::vector<int32_t> vertex_of(ng, -1);
  double total_time = 0;
  for (size_t g = 0; g < ng; ++g) {
    const GroupId gid = GroupId::from_index(g);
    std::vector<int32_t> allowed_targets;
    for (size_t t = 0; t < p.targets.size(); ++t) {
      if (groups.allows(gid, p.targets[t])) allowed_targets.push_back(int32_t(t));
    }
    if (allowed_targets.empty()) {
      p.device_of_group[g] = groups.fastest_allowed_device(gid);
      continue;
    }
    vertex_of[g] = int32_t(p.vertex_group.size());
    p.vertex_group.push_back(gid);
    p.fixed.push_back(allowed_targets.size() == 1 ? allowed_targets.front() : -1);
    total_time += groups.reference_time_s(gid);
  }
  const size_t nv = p.vertex_group.size();
  const double time_scale = total_time > 0 ? 1e6 / total_time : 0;
  const double byte_scale =
      groups.total_edge_bytes() > 0 ? 1e7 / double(groups.total_edge_bytes()) : 0;
  p.xadj.assign(nv + 1, 0);
  for (size_t v = 0; v < nv; ++v) {
    const GroupId g = p.vertex_group[v];
    p.vwgt.push_back(
        std::max<int32_t>(1, int32_t(std::lround(groups.reference_time_s(g) * time_scale))));
    for (const GroupNeighbor& nb : groups.neighbors(g)) {
      const int32_t u = vertex_of[nb.group.value()];
      if (u < 0) continue;
      p.adjncy.push_back(u);
      p.adjwgt.push_back(std::max<int32_t>(1, int32_t(std::lround(double(nb.bytes) * byte_scale))));
    }
    p.xadj[v + 1] = int32_t(p.adjncy.size());
  }
  double fastest = 0;
  for (DeviceId d : p.targets) fastest = std::max(fastest, groups.relative_speed(d));
  for (DeviceId d : p.targets) {
    p.target_weight.push_back(
        std::max<int32_t>(1, int32_t(std::lround(1000.0 * groups.relative_speed(d) / fastest))));
  }
  return p;
}

std::vector<DeviceId> assign_parts(const PartitionProblem& problem, const GroupGraph& groups,
                                   const CostTable& costs, std::span<const int32_t> part) {
  DPLACE_CHECK(part.size() == problem.vertex_group.size());
  std::vector<DeviceId> out = problem.device_of_group;
  std::vector<int64_t> load(problem.targets.size(), 0);
  std::vector<size_t> misplaced;
  for (size_t v = 0; v < part.size(); ++v) {
    const GroupId g = problem.vertex_group[v];
    const bool mapped = part[v] >= 0 && size_t(part[v]) < problem.targets.size();
    if (mapped && groups.allows(g, problem.targets[part[v]])) {
      const DeviceId d = problem.targets[part[v]];
      out[g.value()] = d;
      load[part[v]] += problem.vwgt[v];
    } else {
      misplaced.push_back(v);
    }
  }
  for (size_t v : misplaced) {
    const GroupId g = problem.vertex_group[v];
    int32_t best = -1;
    for (size_t t = 0; t < problem.targets.size(); ++t) {
      if (!groups.allows(g, problem.targets[t])) continue;
      if (best < 0 || load[t] < load[best]) best = int32_t(t);
    }
    if (best >= 0) {
      out[g.value()] = problem.targets[best];
      load[best] += problem.vwgt[v];
    } else {
      out[g.value()] = groups.fastest_allowed_device(g);
    }
  }
  return out;
}

int32_t metis_seed(uint64_t seed) {
  constexpr uint64_t kRange = 2147483647;  // 2^31 - 1
  // METIS seeds its generator with srand-like semantics, where 0 acts as 1: seed 0 gets 2^31 - 1.
  if (seed == 0) return static_cast<int32_t>(kRange);
  if (seed < kRange) return static_cast<int32_t>(seed);
  uint64_t state = seed;
  return static_cast<int32_t>(1 + splitmix64(state) % (kRange - 1));
}

int32_t scotch_seed(uint64_t seed) {
  constexpr uint64_t kPairs = uint64_t{1} << 30;
  if (seed >= 1 && seed <= kPairs) return static_cast<int32_t>(2 * seed - 1);
  uint64_t state = seed;
  return static_cast<int32_t>(2 * (splitmix64(state) % kPairs));
}

}  // namespace dplace
