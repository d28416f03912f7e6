#include "dplace/placers/learning/groupings.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "dplace/core/error.h"

namespace dplace {
namespace {

// The median bandwidth and latency over the cluster's links between distinct devices (what
// sending a tensor typically costs); a single-device cluster gets an arbitrary finite link.
struct LinkEstimate {
  double bandwidth_bytes_per_s = 1e10;
  double latency_s = 0;
};

LinkEstimate typical_link(const Cluster& cluster) {
  std::vector<double> bandwidths, latencies;
  for (size_t a = 0; a < cluster.num_devices(); ++a) {
    for (size_t b = 0; b < cluster.num_devices(); ++b) {
      if (a == b) continue;
      if (const Link* l = cluster.link(DeviceId::from_index(a), DeviceId::from_index(b))) {
        bandwidths.push_back(l->bandwidth_bytes_per_s);
        latencies.push_back(l->latency_s);
      }
    }
  }
  LinkEstimate e;
  if (bandwidths.empty()) return e;
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  e.bandwidth_bytes_per_s = median(bandwidths);
  e.latency_s = median(latencies);
  return e;
}

}  // namespace

bool is_shared_weight(const Graph& graph, OpId op) {
  if (graph.op(op).param_bytes == 0 || !graph.predecessors(op).empty()) return false;
  const auto readers = graph.successors(op);
  return std::count_if(readers.begin(), readers.end(),
                       [&graph](OpId r) { return graph.op(r).phase == Phase::kForward; }) > 1;
}

std::vector<NamedGrouping> make_learning_groupings(const Graph& graph, const Cluster& cluster,
                                                   const CostTable& costs,
                                                   const LearningGroupingOptions& options) {
  const std::string& sole = options.sole_consumer;
  DPLACE_CHECK(options.levels >= 1 && options.groups >= 2);
  DPLACE_CHECK(sole == "full" || sole == "chains" || sole == "limited" || sole == "off");
  DPLACE_CHECK(options.cap == "lightest" || options.cap == "communication");
  const std::string& shared = options.shared_weights;
  DPLACE_CHECK(shared == "merged" || shared == "apart" || shared == "alternate");

  CoarseningOptions co;
  co.merge_sole_consumer = sole != "off";
  co.sole_consumer_chains_only = sole == "chains";
  if (options.cap == "communication") {
    co.cap_merge = CoarseningOptions::CapMerge::kCommunication;
    const LinkEstimate link = typical_link(cluster);
    co.transfer_latency = options.cap_transfer_scale * link.latency_s;
    co.transfer_weight_per_byte = options.cap_transfer_scale / link.bandwidth_bytes_per_s;
  }
  co.op_weight.resize(graph.num_ops());
  double total_weight = 0;
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    co.op_weight[i] = costs.fastest_time_s(OpId::from_index(i));
    total_weight += co.op_weight[i];
  }
  // No sole-consumer merge may build a group heavier than sole_consumer_limit times the average
  // group at the target count.
  if (sole == "limited") {
    co.sole_consumer_max_weight =
        options.sole_consumer_limit * total_weight / static_cast<double>(options.groups);
  }
  // Merge classes: ops allowed on different devices never merge; with "apart", nor does a shared
  // weight's colocation group with anything.
  std::vector<uint32_t> device_classes(graph.num_groups());
  std::map<std::vector<DeviceId>, uint32_t> class_of_set;
  for (size_t g = 0; g < graph.num_groups(); ++g) {
    const auto& devices = costs.group_devices(GroupId::from_index(g));
    device_classes[g] =
        class_of_set.try_emplace(devices, static_cast<uint32_t>(class_of_set.size())).first->second;
  }
  std::vector<uint32_t> apart_classes = device_classes;
  for (size_t g = 0, next = class_of_set.size(); g < graph.num_groups(); ++g) {
    const auto ops = graph.group_ops(GroupId::from_index(g));
    if (std::any_of(ops.begin(), ops.end(),
                    [&graph](OpId op) { return is_shared_weight(graph, op); })) {
      apart_classes[g] = static_cast<uint32_t>(next++);
    }
  }
  std::vector<size_t> targets;
  for (int i = options.levels - 1; i >= 0; --i) {
    targets.push_back(std::max<size_t>(2, options.groups >> std::min(i, 30)));
  }
  auto make_grouping = [&](std::string name, std::vector<uint32_t> merge_class) {
    NamedGrouping grouping;
    grouping.name = std::move(name);
    co.merge_class = std::move(merge_class);
    for (Coarsening& c : coarsen_graph_levels(graph, co, targets)) {
      // Nested groupings with as many groups are the same grouping: keep one.
      if (!grouping.levels.empty() && grouping.levels.back().num_groups == c.num_groups)
        grouping.levels.pop_back();
      grouping.levels.push_back(std::move(c));
    }
    return grouping;
  };
  std::vector<NamedGrouping> groupings;
  const bool has_shared_weights = apart_classes != device_classes;
  // Without shared weights the two groupings are one: it is kept once, as "merged".
  if (shared != "apart" || !has_shared_weights)
    groupings.push_back(make_grouping("merged", device_classes));
  if (has_shared_weights && (shared == "apart" || shared == "alternate"))
    groupings.push_back(make_grouping("apart", apart_classes));
  return groupings;
}

double step_time_upper_bound_s(const Graph& graph, const Cluster& cluster, const CostTable& costs) {
  double slowest_bandwidth = INFINITY;
  double largest_latency = 0;
  for (size_t a = 0; a < cluster.num_devices(); ++a) {
    for (size_t b = 0; b < cluster.num_devices(); ++b) {
      if (a == b) continue;
      if (const Link* l = cluster.link(DeviceId::from_index(a), DeviceId::from_index(b))) {
        slowest_bandwidth = std::min(slowest_bandwidth, l->bandwidth_bytes_per_s);
        largest_latency = std::max(largest_latency, l->latency_s);
      }
    }
  }
  const double copies = static_cast<double>(cluster.num_devices() - 1);
  double total = 0;
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    const OpId op = OpId::from_index(i);
    double slowest = 0;
    for (size_t d = 0; d < cluster.num_devices(); ++d) {
      const double t = costs.time_s(op, DeviceId::from_index(d));
      if (t != kInfiniteTime) slowest = std::max(slowest, t);
    }
    total += slowest;
    if (std::isfinite(slowest_bandwidth)) {
      for (uint32_t k = 0; k < graph.num_outputs(op); ++k) {
        const TensorRef t{op, k};
        if (graph.consumers(t).empty()) continue;
        total += copies *
                 (largest_latency + static_cast<double>(graph.tensor_bytes(t)) / slowest_bandwidth);
      }
    }
  }
  return std::max(total, 1e-9);
}

}  // namespace dplace
