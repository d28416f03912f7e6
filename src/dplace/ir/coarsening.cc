#include "dplace/ir/coarsening.h"

#include <algorithm>
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
};

struct MergeCandidate {
  bool virtual_edge = false;  // joined only by topological adjacency
  double weight = 0;          // combined weight
  uint32_t first_position = 0;
  uint32_t second_position = 0;
  uint32_t a = 0;
  uint32_t b = 0;
  uint32_t version_a = 0;
  uint32_t version_b = 0;

  // Ordering for a min-heap: real edges first, then lighter, then earlier.
  friend bool operator>(const MergeCandidate& x, const MergeCandidate& y) {
    if (x.virtual_edge != y.virtual_edge) return x.virtual_edge;
    if (x.weight != y.weight) return x.weight > y.weight;
    if (x.first_position != y.first_position) return x.first_position > y.first_position;
    return x.second_position > y.second_position;
  }
};

class CapMerger {
 public:
  explicit CapMerger(std::vector<CapGroup> groups) : groups_(std::move(groups)) {
    alive_ = groups_.size();
    for (uint32_t g = 0; g < groups_.size(); ++g) {
      for (const auto& [h, real] : groups_[g].neighbours) {
        if (g < h) push(g, h, !real);
      }
    }
  }

  // Merges until `target` groups are left or no compatible pair remains. Returns, for every
  // original group, the group it was merged into.
  std::vector<uint32_t> run(size_t target, DisjointSets& sets) {
    while (alive_ > target && !heap_.empty()) {
      const MergeCandidate c = heap_.top();
      heap_.pop();
      const CapGroup& ga = groups_[c.a];
      const CapGroup& gb = groups_[c.b];
      if (!ga.alive || !gb.alive || ga.version != c.version_a || gb.version != c.version_b) {
        continue;  // stale
      }
      merge(c.a, c.b, sets);
    }
    std::vector<uint32_t> into(groups_.size());
    for (uint32_t g = 0; g < groups_.size(); ++g) into[g] = sets.find(g);
    return into;
  }

 private:
  void push(uint32_t a, uint32_t b, bool virtual_edge) {
    const CapGroup& ga = groups_[a];
    const CapGroup& gb = groups_[b];
    if (ga.merge_class != gb.merge_class) return;
    heap_.push({.virtual_edge = virtual_edge,
                .weight = ga.weight + gb.weight,
                .first_position = std::min(ga.position, gb.position),
                .second_position = std::max(ga.position, gb.position),
                .a = a,
                .b = b,
                .version_a = ga.version,
                .version_b = gb.version});
  }

  void merge(uint32_t a, uint32_t b, DisjointSets& sets) {
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
    for (const auto& [h, real] : o.neighbours) {
      if (h == keep) continue;
      CapGroup& x = groups_[h];
      x.neighbours.erase(gone);
      bool& kr = k.neighbours[h];
      kr = kr || real;
      x.neighbours[keep] = kr;
    }
    o.neighbours.clear();
    sets.unite(keep, gone);
    --alive_;
    for (const auto& [h, real] : k.neighbours) push(keep, h, !real);
  }

  std::vector<CapGroup> groups_;
  size_t alive_ = 0;
  std::priority_queue<MergeCandidate, std::vector<MergeCandidate>, std::greater<>> heap_;
};

}  // namespace

Coarsening coarsen_graph(const Graph& graph, const CoarseningOptions& options) {
  const size_t n = graph.num_ops();
  DPLACE_CHECK(options.op_weight.empty() || options.op_weight.size() == n)
      << "op_weight has " << options.op_weight.size() << " entries for " << n << " ops";
  DPLACE_CHECK(options.merge_class.empty() || options.merge_class.size() == graph.num_groups())
      << "merge_class has " << options.merge_class.size() << " entries for " << graph.num_groups()
      << " colocation groups";

  auto class_of = [&](OpId op) -> uint32_t {
    return options.merge_class.empty() ? 0 : options.merge_class[graph.group_of(op).value()];
  };

  Coarsening out;
  // Stage 1: colocation groups.
  DisjointSets ops(n);
  for (size_t g = 0; g < graph.num_groups(); ++g) {
    std::span<const OpId> members = graph.group_ops(GroupId::from_index(g));
    for (OpId op : members) ops.unite(members.front().value(), op.value());
  }
  out.colocation_groups = graph.num_groups();

  // Stage 2: an op whose outputs all go to one op joins that op's group.
  size_t count = graph.num_groups();
  if (options.merge_sole_consumer) {
    auto weight_of = [&](size_t i) {
      return options.op_weight.empty() ? 1.0 : options.op_weight[i];
    };
    std::vector<double> weight(n, 0.0);  // per disjoint-set root
    for (size_t i = 0; i < n; ++i) weight[ops.find(static_cast<uint32_t>(i))] += weight_of(i);
    const double limit = options.sole_consumer_max_weight;
    for (OpId op : graph.topo_order()) {
      std::span<const OpId> succ = graph.successors(op);
      if (succ.size() != 1 || class_of(op) != class_of(succ.front())) continue;
      const uint32_t a = ops.find(op.value());
      const uint32_t b = ops.find(succ.front().value());
      if (a == b || (limit > 0 && weight[a] + weight[b] > limit)) continue;
      const double merged = weight[a] + weight[b];
      ops.unite(a, b);
      weight[ops.find(a)] = merged;
      --count;
    }
  }
  out.after_sole_consumer = count;

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
    groups[gi].weight += options.op_weight.empty() ? 1.0 : options.op_weight[op.value()];
  }
  DPLACE_CHECK(groups.size() == count);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = group_of[i];
    for (OpId s : graph.successors(OpId::from_index(i))) {
      const uint32_t b = group_of[s.value()];
      if (a == b) continue;
      groups[a].neighbours[b] = true;
      groups[b].neighbours[a] = true;
    }
  }
  // Groups are indexed in topological order, so consecutive indices are topological neighbours.
  for (uint32_t g = 0; g + 1 < groups.size(); ++g) {
    groups[g].neighbours.try_emplace(g + 1, false);
    groups[g + 1].neighbours.try_emplace(g, false);
  }

  // Stage 3: cap.
  std::vector<uint32_t> final_of(groups.size());
  std::iota(final_of.begin(), final_of.end(), 0u);
  if (options.target_groups > 0 && groups.size() > options.target_groups) {
    DisjointSets sets(groups.size());
    final_of = CapMerger(std::move(groups)).run(options.target_groups, sets);
  }

  // Number the final groups by their smallest topo rank.
  std::vector<uint32_t> number(final_of.size(), UINT32_MAX);
  out.group_of_op.assign(n, GroupId());
  for (OpId op : graph.topo_order()) {
    const uint32_t f = final_of[group_of[op.value()]];
    if (number[f] == UINT32_MAX) number[f] = static_cast<uint32_t>(out.num_groups++);
    out.group_of_op[op.value()] = GroupId(number[f]);
  }
  out.group_ops.resize(out.num_groups);
  for (size_t i = 0; i < n; ++i) {
    out.group_ops[out.group_of_op[i].value()].push_back(OpId::from_index(i));
  }
  return out;
}

}  // namespace dplace
