#include "dplace/ir/coarsening.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace dplace {
namespace {

struct OpSpec {
  std::string name;
  std::vector<std::string> inputs;
  std::string colocate;
};

Graph make_graph(const std::vector<OpSpec>& specs) {
  GraphBuilder b("g", "test");
  std::vector<std::string> names;
  for (const OpSpec& s : specs) names.push_back(s.name);
  for (const OpSpec& s : specs) {
    Op op;
    op.name = s.name;
    op.type = "Op";
    op.colocate = s.colocate;
    for (const std::string& in : s.inputs) {
      const auto it = std::find(names.begin(), names.end(), in);
      op.inputs.push_back({OpId::from_index(it - names.begin()), 0});
    }
    b.add_op(std::move(op));
  }
  return std::move(b).build();
}

// Coarse group of each op, by name.
std::vector<uint32_t> groups_of(const Graph& g, const Coarsening& c) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < g.num_ops(); ++i) out.push_back(c.group_of_op[i].value());
  return out;
}

TEST(CoarseningTest, ColocationGroupsStayTogetherWithoutCap) {
  const Graph g = make_graph({{"a", {}, "L"}, {"b", {"a"}, ""}, {"c", {"b"}, "L"}});
  CoarseningOptions o;
  o.target_groups = 0;
  o.merge_sole_consumer = false;
  const Coarsening c = coarsen_graph(g, o);
  EXPECT_EQ(c.num_groups, 2u);
  EXPECT_EQ(c.colocation_groups, 2u);
  EXPECT_EQ(groups_of(g, c), (std::vector<uint32_t>{0, 1, 0}));
}

TEST(CoarseningTest, OpWithSoleConsumerJoinsIt) {
  // x feeds y and z (two consumers: stays alone); y and z feed only w: both join w.
  const Graph g =
      make_graph({{"x", {}, ""}, {"y", {"x"}, ""}, {"z", {"x"}, ""}, {"w", {"y", "z"}, ""}});
  CoarseningOptions o;
  o.target_groups = 0;
  const Coarsening c = coarsen_graph(g, o);
  EXPECT_EQ(c.after_sole_consumer, 2u);
  EXPECT_EQ(groups_of(g, c), (std::vector<uint32_t>{0, 1, 1, 1}));
  EXPECT_EQ(c.group_ops[1], (std::vector<OpId>{OpId(1), OpId(2), OpId(3)}));
}

TEST(CoarseningTest, ChainOfSoleConsumersCollapses) {
  const Graph g = make_graph({{"a", {}, ""}, {"b", {"a"}, ""}, {"c", {"b"}, ""}});
  CoarseningOptions o;
  o.target_groups = 0;
  EXPECT_EQ(coarsen_graph(g, o).num_groups, 1u);
}

TEST(CoarseningTest, SoleConsumerMergeRespectsWeightLimit) {
  // a(1) -> b(1) -> c(3): a joins b (weight 2 <= 3); {a, b} joining c would weigh 5 > 3.
  const Graph g = make_graph({{"a", {}, ""}, {"b", {"a"}, ""}, {"c", {"b"}, ""}});
  CoarseningOptions o;
  o.target_groups = 0;
  o.op_weight = {1, 1, 3};
  o.sole_consumer_max_weight = 3;
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 0, 1}));
  o.sole_consumer_max_weight = 5;
  EXPECT_EQ(coarsen_graph(g, o).num_groups, 1u);
}

TEST(CoarseningTest, CapMergesLightestJoinedPairFirst) {
  // a(5) -> b(1), a -> c(4), b -> d(1), c -> d. Joined pairs: a-b 6, a-c 9, b-d 2, c-d 5.
  const Graph g =
      make_graph({{"a", {}, ""}, {"b", {"a"}, ""}, {"c", {"a"}, ""}, {"d", {"b", "c"}, ""}});
  CoarseningOptions o;
  o.merge_sole_consumer = false;
  o.op_weight = {5, 1, 4, 1};
  o.target_groups = 3;
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 1, 2, 1}));
  // Next: a-{b,d} 7, a-c 9, c-{b,d} 6: c joins {b,d}.
  o.target_groups = 2;
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 1, 1, 1}));
}

TEST(CoarseningTest, CapMergesTopologicalNeighboursWhenNoEdgeJoinsThem) {
  // Three isolated ops of weight 3, 1, 2: topological neighbours p-q 4, q-r 3.
  const Graph g = make_graph({{"p", {}, ""}, {"q", {}, ""}, {"r", {}, ""}});
  CoarseningOptions o;
  o.op_weight = {3, 1, 2};
  o.target_groups = 2;
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 1, 1}));
}

TEST(CoarseningTest, CapPrefersDataflowEdgeOverLighterTopologicalNeighbour) {
  // p(1) and q(1) are unconnected topological neighbours; q(1) -> r(10) is an edge.
  const Graph g = make_graph({{"p", {}, ""}, {"q", {}, ""}, {"r", {"q"}, ""}});
  CoarseningOptions o;
  o.merge_sole_consumer = false;
  o.op_weight = {1, 1, 10};
  o.target_groups = 2;
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 1, 1}));
}

TEST(CoarseningTest, DifferentMergeClassesNeverMerge) {
  // a -> b -> c, b in another class (e.g. CPU-only): nothing can merge.
  const Graph g = make_graph({{"a", {}, ""}, {"b", {"a"}, ""}, {"c", {"b"}, ""}});
  CoarseningOptions o;
  o.merge_class = {0, 1, 0};
  o.target_groups = 1;
  const Coarsening c = coarsen_graph(g, o);
  EXPECT_EQ(c.num_groups, 3u);
  // With a and b in one class, a joins its sole consumer b; c stays apart.
  o.merge_class = {0, 0, 1};
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 0, 1}));
}

TEST(CoarseningTest, ReachesTargetAndKeepsColocationOnLargerGraph) {
  // A ladder of 40 rungs; every 5th op shares a colocation name with the op 20 positions later.
  std::vector<OpSpec> specs;
  for (int i = 0; i < 80; ++i) {
    OpSpec s{"op" + std::to_string(i), {}, ""};
    if (i >= 2) s.inputs = {"op" + std::to_string(i - 2)};
    if (i >= 3 && i % 2 == 1) s.inputs.push_back("op" + std::to_string(i - 3));
    if (i % 5 == 0) s.colocate = "c" + std::to_string(i % 20);
    specs.push_back(s);
  }
  const Graph g = make_graph(specs);
  for (size_t target : {1u, 7u, 16u, 30u}) {
    CoarseningOptions o;
    o.target_groups = target;
    const Coarsening c = coarsen_graph(g, o);
    EXPECT_EQ(c.num_groups, target);
    for (size_t cg = 0; cg < g.num_groups(); ++cg) {
      std::set<uint32_t> seen;
      for (OpId op : g.group_ops(GroupId::from_index(cg))) {
        seen.insert(c.group_of_op[op.value()].value());
      }
      EXPECT_EQ(seen.size(), 1u) << "colocation group " << g.group_name(GroupId::from_index(cg));
    }
    size_t total = 0;
    uint32_t last_first_rank = 0;
    for (size_t k = 0; k < c.num_groups; ++k) {
      ASSERT_FALSE(c.group_ops[k].empty());
      total += c.group_ops[k].size();
      uint32_t first_rank = UINT32_MAX;
      for (OpId op : c.group_ops[k]) first_rank = std::min(first_rank, g.topo_rank(op));
      if (k > 0) {
        EXPECT_GT(first_rank, last_first_rank) << "groups not in topological order";
      }
      last_first_rank = first_rank;
    }
    EXPECT_EQ(total, g.num_ops());
  }
}

}  // namespace
}  // namespace dplace
