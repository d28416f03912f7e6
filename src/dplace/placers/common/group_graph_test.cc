#include "dplace/placers/common/group_graph.h"

#include <gtest/gtest.h>

#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

TEST(GroupGraphTest, SumsTimesAndMemoryOverAColocationGroup) {
  auto c = colocation_case();
  const GroupGraph groups(c->graph(), c->cluster(), c->costs());
  ASSERT_EQ(groups.num_groups(), 2u);
  const GroupId ac = c->graph().group_of(c->op("a"));
  const GroupId b = c->graph().group_of(c->op("b"));
  EXPECT_EQ(c->graph().group_of(c->op("c")), ac);
  EXPECT_DOUBLE_EQ(groups.time_s(ac, c->device("/gpu:1")), 5.0);
  EXPECT_DOUBLE_EQ(groups.reference_time_s(ac), 5.0);
  EXPECT_DOUBLE_EQ(groups.reference_time_s(b), 1.0);
  EXPECT_EQ(groups.output_bytes(ac), 2000);
  EXPECT_EQ(groups.memory_upper_bytes(ac), 2000);
  // One tensor a -> b of 1000 bytes, seen from both ends.
  ASSERT_EQ(groups.neighbors(ac).size(), 1u);
  EXPECT_EQ(groups.neighbors(ac)[0].group, b);
  EXPECT_EQ(groups.neighbors(ac)[0].bytes, 1000);
  ASSERT_EQ(groups.neighbors(b).size(), 1u);
  EXPECT_EQ(groups.total_edge_bytes(), 1000);
  ASSERT_EQ(groups.order().size(), 2u);
  EXPECT_EQ(groups.order()[0], ac);
}

TEST(GroupGraphTest, CountsATensorOncePerConsumerGroup) {
  GraphBuilder builder("fanout", "test");
  const OpId x = builder.add_op({.name = "x", .output_bytes = {100}, .flops = 1});
  builder.add_op({.name = "y1", .inputs = {{x, 0}}, .flops = 1, .colocate = "y"});
  builder.add_op({.name = "y2", .inputs = {{x, 0}}, .flops = 1, .colocate = "y"});
  builder.add_op({.name = "z", .inputs = {{x, 0}}, .flops = 1});
  const Graph graph = std::move(builder).build();
  auto two = two_chains_case();  // any two-GPU cluster
  const CostTable costs(graph, two->cluster());
  const GroupGraph groups(graph, two->cluster(), costs);
  const GroupId gx = graph.group_of(*graph.find_op("x"));
  ASSERT_EQ(groups.neighbors(gx).size(), 2u);
  EXPECT_EQ(groups.neighbors(gx)[0].bytes, 100);  // y1 and y2 share one copy
  EXPECT_EQ(groups.neighbors(gx)[1].bytes, 100);
  EXPECT_EQ(groups.total_edge_bytes(), 200);
}

TEST(GroupGraphTest, RelativeSpeedIsFastestTimeOverDeviceTime) {
  auto c = cpu_only_case();
  const GroupGraph groups(c->graph(), c->cluster(), c->costs());
  // CPU: all four ops, fastest 0.5 + 1 + 1 + 0.1 over 0.5 + 10 + 10 + 1.
  EXPECT_NEAR(groups.relative_speed(c->device("/cpu:0")), 2.6 / 21.5, 1e-12);
  // GPU: mm1, mm2, loss are allowed there and fastest there.
  EXPECT_DOUBLE_EQ(groups.relative_speed(c->device("/gpu:0")), 1.0);
  const GroupId load = c->graph().group_of(c->op("load"));
  EXPECT_FALSE(groups.allows(load, c->device("/gpu:0")));
  EXPECT_EQ(groups.time_s(load, c->device("/gpu:0")), kInfiniteTime);
}

}  // namespace
}  // namespace dplace::testing
