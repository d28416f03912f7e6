#include "dplace/ir/coarsening.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace dplace {
namespace {

struct OpSpec {
  std::string name;
  std::vector<std::string> inputs;
  std::string colocate;
  int64_t output_bytes = 0;
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
    op.output_bytes = {s.output_bytes};
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

TEST(CoarseningTest, ChainsOnlySoleConsumerSkipsProducersFanningIn) {
  // x feeds y and z; y and z feed only w (a sum of two working producers): the paper's rule puts
  // y and z with w (and w, v, u and c, each with one consumer, together), the chains-only rule
  // leaves y, z and w apart. v -> u is a chain link: u's other input, the weightless c, does no
  // work; c itself fans in next to v and stays apart.
  const Graph g = make_graph({{"x", {}, ""},
                              {"y", {"x"}, ""},
                              {"z", {"x"}, ""},
                              {"w", {"y", "z"}, ""},
                              {"c", {}, ""},
                              {"v", {"w"}, ""},
                              {"u", {"v", "c"}, ""}});
  CoarseningOptions o;
  o.target_groups = 0;
  o.op_weight = {1, 1, 1, 1, 0, 1, 1};
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 1, 1, 1, 1, 1, 1}));
  o.sole_consumer_chains_only = true;
  const Coarsening c = coarsen_graph(g, o);
  EXPECT_EQ(c.after_sole_consumer, 5u);
  EXPECT_EQ(groups_of(g, c), (std::vector<uint32_t>{0, 1, 2, 3, 4, 3, 3}));

  // A running sum inside one colocation group S: s1 = f(p), s2 = s1 + q. Each of p and q is the
  // only outside producer of its consumer, but S takes in only the first of them.
  const Graph sum =
      make_graph({{"p", {}, ""}, {"q", {}, ""}, {"s1", {"p"}, "S"}, {"s2", {"s1", "q"}, "S"}});
  CoarseningOptions so;
  so.target_groups = 0;
  EXPECT_EQ(coarsen_graph(sum, so).num_groups, 1u);
  so.sole_consumer_chains_only = true;
  EXPECT_EQ(groups_of(sum, coarsen_graph(sum, so)), (std::vector<uint32_t>{0, 1, 0, 0}));
}

TEST(CoarseningTest, CommunicationCapMergesHeavyExchangesFirst) {
  // a(3) -> b(1) -> c(1) -> d(3); a -> b and c -> d carry 1000 bytes, b -> c 10 bytes, at 0.01
  // per byte: a-b and c-d exchange 10, more than their lighter side computes (1); b-c exchanges
  // 0.1. The lightest-pair rule would join b and c first (2) and then a (tie with d, a earlier).
  const Graph g = make_graph(
      {{"a", {}, "", 1000}, {"b", {"a"}, "", 10}, {"c", {"b"}, "", 1000}, {"d", {"c"}, "", 0}});
  CoarseningOptions o;
  o.merge_sole_consumer = false;
  o.op_weight = {3, 1, 1, 3};
  o.target_groups = 2;
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 0, 0, 1}));
  o.cap_merge = CoarseningOptions::CapMerge::kCommunication;
  o.transfer_weight_per_byte = 0.01;
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 0, 1, 1}));
  // A latency per tensor counts too: at 5 per tensor and nothing per byte, every joined pair
  // exchanges 5, more than either side of b-c computes, and b-c (cost 1 - 5) goes first.
  o.transfer_weight_per_byte = 0;
  o.transfer_latency = 5;
  EXPECT_EQ(groups_of(g, coarsen_graph(g, o)), (std::vector<uint32_t>{0, 0, 0, 1}));
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

TEST(CoarseningTest, LevelsAreNestedAndMatchSingleRuns) {
  std::vector<OpSpec> specs;
  for (int i = 0; i < 60; ++i) {
    OpSpec s{"op" + std::to_string(i), {}, "", 100 * (i % 7)};
    if (i >= 2) s.inputs = {"op" + std::to_string(i - 2)};
    if (i >= 3 && i % 3 == 0) s.inputs.push_back("op" + std::to_string(i - 3));
    specs.push_back(s);
  }
  const Graph g = make_graph(specs);
  for (auto rank :
       {CoarseningOptions::CapMerge::kLightestPair, CoarseningOptions::CapMerge::kCommunication}) {
    CoarseningOptions o;
    o.merge_sole_consumer = false;
    o.cap_merge = rank;
    o.transfer_weight_per_byte = 0.01;
    for (size_t i = 0; i < g.num_ops(); ++i)
      o.op_weight.push_back(1.0 + static_cast<double>(i % 5));
    // Any order of targets; 0 is the uncapped grouping.
    const std::vector<size_t> targets = {8, 0, 30, 3, 15};
    const std::vector<Coarsening> levels = coarsen_graph_levels(g, o, targets);
    ASSERT_EQ(levels.size(), targets.size());
    EXPECT_EQ(levels[1].num_groups, g.num_ops());
    for (size_t i = 0; i < targets.size(); ++i) {
      o.target_groups = targets[i];
      const Coarsening single = coarsen_graph(g, o);
      EXPECT_EQ(groups_of(g, levels[i]), groups_of(g, single)) << "target " << targets[i];
      if (targets[i] > 0) {
        EXPECT_EQ(levels[i].num_groups, targets[i]);
      }
      // Nested: ops sharing a group here share one in every coarser grouping.
      for (size_t j = 0; j < targets.size(); ++j) {
        if (levels[j].num_groups >= levels[i].num_groups) continue;
        for (const std::vector<OpId>& members : levels[i].group_ops) {
          for (OpId op : members) {
            EXPECT_EQ(levels[j].group_of_op[op.value()],
                      levels[j].group_of_op[members.front().value()]);
          }
        }
      }
    }
  }
}

TEST(CoarseningTest, CommonRefinementSplitsWhereAnyGroupingDoes) {
  // a -> b -> c -> d -> e; one grouping {a b c}{d e}, the other {a b}{c d e}.
  const Graph g = make_graph({{"a", {}, "", 1},
                              {"b", {"a"}, "", 1},
                              {"c", {"b"}, "", 1},
                              {"d", {"c"}, "", 1},
                              {"e", {"d"}, "", 1}});
  auto grouping = [&](const std::vector<uint32_t>& group_of) {
    Coarsening c;
    c.colocation_groups = 5;
    for (uint32_t x : group_of) c.group_of_op.push_back(GroupId(x));
    c.num_groups = *std::max_element(group_of.begin(), group_of.end()) + 1;
    return c;
  };
  const std::vector<Coarsening> both = {grouping({0, 0, 0, 1, 1}), grouping({0, 0, 1, 1, 1})};
  const Coarsening common = common_refinement(g, both);
  EXPECT_EQ(groups_of(g, common), (std::vector<uint32_t>{0, 0, 1, 2, 2}));
  EXPECT_EQ(common.num_groups, 3u);
  EXPECT_EQ(common.colocation_groups, 5u);
  ASSERT_EQ(common.group_ops.size(), 3u);
  EXPECT_EQ(common.group_ops[1], (std::vector<OpId>{OpId::from_index(2)}));
  // One grouping is its own common refinement.
  EXPECT_EQ(groups_of(g, common_refinement(g, std::span(both).first(1))),
            (std::vector<uint32_t>{0, 0, 0, 1, 1}));
}

}  // namespace
}  // namespace dplace
