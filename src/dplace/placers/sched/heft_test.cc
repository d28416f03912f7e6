// Shared expectations of the list schedulers that reach the optimum of the small cases (heft,
// m-etf, m-sct; m-sct misses the colocation one, see m_sct_test.cc), plus HEFT-specific checks.
// m-topo has its own file: it balances memory, not time.
#include <gtest/gtest.h>

#include "dplace/core/error.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

class ListSchedulerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ListSchedulerTest, PutsEachChainOnItsOwnGpu) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, GetParam());
  EXPECT_EQ(describe(*c, run.result.placement),
            "a0=/gpu:0 a1=/gpu:0 a2=/gpu:0 b0=/gpu:1 b1=/gpu:1 b2=/gpu:1");
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, c->optimum_s());
  EXPECT_EQ(run.result.evaluations, 1);  // the memory check
}

TEST_P(ListSchedulerTest, FindsTheOnlySplitThatFitsInMemory) {
  auto c = memory_tight_case();
  const PlacerRun run = run_placer(*c, GetParam());
  EXPECT_EQ(describe(*c, run.result.placement), "A=/gpu:0 B=/gpu:1 C=/gpu:1 D=/gpu:0");
  EXPECT_TRUE(run.sim.feasible);
  EXPECT_TRUE(run.result.infeasible_reason.empty());
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-12);
}

TEST_P(ListSchedulerTest, KeepsTheCpuOnlyOpOnTheCpuAndTheRestOnTheGpu) {
  auto c = cpu_only_case();
  const PlacerRun run = run_placer(*c, GetParam());
  EXPECT_EQ(describe(*c, run.result.placement), "load=/cpu:0 mm1=/gpu:0 mm2=/gpu:0 loss=/gpu:0");
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9);
}

TEST_P(ListSchedulerTest, SaysWhyWhenNoPlacementFits) {
  auto c = oversubscribed_case();
  // A (8 GB) fits on the one 10.5 GB GPU; B (6 GB more) fits nowhere.
  const PlacerRun run = run_placer(*c, GetParam());
  EXPECT_FALSE(run.sim.feasible);
  EXPECT_NE(run.result.infeasible_reason.find("op 'B' (group 'B') fits on no allowed device"),
            std::string::npos)
      << run.result.infeasible_reason;
}

TEST_P(ListSchedulerTest, TheSimulatorNotTheEstimateDecidesFeasibility) {
  auto c = memory_tight_case();
  // With a quarter of each GPU (2.6 GB) A's 8 GB fit nowhere in the estimate, so the schedule is
  // forced; the simulated placement still fits the real 10.5 GB, and that is what counts.
  const PlacerRun run = run_placer(*c, GetParam(), {.params = {{"memory_fraction", "0.25"}}});
  EXPECT_EQ(run.sim.feasible, run.result.infeasible_reason.empty()) << run.result.infeasible_reason;
}

TEST_P(ListSchedulerTest, RejectsAnUnknownParam) {
  auto c = two_chains_case();
  EXPECT_THROW(run_placer(*c, GetParam(), {.params = {{"memory", "1"}}}), ConfigError);
}

TEST_P(ListSchedulerTest, KeepsTheReadersOfASharedWeightTogether) {
  // Placing A puts W on A's GPU; B must then see W there (2 s away from the other GPU), not as
  // present everywhere, which it was before W was placed.
  auto c = shared_weight_case();
  const PlacerRun run = run_placer(*c, GetParam());
  EXPECT_EQ(run.result.placement[c->op("A")], run.result.placement[c->op("B")])
      << describe(*c, run.result.placement);
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, c->optimum_s());
}

INSTANTIATE_TEST_SUITE_P(Optimal, ListSchedulerTest, ::testing::Values("heft", "m-etf", "m-sct"));

// m-sct is not here: its favourite child follows the parent (m_sct_test.cc).
class ColocationOptimalTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ColocationOptimalTest, SendsTheLightOpAwayFromTheColocatedPair) {
  auto c = colocation_case();
  const PlacerRun run = run_placer(*c, GetParam());
  EXPECT_EQ(describe(*c, run.result.placement), "a=/gpu:0 b=/gpu:1 c=/gpu:0");
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(HeftAndMEtf, ColocationOptimalTest, ::testing::Values("heft", "m-etf"));

TEST(HeftPlacerTest, UsesTheCpuWhenItFinishesEarlier) {
  // HEFT compares finish times on every device: with the GPU busy for 10 s, a 2 s CPU op that is
  // independent of it finishes first on the CPU.
  GraphBuilder b("heft", "test");
  b.add_op(timed("big", {}, 10.0, 100.0, 4));
  b.add_op(timed("small", {}, 1.0, 2.0, 4));
  auto base = cpu_only_case();
  const PlacerCase c(std::move(b).build(), base->cluster(), 10.0);
  const PlacerRun run = run_placer(c, "heft");
  EXPECT_EQ(describe(c, run.result.placement), "big=/gpu:0 small=/cpu:0");
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 10.0);
}

TEST(HeftPlacerTest, ATransferMayFillAnEarlierGapOfItsLinkInTheEstimateToo) {
  // On /gpu:1, C's second input X may cross the link before its first, Y (1.0-1.4 s, then Y
  // 1.5-2.0 s): C ends at 2.5 s there against 2.7 s on /gpu:0. HEFT must estimate the transfers as
  // it books them; queueing X behind Y in the estimate (ending at 2.9 s) kept C on /gpu:0.
  auto c = link_gap_case();
  const PlacerRun run = run_placer(*c, "heft");
  EXPECT_EQ(run.result.placement[c->op("C")], c->device("/gpu:1"))
      << describe(*c, run.result.placement);
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, c->optimum_s());
}

}  // namespace
}  // namespace dplace::testing
