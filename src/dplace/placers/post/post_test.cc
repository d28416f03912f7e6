#include "dplace/placers/post/post.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

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

// Not only the best sample: the distribution itself ends on an optimal placement (its most likely
// placement), which sampling alone, or learning the wrong way, would not give.
TEST(PostPlacerTest, LearnsTheOptimumOfSmallCases) {
  using MakeCase = std::unique_ptr<PlacerCase> (*)();
  const MakeCase heavy_light = [] { return heavy_light_case(); };
  for (MakeCase make : {two_chains_case, memory_tight_case, colocation_case, cpu_only_case,
                        heavy_light, shared_weight_case, restricted_fill_case}) {
    const auto c = make();
    const PostRun run = post_on(*c, learn_only(1600));
    EXPECT_TRUE(run.best_feasible) << c->graph().name();
    EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.result.placement);
    EXPECT_EQ(run.restarts, 0) << c->graph().name();
    const SimResult mode = c->simulator().run(run.mode_placement);
    EXPECT_TRUE(mode.feasible) << c->graph().name();
    EXPECT_NEAR(mode.step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.mode_placement);
  }
}

// Each of the two steps learns on its own: PPO alone (no cross-entropy step within the run) and
// the cross-entropy method alone (no PPO epochs). On memory_tight most placements are OOM at first.
TEST(PostPlacerTest, EachStepLearnsAlone) {
  const auto c = memory_tight_case();  // one placement of 16 fits
  auto ppo_only = learn_only(3200);
  ppo_only["ce-every"] = "65536";
  auto ce_only = learn_only(3200);
  ce_only["epochs"] = "0";
  for (const auto& params : {ppo_only, ce_only}) {
    const PostRun run = post_on(*c, params);
    EXPECT_EQ(run.ce_steps, params.count("epochs") ? 25 : 0);
    EXPECT_TRUE(run.best_feasible);
    EXPECT_NEAR(run.best_step_time_s, c->optimum_s(), 1e-5);
    // The distribution concentrates on the optimum: less entropy, fewer OOM samples, and its
    // most likely placement is the optimum.
    ASSERT_GE(run.curve.size(), 2u);
    EXPECT_LT(run.curve.back().entropy, 0.5 * run.curve.front().entropy);
    EXPECT_GT(run.curve.front().oom_fraction, 0.5);
    EXPECT_LT(run.curve.back().oom_fraction, 0.2);
    const SimResult mode = c->simulator().run(run.mode_placement);
    EXPECT_TRUE(mode.feasible);
    EXPECT_NEAR(mode.step_time_s, c->optimum_s(), 1e-5);
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

// wide(40) has 42 groups, so PPO's epochs run as three tasks.
TEST(PostPlacerTest, SameSeedSamePlacementAnyThreadCount) {
  const auto c = wide_case(40);
  auto params = learn_only(800);
  params["threads"] = "1";
  const PostRun one = post_on(*c, params, 7);
  params["threads"] = "2";
  const PostRun two = post_on(*c, params, 7);
  EXPECT_EQ(one.result.placement, two.result.placement);
  EXPECT_EQ(one.mode_placement, two.mode_placement);
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

  // Two 5 GB GPUs for 19 GB of parameters: the least overflow over the 16 placements.
  const auto none = oversubscribed_pair_case();
  const PlacerRun run = run_placer(*none, "post", {.params = learn_only(320)});
  EXPECT_FALSE(run.sim.feasible);
  EXPECT_EQ(run.sim.total_overflow_bytes(), least_overflow_bytes(*none))
      << describe(*none, run.result.placement);
  EXPECT_NE(run.result.note.find("no sampled placement fits in memory"), std::string::npos)
      << run.result.note;
}

TEST(PostPlacerTest, RestartsAfterPatienceAndAlternatesGroupings) {
  const auto c = shared_parameter_case();
  auto params = learn_only(16 * 40);
  params["restart-patience"] = "5";
  params["sole-consumer"] = "chains";
  const PostRun run = post_on(*c, params);
  ASSERT_EQ(run.groupings.size(), 2u);
  EXPECT_GE(run.restarts, 2);
  // After each restart: the next grouping, sampled from the uniform distribution again.
  for (size_t i = 1; i < run.curve.size(); ++i) {
    if (run.curve[i].restarts == run.curve[i - 1].restarts) continue;
    EXPECT_EQ(run.curve[i].grouping, run.curve[i].restarts % 2) << i;
    EXPECT_NEAR(run.curve[i].entropy, std::log(2.0), 1e-12) << i;
  }
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
  while (std::getline(in, line)) {
    ++rows;
    // The eighth batch ends with the cross-entropy step (ce-every 8), the others with PPO.
    const std::string step = rows % 8 == 0 ? ",ce," : ",ppo,";
    EXPECT_NE(line.find(step), std::string::npos) << line;
  }
  EXPECT_EQ(rows, run.curve.size());
  EXPECT_EQ(rows, 10u);
}

// A single sample of memory_tight is OOM with probability 15/16; the polishing starts from it,
// never ends worse and reaches the optimum.
TEST(PostPlacerTest, PolishingNeverWorsensTheLearnedPlacement) {
  const auto c = memory_tight_case();
  const PlacerRun run = run_placer(
      *c, "post",
      {.params = {{"samples", "1"}, {"batch", "1"}, {"polish", "300"}, {"sole-consumer", "off"}}});
  const std::string& note = run.result.note;
  const size_t learned_at = note.find("polished by anneal: learned ");
  const size_t polished_at = note.find(", polished ");
  ASSERT_NE(learned_at, std::string::npos) << note;
  ASSERT_NE(polished_at, std::string::npos) << note;
  const double learned_s = std::stod(note.substr(learned_at + 28));
  const double polished_s = std::stod(note.substr(polished_at + 11));
  EXPECT_LE(polished_s, learned_s) << note;
  EXPECT_NEAR(run.sim.step_time_s, polished_s, 1e-5 * polished_s);
  EXPECT_TRUE(run.sim.feasible);
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5);
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
  EXPECT_NE(message({{"ce-every", "65537"}}).find("more than 1048576"), std::string::npos);
}

}  // namespace
}  // namespace dplace::testing
