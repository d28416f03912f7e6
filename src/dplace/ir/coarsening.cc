#include "dplace/ir/coarsening.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <unordered_map>

#include "dplace/core/error.h"

namespace dplace {
namespace {

class DisjointSets {
 public:
  explicit DisjointSets(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0u); }
  uint32_t find(uint32_t x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  // Returns true when a and b were in different sets.
  bool unite(uint32_t a, uint32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return false;
    parent_[std::max(a, b)] = std::min(a, b);
    return true;
  }

 private:
  std::vector<uint32_t> parent_;
};

// A group of the cap stage.
struct CapGroup {
  double weight = 0;
  uint32_t position = 0;  // smallest topo rank of its ops; unique among groups
  uint32_t merge_class = 0;
  uint32_t version = 0;  // bumped whenever the group absorbs another
  bool alive = true;
  // Neighbour -> whether a dataflow edge joins them (false: only topological adjacency).
  std::unordered_map<uint32_t, bool> neighbours;
  // Neighbour -> communication exchanged with it (CapMerge::kCommunication only).
  std::unordered_map<uint32_t, double> communication;
};

struct MergeCandidate {
  bool virtual_edge = false;  // joined only by topological adjacency
  double cost = 0;            // the rank (CapMerge): lower merges first
  double weight = 0;          // combined weight
  uint32_t first_position = 0;
  uint32_t second_position = 0;
  uint32_t a = 0;
  uint32_t b = 0;
  uint32_t version_a = 0;
  uint32_t version_b = 0;

  // Ordering for a min-heap: real edges first, then lower cost, then lighter, then earlier.
  friend bool operator>(const MergeCandidate& x, const MergeCandidate& y) {
    if (x.virtual_edge != y.virtual_edge) return x.virtual_edge;
    if (x.cost != y.cost) return x.cost > y.cost;
    if (x.weight != y.weight) return x.weight > y.weight;
    if (x.first_position != y.first_position) return x.first_position > y.first_position;
    return x.second_position > y.second_position;
  }
};

class CapMerger {
 public:
  CapMerger(std::vector<CapGroup> groups, CoarseningOptions::CapMerge rank)
      : groups_(std::move(groups)), rank_(rank), sets_(groups_.size()) {
    alive_ = groups_.size();
    for (uint32_t g = 0; g < groups_.size(); ++g) {
      for (const auto& [h, real] : groups_[g].neighbours) {
        if (g < h) push(g, h, !real);
      }
    }
  }

  // Merges until `target` groups are left or no compatible pair remains. Returns, for every
  // original group, the group it has been merged into so far. Calls with decreasing targets
  // continue the same merging.
  std::vector<uint32_t> run(size_t target) {
    while (alive_ > target && !heap_.empty()) {
      const MergeCandidate c = heap_.top();
      heap_.pop();
      const CapGroup& ga = groups_[c.a];
      const CapGroup& gb = groups_[c.b];
      if (!ga.alive || !gb.alive || ga.version != c.version_a || gb.version != c.version_b) {
        continue;  // stale
      }
      merge(c.a, c.b);
    }
    std::vector<uint32_t> into(groups_.size());
    for (uint32_t g = 0; g < groups_.size(); ++g) into[g] = sets_.find(g);
    return into;
  }

 private:
  void push(uint32_t a, uint32_t b, bool virtual_edge) {
    const CapGroup& ga = groups_[a];
    const CapGroup& gb = groups_[b];
    if (ga.merge_class != gb.merge_class) return;
    double cost = 0;
    if (rank_ == CoarseningOptions::CapMerge::kCommunication) {
      const auto it = ga.communication.find(b);
      const double exchanged = it == ga.communication.end() ? 0.0 : it->second;
      cost = std::min(ga.weight, gb.weight) - exchanged;
    }
    heap_.push({.virtual_edge = virtual_edge,
                .cost = cost,
                .weight = ga.weight + gb.weight,
                .first_position = std::min(ga.position, gb.position),
                .second_position = std::max(ga.position, gb.position),
                .a = a,
                .b = b,
                .version_a = ga.version,
                .version_b = gb.version});
  }

  void merge(uint32_t a, uint32_t b) {
    // The survivor keeps the larger neighbour table; the other's entries move over.
    uint32_t keep = a;
    uint32_t gone = b;
    if (groups_[gone].neighbours.size() > groups_[keep].neighbours.size()) std::swap(keep, gone);
    CapGroup& k = groups_[keep];
    CapGroup& o = groups_[gone];
    k.weight += o.weight;
    k.position = std::min(k.position, o.position);
    ++k.version;
    o.alive = false;
    k.neighbours.erase(gone);
    k.communication.erase(gone);
    for (const auto& [h, exchanged] : o.communication) {
      if (h == keep) continue;
      CapGroup& x = groups_[h];
      x.communication.erase(gone);
      k.communication[h] += exchanged;
      x.communication[keep] += exchanged;
    }
    o.communication.clear();
    for (const auto& [h, real] : o.neighbours) {
      if (h == keep) continue;
      CapGroup& x = groups_[h];
      x.neighbours.erase(gone);
      bool& kr = k.neighbours[h];
      kr = kr || real;
      x.neighbours[keep] = kr;
    }
    o.neighbours.clear();
    sets_.unite(keep, gone);
    --alive_;
    for (const auto& [h, real] : k.neighbours) push(keep, h, !real);
  }

  std::vector<CapGroup> groups_;
  CoarseningOptions::CapMerge rank_;
  DisjointSets sets_;
  size_t alive_ = 0;
  std::priority_queue<MergeCandidate, std::vector<MergeCandidate>, std::greater<>> heap_;
};

}  // namespace

std::vector<Coarsening> coarsen_graph_levels(const Graph& graph, const CoarseningOptions& options,
                                             std::span<const size_t> targets) {
  const size_t n = graph.num_ops();
  DPLACE_CHECK(options.op_weight.empty() || options.op_weight.size() == n)
      << "op_weight has " << options.op_weight.size() << " entries for " << n << " ops";
  DPLACE_CHECK(options.merge_class.empty() || options.merge_class.size() == graph.num_groups())
      << "merge_class has " << options.merge_class.size() << " entries for " << graph.num_groups()
      << " colocation groups";

  auto class_of = [&](OpId op) -> uint32_t {
    return options.merge_class.empty() ? 0 : options.merge_class[graph.group_of(op).value()];
  };
  auto weight_of = [&](size_t i) { return options.op_weight.empty() ? 1.0 : options.op_weight[i]; };

  // Stage 1: colocation groups.
  DisjointSets ops(n);
  for (size_t g = 0; g < graph.num_groups(); ++g) {
    std::span<const OpId> members = graph.group_ops(GroupId::from_index(g));
    for (OpId op : members) ops.unite(members.front().value(), op.value());
  }

  // Stage 2: an op whose outputs all go to one op joins that op's group.
  size_t count = graph.num_groups();
  if (options.merge_sole_consumer) {
    std::vector<double> weight(n, 0.0);  // per disjoint-set root
    for (size_t i = 0; i < n; ++i) weight[ops.find(static_cast<uint32_t>(i))] += weight_of(i);
    // Per root: whether the group has taken in a working producer group (chains only).
    std::vector<uint8_t> absorbed(n, 0);
    const double limit = options.sole_consumer_max_weight;
    // Whether an op outside groups a and b that does work feeds `consumer`.
    auto fans_in = [&](OpId consumer, uint32_t a, uint32_t b) {
      for (OpId p : graph.predecessors(consumer)) {
        const uint32_t r = ops.find(p.value());
        if (r != a && r != b && weight_of(p.value()) > 0) return true;
      }
      return false;
    };
    for (OpId op : graph.topo_order()) {
      std::span<const OpId> succ = graph.successors(op);
      if (succ.size() != 1 || class_of(op) != class_of(succ.front())) continue;
      const uint32_t a = ops.find(op.value());
      const uint32_t b = ops.find(succ.front().value());
      if (a == b || (limit > 0 && weight[a] + weight[b] > limit)) continue;
      if (options.sole_consumer_chains_only &&
          (fans_in(succ.front(), a, b) || (absorbed[b] && weight[a] > 0))) {
        continue;
      }
      const double merged = weight[a] + weight[b];
      const bool took_in = absorbed[a] || absorbed[b] || weight[a] > 0;
      ops.unite(a, b);
      weight[ops.find(a)] = merged;
      absorbed[ops.find(a)] = took_in;
      --count;
    }
  }

  // Index the groups left after stage 2 and build the cap stage's group graph.
  std::vector<uint32_t> index_of_root(n, UINT32_MAX);
  std::vector<CapGroup> groups;
  std::vector<uint32_t> group_of(n);
  for (OpId op : graph.topo_order()) {  // first visit = smallest topo rank
    const uint32_t root = ops.find(op.value());
    if (index_of_root[root] == UINT32_MAX) {
      index_of_root[root] = static_cast<uint32_t>(groups.size());
      CapGroup g;
      g.position = graph.topo_rank(op);
      g.merge_class = class_of(op);
      groups.push_back(std::move(g));
    }
    const uint32_t gi = index_of_root[root];
    group_of[op.value()] = gi;
    groups[gi].weight += weight_of(op.value());
  }
  DPLACE_CHECK(groups.size() == count);
  const bool by_communication = options.cap_merge == CoarseningOptions::CapMerge::kCommunication;
  std::vector<uint32_t> receivers;  // distinct other groups consuming one tensor
  for (size_t i = 0; i < n; ++i) {
    const OpId op = OpId::from_index(i);
    const uint32_t a = group_of[i];
    for (OpId s : graph.successors(op)) {
      const uint32_t b = group_of[s.value()];
      if (a == b) continue;
      groups[a].neighbours[b] = true;
      groups[b].neighbours[a] = true;
    }
    if (!by_communication) continue;
    for (uint32_t k = 0; k < graph.num_outputs(op); ++k) {
      const TensorRef t{op, k};
      receivers.clear();
      for (OpId c : graph.consumers(t)) {
        const uint32_t b = group_of[c.value()];
        if (b != a && std::find(receivers.begin(), receivers.end(), b) == receivers.end()) {
          receivers.push_back(b);
        }
      }
      const double send = options.transfer_latency + static_cast<double>(graph.tensor_bytes(t)) *
                                                         options.transfer_weight_per_byte;
      for (uint32_t b : receivers) {
        groups[a].communication[b] += send;
        groups[b].communication[a] += send;
      }
    }
  }
  // Groups are indexed in topological order, so consecutive indices are topological neighbours.
  for (uint32_t g = 0; g + 1 < groups.size(); ++g) {
    groups[g].neighbours.try_emplace(g + 1, false);
    groups[g + 1].neighbours.try_emplace(g, false);
  }

  // Stage 3: cap, down to each target in decreasing order.
  const size_t after_sole_consumer = groups.size();
  auto effective = [&](size_t target) { return target == 0 ? after_sole_consumer : target; };
  std::vector<size_t> order(targets.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return effective(targets[x]) > effective(targets[y]);
  });
  CapMerger merger(std::move(groups), options.cap_merge);
  std::vector<Coarsening> out(targets.size());
  for (size_t index : order) {
    const std::vector<uint32_t> final_of = merger.run(effective(targets[index]));
    // Number the final groups by their smallest topo rank.
    Coarsening& c = out[index];
    c.colocation_groups = graph.num_groups();
    c.after_sole_consumer = after_sole_consumer;
    std::vector<uint32_t> number(final_of.size(), UINT32_MAX);
    c.group_of_op.assign(n, GroupId());
    for (OpId op : graph.topo_order()) {
      const uint32_t f = final_of[group_of[op.value()]];
      if (number[f] == UINT32_MAX) number[f] = static_cast<uint32_t>(c.num_groups++);
      c.group_of_op[op.value()] = GroupId(number[f]);
    }
    c.group_ops.resize(c.num_groups);
    for (size_t i = 0; i < n; ++i) {
      c.group_ops[c.group_of_op[i].value()].push_back(OpId::from_index(i));
    }
  }
  return out;
}

Coarsening common_refinement(const Graph& graph, std::span<const Coarsening> groupings) {
  DPLACE_CHECK(!groupings.empty());
  for (const Coarsening& c : groupings) DPLACE_CHECK(c.group_of_op.size() == graph.num_ops());
  Coarsening out;
  out.colocation_groups = groupings.front().colocation_groups;
  out.after_sole_consumer = groupings.front().after_sole_consumer;
  out.group_of_op.assign(graph.num_ops(), GroupId());
  std::map<std::vector<uint32_t>, uint32_t> number;  // each grouping's group -> common group
  std::vector<uint32_t> key(groupings.size());
  for (OpId op : graph.topo_order()) {  // first visit = smallest topo rank
    for (size_t i = 0; i < groupings.size(); ++i) {
      key[i] = groupings[i].group_of_op[op.value()].value();
    }
    const auto it = number.try_emplace(key, static_cast<uint32_t>(out.num_groups)).first;
    if (it->second == out.num_groups) ++out.num_groups;
    out.group_of_op[op.value()] = GroupId(it->second);
  }
  out.group_ops.resize(out.num_groups);
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    out.group_ops[out.group_of_op[i].value()].push_back(OpId::from_index(i));
  }
  return out;
}

Coarsening coarsen_graph(const Graph& graph, const CoarseningOptions& options) {
  const size_t target = options.target_groups;
  return std::move(
      coarsen_graph_levels(graph, options, std::span<const size_t>(&target, 1)).front());
}

}  // namespace dplace
