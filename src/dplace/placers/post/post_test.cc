#include "dplace/placers/post/post.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

// The paper's method alone (no polishing), every op a group, a fixed number of samples.
std::map<std::string, std::string> learn_only(int samples) {
  return {{"polish", "0"}, {"sole-consumer", "off"}, {"samples", std::to_string(samples)}};
}

PostRun post_on(const PlacerCase& c, std::map<std::string, std::string> params, uint64_t seed = 1) {
  PlaceRequest request = case_request(c);
  request.seed = seed;
  request.params = std::move(params);
  return run_post(request, post_options_from_params(request.params));
}

TEST(PostPlacerTest, LearnsTheOptimumOfSmallCases) {
  using MakeCase = std::unique_ptr<PlacerCase> (*)();
  const MakeCase heavy_light = [] { return heavy_light_case(); };
  for (MakeCase make : {two_chains_case, memory_tight_case, colocation_case, cpu_only_case,
                        heavy_light, shared_weight_case, restricted_fill_case}) {
    const auto c = make();
    const PlacerRun run = run_placer(*c, "post", {.params = learn_only(1600)});
    EXPECT_TRUE(run.sim.feasible) << c->graph().name();
    EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.result.placement);
  }
}

// Each of the two steps learns on its own: PPO alone (no cross-entropy step within the run) and
// the cross-entropy method alone (no PPO epochs).
TEST(PostPlacerTest, EachStepLearnsAlone) {
  const auto c = memory_tight_case();  // one placement of 16 fits
  auto ppo_only = learn_only(3200);
  ppo_only["ce-every"] = "1000000";
  auto ce_only = learn_only(3200);
  ce_only["epochs"] = "0";
  for (const auto& params : {ppo_only, ce_only}) {
    const PostRun run = post_on(*c, params);
    EXPECT_TRUE(run.best_feasible);
    EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5);
    // The distribution concentrates: the last batch samples with less entropy than the first.
    ASSERT_GE(run.curve.size(), 2u);
    EXPECT_LT(run.curve.back().entropy, 0.5 * run.curve.front().entropy);
  }
}

// A cross-entropy step with one elite and no mixing makes the distribution that elite: the next
// batch samples nothing else, with zero entropy, and none better.
TEST(PostPlacerTest, CrossEntropyStepFitsTheElite) {
  const auto c = two_chains_case();
  auto params = learn_only(32);
  params["ce-every"] = "1";
  params["elite"] = "0.01";  // one of the 16 samples
  params["mix"] = "0";
  const PostRun run = post_on(*c, params);
  ASSERT_EQ(run.curve.size(), 2u);
  EXPECT_TRUE(run.curve[0].ce_step);
  EXPECT_NEAR(run.curve[0].entropy, std::log(2.0), 1e-12);  // uniform over two GPUs
  EXPECT_NEAR(run.curve[1].entropy, 0.0, 1e-9);
  EXPECT_DOUBLE_EQ(run.curve[1].mean_step_time_s, run.curve[0].batch_best_step_time_s);
  EXPECT_DOUBLE_EQ(run.curve[1].batch_best_step_time_s, run.curve[0].batch_best_step_time_s);
  EXPECT_EQ(run.ce_steps, 2);
  // The second batch repeats one placement: simulated once, or not at all when the first batch
  // simulated it already.
  EXPECT_LE(run.evaluations, 16 + 1);
}

TEST(PostPlacerTest, SameSeedSamePlacementAnyThreadCount) {
  const auto c = restricted_fill_case();
  auto params = learn_only(800);
  params["threads"] = "1";
  const PostRun one = post_on(*c, params, 7);
  params["threads"] = "2";
  const PostRun two = post_on(*c, params, 7);
  EXPECT_EQ(one.result.placement, two.result.placement);
  ASSERT_EQ(one.curve.size(), two.curve.size());
  for (size_t i = 0; i < one.curve.size(); ++i) {
    EXPECT_EQ(one.curve[i].mean_step_time_s, two.curve[i].mean_step_time_s) << i;
    EXPECT_EQ(one.curve[i].entropy, two.curve[i].entropy) << i;
  }
  const PostRun other = post_on(*c, params, 8);
  bool differs = false;
  for (size_t i = 0; i < std::min(one.curve.size(), other.curve.size()); ++i)
    differs |= one.curve[i].mean_step_time_s != other.curve[i].mean_step_time_s;
  EXPECT_TRUE(differs) << "seeds 7 and 8 sampled the same batches";
}

// Nothing fits: the result is the OOM placement with the least memory over capacity, and the
// note says no sample fitted.
TEST(PostPlacerTest, NothingFitsReturnsTheLeastOverflow) {
  const auto c = oversubscribed_gpu_with_cpu_case();
  // With the CPU every op fits there: the learned placement fits.
  const PlacerRun fits = run_placer(*c, "post", {.params = learn_only(800)});
  EXPECT_TRUE(fits.sim.feasible) << describe(*c, fits.result.placement);

  const auto none = oversubscribed_case();
  const PlacerRun run = run_placer(*none, "post", {.params = learn_only(160)});
  EXPECT_FALSE(run.sim.feasible);
  EXPECT_NE(run.result.note.find("no sampled placement fits in memory"), std::string::npos)
      << run.result.note;
}

TEST(PostPlacerTest, RestartsAfterPatienceAndAlternatesGroupings) {
  const auto c = shared_weight_case();
  auto params = learn_only(16 * 40);
  params["restart-patience"] = "5";
  params["sole-consumer"] = "chains";
  const PostRun run = post_on(*c, params);
  EXPECT_GE(run.restarts, 1);
  if (run.groupings.size() == 2) {
    bool saw_second = false;
    for (const PostCurvePoint& p : run.curve) saw_second |= p.grouping == 1;
    EXPECT_TRUE(saw_second);
  }
  EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5);
}

TEST(PostPlacerTest, WritesTheLearningCurve) {
  const std::string path = scratch_path("post_curve.csv");
  auto params = learn_only(160);
  params["curve"] = path;
  const PostRun run = post_on(*two_chains_case(), params);
  std::ifstream in(path);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header,
            "update,samples,elapsed_s,mean_step_time_s,batch_best_step_time_s,best_step_time_s,"
            "oom_fraction,entropy,step,restarts,grouping");
  size_t rows = 0;
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, run.curve.size());
  EXPECT_EQ(rows, 10u);
}

TEST(PostPlacerTest, PolishingNeverWorsensTheLearnedPlacement) {
  const auto c = memory_tight_case();
  const PlacerRun run = run_placer(*c, "post", {.params = {{"samples", "160"}, {"polish", "300"}}});
  EXPECT_TRUE(run.sim.feasible);
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5);
  EXPECT_NE(run.result.note.find("polished by anneal: learned "), std::string::npos)
      << run.result.note;
}

TEST(PostPlacerTest, BadParamsAreConfigErrorsNamingTheKey) {
  const auto c = two_chains_case();
  auto message = [&](std::map<std::string, std::string> params) {
    try {
      run_placer(*c, "post", {.params = std::move(params)});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"bogus", "1"}}).find("unknown --param 'bogus'"), std::string::npos);
  EXPECT_NE(message({{"elite", "0"}}).find("elite"), std::string::npos);
  EXPECT_NE(message({{"batch", "x"}}).find("batch"), std::string::npos);
  EXPECT_NE(message({{"shared-weights", "both"}}).find("shared-weights"), std::string::npos);
  EXPECT_NE(message({{"curve", ""}}).find("curve"), std::string::npos);
}

}  // namespace
}  // namespace dplace::testing
