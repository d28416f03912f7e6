#include "dplace/placers/hsdag/hsdag.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

// HSDAG alone (no polishing), every op a coarse node, a fixed number of samples.
std::map<std::string, std::string> learn_only(int samples, bool parse) {
  return {{"polish", "0"},
          {"sole-consumer", "off"},
          {"samples", std::to_string(samples)},
          {"parse", parse ? "1" : "0"}};
}

HsdagRun hsdag_on(const PlacerCase& c, std::map<std::string, std::string> params,
                  uint64_t seed = 1) {
  PlaceRequest request = case_request(c);
  request.seed = seed;
  request.params = std::move(params);
  return run_hsdag(request, hsdag_options_from_params(request.params));
}

// Not only the best sample (which random sampling would find in these small spaces): the final
// network's likeliest placement is optimal too, and the last batch is mostly optimal samples,
// which only a distribution that has learned gives. With parsing, every node joins a neighbour's
// cluster, so the cases whose optimum splits every pair of neighbours (memory_tight, colocation)
// are learned without it: those are the paper's encoder-placer variant.
TEST(HsdagPlacerTest, LearnsTheOptimumOfSmallCases) {
  using MakeCase = std::unique_ptr<PlacerCase> (*)();
  const MakeCase heavy_light = [] { return heavy_light_case(); };
  struct Case {
    MakeCase make;
    bool parse;
    bool merges;  // the parsing merges nodes (heavy_light has no edges; shared_weight's nodes
                  // are of different allowed classes)
  };
  for (const Case& k :
       {Case{two_chains_case, true, true}, Case{cpu_only_case, true, true},
        Case{heavy_light, true, false}, Case{shared_weight_case, true, false},
        Case{lone_op_case, true, false}, Case{memory_tight_case, false, false},
        Case{colocation_case, false, false}, Case{restricted_fill_case, false, false}}) {
    const auto c = k.make();
    const HsdagRun run = hsdag_on(*c, learn_only(1600, k.parse));
    EXPECT_TRUE(run.best_feasible) << c->graph().name();
    EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.result.placement);
    EXPECT_EQ(run.restarts, 0) << c->graph().name();
    const SimResult mode = c->simulator().run(run.mode_placement);
    EXPECT_TRUE(mode.feasible) << c->graph().name();
    EXPECT_NEAR(mode.step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.mode_placement);
    EXPECT_LT(run.curve.back().mean_step_time_s, 1.05 * c->optimum_s()) << c->graph().name();
    EXPECT_LT(run.curve.back().entropy, 0.1) << c->graph().name();
    if (k.merges) {
      EXPECT_LT(run.mode_clusters, static_cast<int>(run.coarse_nodes)) << c->graph().name();
    } else {
      EXPECT_EQ(run.mode_clusters, static_cast<int>(run.coarse_nodes)) << c->graph().name();
    }
  }
}

// The distribution concentrates as it learns: less entropy and fewer OOM samples at the end.
TEST(HsdagPlacerTest, LearningConcentratesOnFittingPlacements) {
  const auto c = memory_tight_case();  // one placement of 16 fits
  const HsdagRun run = hsdag_on(*c, learn_only(3200, false));
  ASSERT_GE(run.curve.size(), 2u);
  EXPECT_GT(run.curve.front().entropy, 0.6);  // near log 2: small random output weights
  EXPECT_LT(run.curve.back().entropy, 0.5 * run.curve.front().entropy);
  EXPECT_GT(run.curve.front().oom_fraction, 0.5);
  EXPECT_LT(run.curve.back().oom_fraction, 0.2);
}

// wide(40): 42 coarse nodes, each a cluster, or parsed into clusters.
TEST(HsdagPlacerTest, SameSeedSamePlacementAnyThreadCount) {
  const auto c = wide_case(40);
  for (bool parse : {false, true}) {
    auto params = learn_only(800, parse);
    params["threads"] = "1";
    const HsdagRun one = hsdag_on(*c, params, 7);
    params["threads"] = "2";
    const HsdagRun two = hsdag_on(*c, params, 7);
    EXPECT_EQ(one.result.placement, two.result.placement);
    EXPECT_EQ(one.mode_placement, two.mode_placement);
    ASSERT_EQ(one.curve.size(), two.curve.size());
    for (size_t i = 0; i < one.curve.size(); ++i) {
      EXPECT_EQ(one.curve[i].mean_step_time_s, two.curve[i].mean_step_time_s) << i;
      EXPECT_EQ(one.curve[i].entropy, two.curve[i].entropy) << i;
      EXPECT_EQ(one.curve[i].clusters, two.curve[i].clusters) << i;
    }
    const HsdagRun other = hsdag_on(*c, params, 8);
    bool differs = false;
    for (size_t i = 0; i < std::min(one.curve.size(), other.curve.size()); ++i)
      differs |= one.curve[i].mean_step_time_s != other.curve[i].mean_step_time_s;
    EXPECT_TRUE(differs) << "seeds 7 and 8 sampled the same batches";
  }
}

// Nothing fits: the result is the OOM placement with the least memory over capacity.
TEST(HsdagPlacerTest, NothingFitsReturnsTheLeastOverflow) {
  const auto none = oversubscribed_pair_case();
  const PlacerRun run = run_placer(*none, "hsdag", {.params = learn_only(640, false)});
  EXPECT_FALSE(run.sim.feasible);
  EXPECT_EQ(run.sim.total_overflow_bytes(), least_overflow_bytes(*none))
      << describe(*none, run.result.placement);
  EXPECT_NE(run.result.note.find("no sampled placement fits in memory"), std::string::npos)
      << run.result.note;
}

// After restart_patience updates without a new best, fresh weights: the distribution, converged
// before the restart, is spread again after it.
TEST(HsdagPlacerTest, RestartsWithFreshWeights) {
  const auto c = two_chains_case();
  auto params = learn_only(16 * 200, true);
  params["restart-patience"] = "60";
  const HsdagRun run = hsdag_on(*c, params);
  EXPECT_GE(run.restarts, 2);
  int jumps = 0;
  for (size_t i = 1; i < run.curve.size(); ++i) {
    if (run.curve[i].restarts == run.curve[i - 1].restarts) continue;
    EXPECT_LT(run.curve[i - 1].entropy, 0.1) << i;
    EXPECT_GT(run.curve[i].entropy, 0.3) << i;  // log 2 = 0.69 is uniform
    ++jumps;
  }
  EXPECT_EQ(jumps, run.restarts);
}

// Two samples per update are enough to learn (one is refused: it has no spread to learn from).
TEST(HsdagPlacerTest, LearnsWithTwoSamplesPerUpdate) {
  const auto c = memory_tight_case();
  auto params = learn_only(3200, false);
  params["batch"] = "2";
  const HsdagRun run = hsdag_on(*c, params);
  EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5);
  const SimResult mode = c->simulator().run(run.mode_placement);
  EXPECT_TRUE(mode.feasible) << describe(*c, run.mode_placement);
  EXPECT_NEAR(mode.step_time_s, c->optimum_s(), 1e-5);
}

// One placement possible (one GPU): one batch, then the run ends, whatever the budget.
TEST(HsdagPlacerTest, OnePossiblePlacementEndsAfterOneBatch) {
  const auto c = oversubscribed_case();
  const HsdagRun run = hsdag_on(*c, {{"polish", "0"}, {"sole-consumer", "off"}});
  EXPECT_EQ(run.updates, 1);
  EXPECT_EQ(run.evaluations, 1);
  EXPECT_FALSE(run.best_feasible);
}

// Sizes that would take minutes per update are refused before learning.
TEST(HsdagPlacerTest, RefusesAnUpdateTooLarge) {
  const auto c = wide_case(2000);
  try {
    hsdag_on(*c,
             {{"groups", "4096"}, {"sole-consumer", "off"}, {"hidden", "1024"}, {"layers", "16"}});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("multiply-adds"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lower --param hidden"), std::string::npos) << e.what();
  }
}

TEST(HsdagPlacerTest, WritesTheLearningCurve) {
  const std::string path = scratch_path("hsdag_curve.csv");
  auto params = learn_only(160, true);
  params["curve"] = path;
  const HsdagRun run = hsdag_on(*two_chains_case(), params);
  std::ifstream in(path);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header,
            "update,samples,elapsed_s,mean_step_time_s,batch_best_step_time_s,best_step_time_s,"
            "oom_fraction,entropy,clusters,restarts");
  size_t rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    std::vector<std::string> fields;
    std::stringstream row(line);
    for (std::string f; std::getline(row, f, ',');) fields.push_back(f);
    ASSERT_EQ(fields.size(), 10u) << line;
    EXPECT_EQ(fields[0], std::to_string(rows));
    EXPECT_EQ(fields[1], std::to_string(16 * rows));
    EXPECT_EQ(fields[8], "2") << line;  // two chains of three ops: one cluster each
    EXPECT_EQ(fields[9], "0") << line;
  }
  EXPECT_EQ(rows, run.curve.size());
  EXPECT_EQ(rows, 10u);
}

// Both samples of one batch of memory_tight are OOM with probability (15/16)^2; the polishing
// starts from the better, never ends worse and reaches the optimum.
TEST(HsdagPlacerTest, PolishingNeverWorsensTheLearnedPlacement) {
  const auto c = memory_tight_case();
  const PlacerRun run = run_placer(
      *c, "hsdag",
      {.params = {{"samples", "2"}, {"batch", "2"}, {"polish", "300"}, {"sole-consumer", "off"}}});
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

TEST(HsdagPlacerTest, BadParamsAreConfigErrorsNamingTheKey) {
  const auto c = two_chains_case();
  auto message = [&](std::map<std::string, std::string> params) {
    try {
      run_placer(*c, "hsdag", {.params = std::move(params)});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"bogus", "1"}}).find("unknown --param 'bogus'"), std::string::npos);
  EXPECT_NE(message({{"hidden", "0"}}).find("hidden"), std::string::npos);
  EXPECT_NE(message({{"batch", "1"}}).find("--param batch=1 is outside [2, 4096]"),
            std::string::npos);
  EXPECT_NE(message({{"init-scale", "0"}}).find("init-scale"), std::string::npos);
  EXPECT_NE(message({{"lr", "2"}}).find("lr"), std::string::npos);
  EXPECT_NE(message({{"parse", "yes"}}).find("parse"), std::string::npos);
  EXPECT_NE(message({{"shared-weights", "alternate"}}).find("shared-weights"), std::string::npos);
  EXPECT_NE(message({{"curve", ""}}).find("curve"), std::string::npos);
}

}  // namespace
}  // namespace dplace::testing
