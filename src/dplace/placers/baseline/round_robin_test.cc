#include <gtest/gtest.h>

#include "dplace/core/error.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

TEST(RoundRobinPlacerTest, DealsGroupsToTheGpusInTopologicalOrder) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, "round-robin");
  // Topological order a0 a1 a2 b0 b1 b2 (ties by file order).
  EXPECT_EQ(describe(*c, run.result.placement),
            "a0=/gpu:0 a1=/gpu:1 a2=/gpu:0 b0=/gpu:1 b1=/gpu:0 b2=/gpu:1");
  // Every edge crosses: 1 s op, 1 s transfer, ... : 5 s.
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 5.0);
  EXPECT_TRUE(run.result.infeasible_reason.empty());
}

TEST(RoundRobinPlacerTest, DealsAColocationGroupAsOne) {
  auto c = colocation_case();
  const PlacerRun run = run_placer(*c, "round-robin");
  EXPECT_EQ(describe(*c, run.result.placement), "a=/gpu:0 b=/gpu:1 c=/gpu:0");
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5);
}

TEST(RoundRobinPlacerTest, CpuOnlyOpGoesToTheCpu) {
  auto c = cpu_only_case();
  const PlacerRun run = run_placer(*c, "round-robin");
  EXPECT_EQ(describe(*c, run.result.placement), "load=/cpu:0 mm1=/gpu:0 mm2=/gpu:0 loss=/gpu:0");
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9);
}

TEST(RoundRobinPlacerTest, AllDevicesIncludesTheCpuInTheRotation) {
  auto c = cpu_only_case();
  const PlacerRun run = run_placer(*c, "round-robin", {.params = {{"devices", "all"}}});
  EXPECT_EQ(describe(*c, run.result.placement), "load=/cpu:0 mm1=/gpu:0 mm2=/cpu:0 loss=/gpu:0");
}

TEST(RoundRobinPlacerTest, RepairsAnOomDealToTheOnlySplitThatFits) {
  auto c = memory_tight_case();
  // The deal A, C -> /gpu:0 (11 GB) does not fit; the repair finds {A, D} | {B, C}.
  const PlacerRun run = run_placer(*c, "round-robin");
  EXPECT_TRUE(run.sim.feasible) << describe(*c, run.result.placement);
  EXPECT_TRUE(run.result.infeasible_reason.empty());
  const Placement& p = run.result.placement;
  EXPECT_EQ(p[c->op("A")], p[c->op("D")]);
  EXPECT_EQ(p[c->op("B")], p[c->op("C")]);
  EXPECT_NE(p[c->op("A")], p[c->op("B")]);
  EXPECT_NE(run.result.note.find("memory repair moved"), std::string::npos) << run.result.note;
  EXPECT_GE(run.result.evaluations, 2);
}

TEST(RoundRobinPlacerTest, UnknownParamIsAConfigErrorNamingPlacerAndKey) {
  auto c = two_chains_case();
  try {
    run_placer(*c, "round-robin", {.params = {{"device", "all"}}});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("round-robin"), std::string::npos) << what;
    EXPECT_NE(what.find("'device'"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace dplace::testing
