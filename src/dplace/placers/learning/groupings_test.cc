#include "dplace/placers/learning/groupings.h"

#include <gtest/gtest.h>

#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

TEST(LearningGroupingsTest, SharedWeightsGiveAMergedAndAnApartGrouping) {
  const auto c = shared_parameter_case();
  EXPECT_TRUE(is_shared_weight(c->graph(), c->op("W")));
  EXPECT_FALSE(is_shared_weight(c->graph(), c->op("A")));
  LearningGroupingOptions options{.groups = 2};
  const auto both = make_learning_groupings(c->graph(), c->cluster(), c->costs(), options);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].name, "merged");
  EXPECT_EQ(both[1].name, "apart");
  // Apart, W is a group of its own.
  const Coarsening& apart = both[1].levels.back();
  const GroupId w_group = apart.group_of_op[c->op("W").value()];
  EXPECT_EQ(apart.group_ops[w_group.value()].size(), 1u);
  EXPECT_EQ(apart.num_groups, 2u);

  options.shared_weights = "merged";
  const auto merged = make_learning_groupings(c->graph(), c->cluster(), c->costs(), options);
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].name, "merged");
  options.shared_weights = "apart";
  const auto apart_only = make_learning_groupings(c->graph(), c->cluster(), c->costs(), options);
  ASSERT_EQ(apart_only.size(), 1u);
  EXPECT_EQ(apart_only[0].name, "apart");
}

TEST(LearningGroupingsTest, WithoutSharedWeightsOneGroupingWithNestedLevels) {
  const auto c = two_chains_case();
  const auto g = make_learning_groupings(
      c->graph(), c->cluster(), c->costs(),
      LearningGroupingOptions{.groups = 4, .sole_consumer = "off", .levels = 2});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].name, "merged");
  ASSERT_EQ(g[0].levels.size(), 2u);
  EXPECT_EQ(g[0].levels[0].num_groups, 2u);
  EXPECT_EQ(g[0].levels[1].num_groups, 4u);
  // Nested: ops sharing a fine group share a coarse one.
  for (size_t i = 0; i < c->graph().num_ops(); ++i) {
    for (size_t j = 0; j < c->graph().num_ops(); ++j) {
      if (g[0].levels[1].group_of_op[i] == g[0].levels[1].group_of_op[j]) {
        EXPECT_EQ(g[0].levels[0].group_of_op[i], g[0].levels[0].group_of_op[j]);
      }
    }
  }
}

// two_chains: six 1 s ops, and four consumed 1 GB tensors, each sent to the one other GPU over
// the 1 GB/s link: 6 + 4 = 10 s.
TEST(LearningGroupingsTest, StepTimeUpperBoundIsSerialComputeAndTransfers) {
  const auto c = two_chains_case();
  EXPECT_NEAR(step_time_upper_bound_s(c->graph(), c->cluster(), c->costs()), 10.0, 1e-9);
}

}  // namespace
}  // namespace dplace::testing
