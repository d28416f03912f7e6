#include <gtest/gtest.h>

#include "dplace/core/error.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

TEST(MetisPlacerTest, SeparatesTwoIndependentChains) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, "metis");
  const Placement& p = run.result.placement;
  EXPECT_EQ(p[c->op("a0")], p[c->op("a2")]) << describe(*c, p);
  EXPECT_EQ(p[c->op("b0")], p[c->op("b2")]) << describe(*c, p);
  EXPECT_NE(p[c->op("a0")], p[c->op("b0")]) << describe(*c, p);
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, c->optimum_s());
}

TEST(MetisPlacerTest, RepairsItsPartitionToTheOnlySplitThatFits) {
  auto c = memory_tight_case();
  const PlacerRun run = run_placer(*c, "metis");
  const Placement& p = run.result.placement;
  EXPECT_TRUE(run.sim.feasible) << describe(*c, p);
  EXPECT_EQ(p[c->op("A")], p[c->op("D")]) << describe(*c, p);
  EXPECT_EQ(p[c->op("B")], p[c->op("C")]) << describe(*c, p);
}

TEST(MetisPlacerTest, LeavesAnUnbalanceableTwoVertexGraphUncut) {
  // Groups {a, c} (5 s) and b (1 s) cannot be balanced within 5% over two equal GPUs; METIS
  // k-way then keeps the graph uncut on one GPU: 6 s, where the optimum is 5 s.
  auto c = colocation_case();
  const PlacerRun run = run_placer(*c, "metis");
  const Placement& p = run.result.placement;
  EXPECT_EQ(p[c->op("a")], p[c->op("c")]);
  EXPECT_EQ(p[c->op("a")], p[c->op("b")]) << describe(*c, p);
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 6.0);
}

TEST(MetisPlacerTest, MovesACpuOnlyOpItPutOnTheGpuBackToTheCpu) {
  auto c = cpu_only_case();
  const PlacerRun run = run_placer(*c, "metis");
  EXPECT_EQ(run.result.placement[c->op("load")], c->device("/cpu:0"));
  EXPECT_EQ(run.result.placement[c->op("mm1")], c->device("/gpu:0"));
}

TEST(MetisPlacerTest, SameSeedSamePlacement) {
  auto c = colocation_case();
  EXPECT_EQ(run_placer(*c, "metis", {.seed = 7}).result.placement,
            run_placer(*c, "metis", {.seed = 7}).result.placement);
}

TEST(MetisPlacerTest, ImbalanceOutOfRangeIsAConfigError) {
  auto c = two_chains_case();
  EXPECT_THROW(run_placer(*c, "metis", {.params = {{"imbalance", "2"}}}), ConfigError);
}

}  // namespace
}  // namespace dplace::testing
