#include "dplace/placers/search/anneal.h"

#include <gtest/gtest.h>

#include "dplace/core/error.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

// Few evaluations keep the test fast; the cases are small enough for them.
const std::map<std::string, std::string> kShort = {{"evaluations", "300"}};

TEST(AnnealPlacerTest, ReachesTheOptimumOfEverySmallCase) {
  for (auto make : {two_chains_case, memory_tight_case, colocation_case, cpu_only_case}) {
    const auto c = make();
    const PlacerRun run = run_placer(*c, "anneal", {.params = kShort});
    EXPECT_TRUE(run.sim.feasible) << c->graph().name();
    EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.result.placement);
  }
}

TEST(AnnealPlacerTest, StartsFromTheBestCheapPlacement) {
  auto c = two_chains_case();  // single-gpu 6 s, m-etf 3 s
  const PlacerRun run = run_placer(*c, "anneal", {.params = kShort});
  EXPECT_NE(run.result.note.find("started from m-etf (3 s)"), std::string::npos) << run.result.note;
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 3.0);
}

TEST(AnnealPlacerTest, MovesFromAllOnOneGpuToTheOptimum) {
  for (auto make : {two_chains_case, colocation_case}) {
    const auto c = make();
    std::map<std::string, std::string> params = kShort;
    params["start"] = "single-gpu";
    const PlacerRun run = run_placer(*c, "anneal", {.params = params});
    EXPECT_NE(run.result.note.find("started from single-gpu"), std::string::npos);
    EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.result.placement);
  }
}

TEST(AnnealPlacerTest, LeavesAnOomStartForAPlacementThatFits) {
  auto c = memory_tight_case();
  const PlacerRun run =
      run_placer(*c, "anneal", {.params = {{"evaluations", "300"}, {"start", "single-gpu"}}});
  EXPECT_TRUE(run.sim.feasible) << describe(*c, run.result.placement);
  EXPECT_TRUE(run.result.infeasible_reason.empty());
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9);
}

TEST(AnnealPlacerTest, ExpertStartWithoutAnExpertIsAConfigError) {
  auto c = two_chains_case();
  EXPECT_THROW(run_placer(*c, "anneal", {.params = {{"start", "expert"}}}), ConfigError);
}

TEST(AnnealPlacerTest, SameSeedSamePlacementAndCount) {
  auto c = colocation_case();
  const PlacerRun a = run_placer(*c, "anneal", {.params = kShort, .seed = 42});
  const PlacerRun b = run_placer(*c, "anneal", {.params = kShort, .seed = 42});
  EXPECT_EQ(a.result.placement, b.result.placement);
  EXPECT_EQ(a.result.evaluations, b.result.evaluations);
  EXPECT_EQ(a.result.note, b.result.note);
}

TEST(AnnealPlacerTest, RunsTheRequestedNumberOfEvaluations) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, "anneal", {.params = {{"evaluations", "50"}}});
  // single-gpu (1: its memory check) + m-etf (1) + one per start (2) + 50 moves.
  EXPECT_EQ(run.result.evaluations, 1 + 1 + 2 + 50);
  EXPECT_NE(run.result.note.find("50 moves"), std::string::npos) << run.result.note;
}

// rounds=N: the first wave's two searches start from single-gpu, one reaches the optimum, the
// second wave finds nothing faster and ends the run: four rounds of 50 moves, the same result with
// one thread as with two, and never worse than the single search.
TEST(AnnealPlacerTest, RoundsGoOnFromTheBestUntilAWaveFindsNothing) {
  auto c = two_chains_case();
  std::map<std::string, std::string> params = {{"evaluations", "50"}, {"start", "single-gpu"}};
  const PlacerRun single = run_placer(*c, "anneal", {.params = params});
  params["rounds"] = "8";
  params["threads"] = "1";
  const PlacerRun one = run_placer(*c, "anneal", {.params = params});
  params["threads"] = "2";
  const PlacerRun two = run_placer(*c, "anneal", {.params = params});
  EXPECT_NEAR(one.sim.step_time_s, c->optimum_s(), 1e-9);
  EXPECT_LE(one.sim.step_time_s, single.sim.step_time_s);
  EXPECT_NE(one.result.note.find("4 rounds of 50 moves in waves of two (t_start 0.0001 and 0.001)"),
            std::string::npos)
      << one.result.note;
  // single-gpu's memory check, the start's simulation, four rounds' moves.
  EXPECT_EQ(one.result.evaluations, 1 + 1 + 4 * 50);
  EXPECT_EQ(two.result.placement, one.result.placement);
  EXPECT_EQ(two.result.note, one.result.note);
  EXPECT_THROW(run_placer(*c, "anneal", {.params = {{"rounds", "0"}}}), ConfigError);
}

TEST(AnnealPlacerTest, BudgetIsACapThatTheNoteReports) {
  auto c = two_chains_case();
  const PlacerRun run =
      run_placer(*c, "anneal", {.params = {{"evaluations", "100000000"}}, .budget_seconds = 0.05});
  EXPECT_NE(run.result.note.find("stopped by --budget-seconds"), std::string::npos)
      << run.result.note;
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 3.0);
}

TEST(AnnealPlacerTest, UnknownParamIsAConfigError) {
  auto c = two_chains_case();
  EXPECT_THROW(run_placer(*c, "anneal", {.params = {{"iterations", "5"}}}), ConfigError);
}

TEST(AnnealPlacerTest, DefaultEvaluationsShrinkWithGraphSizeWithinBounds) {
  auto c = two_chains_case();
  EXPECT_EQ(default_anneal_evaluations(c->graph()), 20000);
  GraphBuilder b("big", "test");
  OpId prev = OpId::invalid();
  for (int i = 0; i < 20000; ++i) {
    Op op;
    op.name = "op" + std::to_string(i);
    if (prev.valid()) op.inputs = {{prev, 0}};
    prev = b.add_op(std::move(op));
  }
  const Graph big = std::move(b).build();
  EXPECT_EQ(default_anneal_evaluations(big), 2500);  // 1e8 / (20000 ops + 19999 edges)
}

}  // namespace
}  // namespace dplace::testing
