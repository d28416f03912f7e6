#include "dplace/placers/hierarchical/hierarchical.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

// The planner alone (no polishing), small networks, a fixed number of samples, a learning rate
// for a few hundred updates, the grouping started as soft stretches of the topological order.
std::map<std::string, std::string> learn_only(int samples) {
  return {{"polish", "0"},        {"samples", std::to_string(samples)},
          {"groups", "8"},        {"hidden", "16"},
          {"lr", "0.01"},         {"prior", "chunks"},
          {"prior-strength", "2"}};
}

HierarchicalRun run_on(const PlacerCase& c, std::map<std::string, std::string> params,
                       uint64_t seed = 1) {
  PlaceRequest request = case_request(c);
  request.seed = seed;
  request.params = std::move(params);
  return run_hierarchical(request, hierarchical_options_from_params(request.params));
}

// Not only the best sample (which random sampling would find in these small spaces): the final
// networks' likeliest placement is optimal too, and the last batch is mostly optimal samples,
// which only distributions that have learned give.
TEST(HierarchicalPlacerTest, LearnsTheOptimumOfSmallCases) {
  using MakeCase = std::unique_ptr<PlacerCase> (*)();
  const MakeCase heavy_light = [] { return heavy_light_case(); };
  struct Case {
    MakeCase make;
    int samples;
  };
  for (const Case& k :
       {Case{two_chains_case, 1600}, Case{cpu_only_case, 1600}, Case{heavy_light, 1600},
        Case{shared_weight_case, 1600}, Case{lone_op_case, 1600}, Case{memory_tight_case, 1600},
        Case{colocation_case, 1600}, Case{restricted_fill_case, 3200}}) {
    const auto c = k.make();
    const HierarchicalRun run = run_on(*c, learn_only(k.samples));
    EXPECT_TRUE(run.best_feasible) << c->graph().name();
    EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.result.placement);
    EXPECT_EQ(run.restarts, 0) << c->graph().name();
    const SimResult mode = c->simulator().run(run.mode_placement);
    EXPECT_TRUE(mode.feasible) << c->graph().name();
    EXPECT_NEAR(mode.step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.mode_placement);
    EXPECT_LT(run.curve.back().mean_step_time_s, 1.05 * c->optimum_s()) << c->graph().name();
  }
}

// The defaults (groups min(256, 20 x devices), hidden 64, lr 0.001) learn too, more slowly.
// (At lr 0.01 this case converged to a 4 s placement by update 60 and stayed.)
TEST(HierarchicalPlacerTest, LearnsWithTheDefaults) {
  const auto c = two_chains_case();
  const HierarchicalRun run = run_on(*c, {{"polish", "0"}, {"samples", "4800"}});
  EXPECT_EQ(run.groups, 40);  // two devices
  EXPECT_LT(run.curve.back().mean_step_time_s, 1.05 * c->optimum_s());
  EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5);
  const SimResult mode = c->simulator().run(run.mode_placement);
  EXPECT_NEAR(mode.step_time_s, c->optimum_s(), 1e-5) << describe(*c, run.mode_placement);
}

// Both distributions concentrate as they learn: less entropy and fewer OOM samples at the end.
TEST(HierarchicalPlacerTest, LearningConcentratesOnFittingPlacements) {
  const auto c = memory_tight_case();  // one placement of 16 fits
  const HierarchicalRun run = run_on(*c, learn_only(3200));
  ASSERT_GE(run.curve.size(), 2u);
  EXPECT_LT(run.curve.back().placer_entropy, 0.5 * run.curve.front().placer_entropy);
  EXPECT_LT(run.curve.back().grouper_entropy, 0.5 * run.curve.front().grouper_entropy);
  EXPECT_GT(run.curve.front().oom_fraction, 0.5);
  EXPECT_LT(run.curve.back().oom_fraction, 0.2);
}

// wide(40): 42 units in 8 groups.
TEST(HierarchicalPlacerTest, SameSeedSamePlacementAnyThreadCount) {
  const auto c = wide_case(40);
  auto params = learn_only(800);
  params["threads"] = "1";
  const HierarchicalRun one = run_on(*c, params, 7);
  params["threads"] = "2";
  const HierarchicalRun two = run_on(*c, params, 7);
  EXPECT_EQ(one.result.placement, two.result.placement);
  EXPECT_EQ(one.mode_placement, two.mode_placement);
  ASSERT_EQ(one.curve.size(), two.curve.size());
  for (size_t i = 0; i < one.curve.size(); ++i) {
    EXPECT_EQ(one.curve[i].mean_step_time_s, two.curve[i].mean_step_time_s) << i;
    EXPECT_EQ(one.curve[i].grouper_entropy, two.curve[i].grouper_entropy) << i;
    EXPECT_EQ(one.curve[i].placer_entropy, two.curve[i].placer_entropy) << i;
  }
  // A batch smaller than the gradient chunks, on three threads.
  params["batch"] = "4";
  params["threads"] = "1";
  const HierarchicalRun small_one = run_on(*c, params, 7);
  params["threads"] = "3";
  const HierarchicalRun small_three = run_on(*c, params, 7);
  EXPECT_EQ(small_one.result.placement, small_three.result.placement);
  ASSERT_EQ(small_one.curve.size(), small_three.curve.size());
  for (size_t i = 0; i < small_one.curve.size(); ++i)
    EXPECT_EQ(small_one.curve[i].placer_entropy, small_three.curve[i].placer_entropy) << i;
  params["batch"] = "16";
  params["threads"] = "2";
  const HierarchicalRun other = run_on(*c, params, 8);
  bool differs = false;
  for (size_t i = 0; i < std::min(one.curve.size(), other.curve.size()); ++i)
    differs |= one.curve[i].mean_step_time_s != other.curve[i].mean_step_time_s;
  EXPECT_TRUE(differs) << "seeds 7 and 8 sampled the same batches";
}

// Nothing fits: the result is the OOM placement with the least memory over capacity.
TEST(HierarchicalPlacerTest, NothingFitsReturnsTheLeastOverflow) {
  const auto none = oversubscribed_pair_case();
  const PlacerRun run = run_placer(*none, "hierarchical", {.params = learn_only(640)});
  EXPECT_FALSE(run.sim.feasible);
  EXPECT_EQ(run.sim.total_overflow_bytes(), least_overflow_bytes(*none))
      << describe(*none, run.result.placement);
  EXPECT_NE(run.result.note.find("no sampled placement fits in memory"), std::string::npos)
      << run.result.note;
}

// After restart_patience updates without a new best, fresh weights: the placer's distribution,
// converged before the restart, is spread again after it.
TEST(HierarchicalPlacerTest, RestartsWithFreshWeights) {
  const auto c = two_chains_case();
  auto params = learn_only(16 * 200);
  params["restart-patience"] = "60";
  const HierarchicalRun run = run_on(*c, params);
  EXPECT_GE(run.restarts, 2);
  int jumps = 0;
  for (size_t i = 1; i < run.curve.size(); ++i) {
    if (run.curve[i].restarts == run.curve[i - 1].restarts) continue;
    EXPECT_LT(run.curve[i - 1].placer_entropy, 0.1) << i;
    EXPECT_GT(run.curve[i].placer_entropy, 0.3) << i;  // log 2 = 0.69 is uniform
    ++jumps;
  }
  EXPECT_EQ(jumps, run.restarts);
}

// Two samples per update are enough to learn (one is refused: it has no spread to learn from).
TEST(HierarchicalPlacerTest, LearnsWithTwoSamplesPerUpdate) {
  const auto c = memory_tight_case();
  auto params = learn_only(3200);
  params["batch"] = "2";
  const HierarchicalRun run = run_on(*c, params);
  EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5);
  const SimResult mode = c->simulator().run(run.mode_placement);
  EXPECT_TRUE(mode.feasible) << describe(*c, run.mode_placement);
  EXPECT_NEAR(mode.step_time_s, c->optimum_s(), 1e-5);
}

// A group whose units may use no device in common (the CPU-only load with the GPU-only mm) takes
// a device one of them may use, and the other unit runs on its own device (soft placement): every
// placement is valid, and the optimum is still learned.
TEST(HierarchicalPlacerTest, UnitsWithNoDeviceInCommonShareAGroupBySoftPlacement) {
  const auto c = disjoint_devices_case();
  auto params = learn_only(640);
  params["groups"] = "2";
  params["prior"] = "none";
  const HierarchicalRun run = run_on(*c, params);
  EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5) << describe(*c, run.result.placement);
  // Two groups for three units: in most samples load and mm shared a group.
  const PlacerRun placed = run_placer(*c, "hierarchical", {.params = params});
  EXPECT_TRUE(placed.sim.feasible);  // place() checks every op's device
}

// The coarsening prior starts every unit in its group of the learning placers' grouping: on
// two_chains at 2 groups, one chain per group (the coarsening's chains), which the placer puts on
// two GPUs at once.
TEST(HierarchicalPlacerTest, CoarseningPriorStartsFromTheLearningGrouping) {
  const auto c = two_chains_case();
  const HierarchicalRun run = run_on(*c, {{"polish", "0"},
                                          {"samples", "16"},
                                          {"groups", "2"},
                                          {"prior", "coarsening"},
                                          {"prior-strength", "30"}});
  ASSERT_EQ(run.curve.size(), 1u);
  EXPECT_LT(run.curve[0].grouper_entropy, 1e-9);  // e^-30: every unit in its coarse group
  EXPECT_EQ(run.curve[0].used_groups, 2.0);
  EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5);  // some sample split the groups
}

// However small the budget, one batch is sampled.
TEST(HierarchicalPlacerTest, SamplesOneBatchWhateverTheBudget) {
  const auto c = two_chains_case();
  PlaceRequest request = case_request(*c);
  request.budget_seconds = 0;
  request.params = learn_only(0);
  const HierarchicalRun run =
      run_hierarchical(request, hierarchical_options_from_params(request.params));
  EXPECT_EQ(run.updates, 1);
  EXPECT_EQ(run.samples, 16);
}

// One placement possible (one GPU): one batch, then the run ends, whatever the budget.
TEST(HierarchicalPlacerTest, OnePossiblePlacementEndsAfterOneBatch) {
  const auto c = oversubscribed_case();
  const HierarchicalRun run = run_on(*c, {{"polish", "0"}});
  EXPECT_EQ(run.updates, 1);
  EXPECT_EQ(run.evaluations, 1);
  EXPECT_FALSE(run.best_feasible);
}

// Sizes that would take minutes per update are refused before learning.
TEST(HierarchicalPlacerTest, RefusesAnUpdateTooLarge) {
  const auto c = wide_case(2000);
  try {
    run_on(*c, {{"groups", "4096"}, {"hidden", "1024"}});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("multiply-adds"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lower --param hidden"), std::string::npos) << e.what();
  }
}

TEST(HierarchicalPlacerTest, WritesTheLearningCurve) {
  const std::string path = scratch_path("hierarchical_curve.csv");
  auto params = learn_only(160);
  params["curve"] = path;
  const HierarchicalRun run = run_on(*two_chains_case(), params);
  std::ifstream in(path);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header,
            "update,samples,elapsed_s,mean_step_time_s,batch_best_step_time_s,best_step_time_s,"
            "oom_fraction,grouper_entropy,placer_entropy,used_groups,restarts");
  size_t rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    std::vector<std::string> fields;
    std::stringstream row(line);
    for (std::string f; std::getline(row, f, ',');) fields.push_back(f);
    ASSERT_EQ(fields.size(), 11u) << line;
    EXPECT_EQ(fields[0], std::to_string(rows));
    EXPECT_EQ(fields[1], std::to_string(16 * rows));
    const double used = std::stod(fields[9]);
    EXPECT_GE(used, 1.0) << line;
    EXPECT_LE(used, 6.0) << line;  // six units
    EXPECT_EQ(fields[10], "0") << line;
  }
  EXPECT_EQ(rows, run.curve.size());
  EXPECT_EQ(rows, 10u);
}

// Both samples of one batch of memory_tight are OOM with probability (15/16)^2; the polishing
// starts from the better, never ends worse and reaches the optimum.
TEST(HierarchicalPlacerTest, PolishingNeverWorsensTheLearnedPlacement) {
  const auto c = memory_tight_case();
  const PlacerRun run = run_placer(
      *c, "hierarchical",
      {.params = {{"samples", "2"}, {"batch", "2"}, {"polish", "300"}, {"groups", "4"}}});
  const std::string& note = run.result.note;
  const size_t learned_at = note.find("polished by anneal: learned ");
  const size_t polished_at = note.find(", polished ");
  ASSERT_NE(learned_at, std::string::npos) << note;
  ASSERT_NE(polished_at, std::string::npos) << note;
  const double learned_s = std::stod(note.substr(learned_at + 28));
  const double polished_s = std::stod(note.substr(polished_at + 11));
  EXPECT_LE(polished_s, learned_s) << note;
  EXPECT_TRUE(run.sim.feasible);
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5);
}

TEST(HierarchicalPlacerTest, BadParamsAreConfigErrorsNamingTheKey) {
  const auto c = two_chains_case();
  auto message = [&](std::map<std::string, std::string> params) {
    try {
      run_placer(*c, "hierarchical", {.params = std::move(params)});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"bogus", "1"}}).find("unknown --param 'bogus'"), std::string::npos);
  EXPECT_NE(message({{"hidden", "7"}}).find("--param hidden=7 must be even"), std::string::npos);
  EXPECT_NE(message({{"hidden", "0"}}).find("hidden"), std::string::npos);
  EXPECT_NE(message({{"groups", "1"}}).find("groups"), std::string::npos);
  EXPECT_NE(message({{"batch", "1"}}).find("--param batch=1 is outside [2, 4096]"),
            std::string::npos);
  EXPECT_NE(message({{"init-scale", "0"}}).find("init-scale"), std::string::npos);
  EXPECT_NE(message({{"lr", "2"}}).find("lr"), std::string::npos);
  EXPECT_NE(message({{"prior", "grid"}}).find("prior"), std::string::npos);
  EXPECT_NE(message({{"prior-strength", "-1"}}).find("prior-strength"), std::string::npos);
  EXPECT_NE(message({{"grad-clip", "x"}}).find("grad-clip"), std::string::npos);
  EXPECT_NE(message({{"curve", ""}}).find("curve"), std::string::npos);
}

}  // namespace
}  // namespace dplace::testing
