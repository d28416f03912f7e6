#include <gtest/gtest.h>

#include "dplace/core/error.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

class ScotchFamilyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ScotchFamilyTest, SeparatesTwoIndependentChains) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, GetParam());
  const Placement& p = run.result.placement;
  // Balanced load with no cut edge: one chain per GPU, the optimum.
  EXPECT_EQ(p[c->op("a0")], p[c->op("a1")]);
  EXPECT_EQ(p[c->op("a1")], p[c->op("a2")]);
  EXPECT_EQ(p[c->op("b0")], p[c->op("b1")]);
  EXPECT_EQ(p[c->op("b1")], p[c->op("b2")]);
  EXPECT_NE(p[c->op("a0")], p[c->op("b0")]) << describe(*c, p);
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, c->optimum_s());
}

TEST_P(ScotchFamilyTest, RepairsItsMappingToTheOnlySplitThatFits) {
  auto c = memory_tight_case();
  const PlacerRun run = run_placer(*c, GetParam());
  const Placement& p = run.result.placement;
  EXPECT_TRUE(run.sim.feasible) << describe(*c, p);
  EXPECT_TRUE(run.result.infeasible_reason.empty()) << run.result.infeasible_reason;
  EXPECT_EQ(p[c->op("A")], p[c->op("D")]) << describe(*c, p);
  EXPECT_EQ(p[c->op("B")], p[c->op("C")]) << describe(*c, p);
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9);
}

TEST_P(ScotchFamilyTest, KeepsTheColocationGroupApartFromTheLightOp) {
  auto c = colocation_case();
  const PlacerRun run = run_placer(*c, GetParam());
  const Placement& p = run.result.placement;
  EXPECT_NE(p[c->op("a")], p[c->op("b")]) << describe(*c, p);
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5);
}

TEST_P(ScotchFamilyTest, IsDeterministic) {
  auto c = two_chains_case();
  EXPECT_EQ(run_placer(*c, GetParam()).result.placement,
            run_placer(*c, GetParam()).result.placement);
}

INSTANTIATE_TEST_SUITE_P(ScotchAndMincut, ScotchFamilyTest, ::testing::Values("scotch", "mincut"));

TEST(ScotchPlacerTest, PutsTheCpuOnlyOpOnTheCpuAndBalancesTheRestBySpeed) {
  auto c = cpu_only_case();
  const PlacerRun run = run_placer(*c, "scotch");
  // The CPU is ~8x slower on this graph (speed 2.6 / 21.5): its share of the 2.6 s of work is
  // about 0.3 s, already taken by the 0.5 s load op, so the GPU gets the rest: the optimum.
  EXPECT_EQ(describe(*c, run.result.placement), "load=/cpu:0 mm1=/gpu:0 mm2=/gpu:0 loss=/gpu:0");
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9);
}

TEST(MincutPlacerTest, LeavesTheCpuOutOfTheTargets) {
  auto c = cpu_only_case();
  const PlacerRun run = run_placer(*c, "mincut");
  EXPECT_EQ(describe(*c, run.result.placement), "load=/cpu:0 mm1=/gpu:0 mm2=/gpu:0 loss=/gpu:0");
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9);
}

TEST(ScotchPlacerTest, MapsAHeavyComputeGraphOntoTheCpuInProportionToItsSpeed) {
  // Sixteen independent 1 s GPU / 2 s CPU ops on CPU + GPU: speeds 1 and 0.5, so Scotch's
  // balanced mapping gives the CPU about a third of the ops (the 2017 paper's reason Scotch
  // trails single-GPU: it loads the slow CPU).
  GraphBuilder b("wide", "test");
  for (int i = 0; i < 16; ++i) {
    Op op;
    op.name = "op" + std::to_string(i);
    op.output_bytes = {4};
    op.time_s = {{"gpu", 1.0}, {"cpu", 2.0}};
    b.add_op(std::move(op));
  }
  auto base = cpu_only_case();
  const PlacerCase c(std::move(b).build(), base->cluster(), 16.0 / 3.0);
  const PlacerRun run = run_placer(c, "scotch");
  int on_cpu = 0;
  for (DeviceId d : run.result.placement.device_of_op) on_cpu += d == c.device("/cpu:0");
  EXPECT_GE(on_cpu, 4);
  EXPECT_LE(on_cpu, 6);
}

TEST(ScotchPlacerTest, UnknownStrategyIsAConfigError) {
  auto c = two_chains_case();
  EXPECT_THROW(run_placer(*c, "scotch", {.params = {{"strategy", "best"}}}), ConfigError);
}

}  // namespace
}  // namespace dplace::testing
