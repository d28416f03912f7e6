#include "dplace/placers/learning/evaluation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "dplace/placers/common/test_cases.h"
#include "dplace/placers/learning/groupings.h"

namespace dplace::testing {
namespace {

// two_chains: a0 a1 a2 b0 b1 b2 on /gpu:0 and /gpu:1. A placement per bit pattern.
Placement pattern(uint32_t bits) {
  Placement p;
  for (uint32_t i = 0; i < 6; ++i) p.device_of_op.push_back(DeviceId::from_index((bits >> i) & 1));
  return p;
}

TEST(SampleEvaluatorTest, SimulatesEachDistinctPlacementOnceAndRemembersIt) {
  const auto c = two_chains_case();
  ThreadPool pool(2);
  SampleEvaluator evaluator(c->graph(), c->cluster(), c->costs(), c->simulator(), pool);
  const std::vector<uint32_t> patterns = {0b000111, 0b000111, 0b000000};
  std::vector<std::string> keys;
  for (uint32_t b : patterns) keys.push_back(sample_key(std::vector<uint32_t>{b}));
  std::vector<size_t> filled;
  std::vector<SampleOutcome> outcomes(3);
  auto fill = [&](size_t i, Placement& p) {
    filled.push_back(i);
    p = pattern(patterns[i]);
  };
  EXPECT_EQ(evaluator.evaluate(keys, fill, outcomes), 2);
  EXPECT_EQ(filled, (std::vector<size_t>{0, 2}));
  EXPECT_NEAR(outcomes[0].step_time_s, 3.0, 1e-9);  // one chain per GPU: the optimum
  EXPECT_EQ(outcomes[1].step_time_s, outcomes[0].step_time_s);
  EXPECT_NEAR(outcomes[2].step_time_s, 6.0, 1e-9);  // all on /gpu:0
  EXPECT_NEAR(evaluator.reward(outcomes[0]), -std::sqrt(3.0 / c->simulator().lower_bound_s()),
              1e-12);

  // Known keys come from the cache.
  filled.clear();
  EXPECT_EQ(evaluator.evaluate(std::vector<std::string>{keys[2], keys[0]}, fill,
                               std::span(outcomes).first(2)),
            0);
  EXPECT_TRUE(filled.empty());
  EXPECT_NEAR(outcomes[0].step_time_s, 6.0, 1e-9);
  evaluator.clear_cache();
  EXPECT_EQ(
      evaluator.evaluate(std::vector<std::string>{keys[2]}, fill, std::span(outcomes).first(1)), 1);
}

// With room for two outcomes, a third distinct placement empties the cache first.
TEST(SampleEvaluatorTest, AFullCacheIsEmptied) {
  const auto c = two_chains_case();
  ThreadPool pool(1);
  SampleEvaluator evaluator(c->graph(), c->cluster(), c->costs(), c->simulator(), pool, 2);
  auto key = [](uint32_t bits) { return sample_key(std::vector<uint32_t>{bits}); };
  auto run = [&](uint32_t bits) {
    SampleOutcome o;
    return evaluator.evaluate(
        std::vector<std::string>{key(bits)}, [&](size_t, Placement& p) { p = pattern(bits); },
        std::span(&o, 1));
  };
  EXPECT_EQ(run(1), 1);
  EXPECT_EQ(run(2), 1);
  EXPECT_EQ(run(1), 0);  // cached
  EXPECT_EQ(run(3), 1);  // 2 + 1 > 2: emptied, then 3 kept
  EXPECT_EQ(run(1), 1);  // simulated again
  EXPECT_EQ(run(3), 0);
}

TEST(SampleEvaluatorTest, OomIsChargedTwiceTheUpperBound) {
  const auto c = oversubscribed_pair_case();
  ThreadPool pool(1);
  SampleEvaluator evaluator(c->graph(), c->cluster(), c->costs(), c->simulator(), pool);
  const double bound = step_time_upper_bound_s(c->graph(), c->cluster(), c->costs());
  EXPECT_EQ(evaluator.oom_charge_s(), 2 * bound);
  EXPECT_EQ(evaluator.penalised_s({.step_time_s = 1, .feasible = false}), 2 * bound);
  EXPECT_EQ(evaluator.penalised_s({.step_time_s = 1, .feasible = true}), 1);
}

TEST(BestPlacementTest, KeepsTheBestAndWhileNoneFitsTheLeastOverflow) {
  BestPlacement best;
  auto with = [](uint32_t bits) { return [bits](Placement& p) { p = pattern(bits); }; };
  // OOM samples only: the least overflow is the result, whatever their charge.
  EXPECT_TRUE(
      best.offer({.step_time_s = 5, .feasible = false, .overflow_bytes = 300}, 100, with(1)));
  EXPECT_FALSE(
      best.offer({.step_time_s = 4, .feasible = false, .overflow_bytes = 100}, 100, with(2)));
  EXPECT_FALSE(
      best.offer({.step_time_s = 3, .feasible = false, .overflow_bytes = 200}, 100, with(3)));
  EXPECT_FALSE(best.best_feasible());
  EXPECT_EQ(best.result(), pattern(2));
  // Equal overflow: the shorter step; an OOM sample with no overflow reported is not kept.
  EXPECT_FALSE(
      best.offer({.step_time_s = 3.5, .feasible = false, .overflow_bytes = 100}, 100, with(6)));
  EXPECT_FALSE(
      best.offer({.step_time_s = 1, .feasible = false, .overflow_bytes = 0}, 100, with(7)));
  EXPECT_EQ(best.result(), pattern(6));
  // A fitting sample wins; an equal one later does not replace it.
  EXPECT_TRUE(best.offer({.step_time_s = 7, .feasible = true}, 7, with(4)));
  EXPECT_FALSE(best.offer({.step_time_s = 7, .feasible = true}, 7, with(5)));
  EXPECT_TRUE(best.best_feasible());
  EXPECT_EQ(best.best_s(), 7);
  EXPECT_EQ(best.result(), pattern(4));
}

// Three outcomes of two_chains: 3 s, 6 s and an OOM one (charged oom_charge_s()).
TEST(BatchSummaryTest, SummarisesRewardsAndOffersEachSampleToTheBest) {
  const auto c = two_chains_case();
  ThreadPool pool(1);
  SampleEvaluator evaluator(c->graph(), c->cluster(), c->costs(), c->simulator(), pool);
  const std::vector<SampleOutcome> outcomes = {{3.0, true, 0}, {6.0, true, 0}, {2.0, false, 5}};
  BestPlacement best;
  std::vector<size_t> filled;
  const BatchSummary b = summarise_batch(evaluator, outcomes, best, [&](size_t i, Placement& p) {
    filled.push_back(i);
    p = pattern(static_cast<uint32_t>(i));
  });
  const double oom_s = evaluator.oom_charge_s();
  EXPECT_NEAR(b.mean_step_time_s, (3.0 + 6.0 + oom_s) / 3, 1e-12);
  EXPECT_EQ(b.batch_best_step_time_s, 3.0);
  EXPECT_NEAR(b.oom_fraction, 1.0 / 3, 1e-15);
  EXPECT_TRUE(b.improved);
  ASSERT_EQ(b.rewards.size(), 3u);
  const double lb = c->simulator().lower_bound_s();
  const std::vector<double> want = {-std::sqrt(3.0 / lb), -std::sqrt(6.0 / lb),
                                    -std::sqrt(oom_s / lb)};
  double mean = 0, var = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(b.rewards[i], want[i], 1e-12);
    mean += want[i] / 3;
  }
  for (double r : want) var += (r - mean) * (r - mean) / 3;
  EXPECT_NEAR(b.mean_reward, mean, 1e-12);
  EXPECT_NEAR(b.reward_spread, std::sqrt(var), 1e-12);
  // The best (sample 0) and the least-overflow OOM one (sample 2) were kept.
  EXPECT_EQ(filled, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(best.best_s(), 3.0);
}

TEST(RewardBaselineTest, StartsAtTheFirstMeanThenMovesByItsDecay) {
  RewardBaseline baseline(0.5);
  BatchSummary b;
  b.rewards = {-1.0, -3.0};
  b.mean_reward = -2.0;
  b.reward_spread = 1.0;
  std::vector<double> a(2, 7.0);
  ASSERT_TRUE(baseline.advantages(b, a));
  EXPECT_EQ(a, (std::vector<double>{1.0, -1.0}));  // baseline -2: the first batch's mean
  b.rewards = {-4.0, -4.0};
  b.mean_reward = -4.0;
  b.reward_spread = 0.0;
  EXPECT_FALSE(baseline.advantages(b, a));  // all alike: nothing to learn, a kept
  EXPECT_EQ(a, (std::vector<double>{1.0, -1.0}));
  b.rewards = {-2.0, -4.0};
  b.mean_reward = -3.0;
  b.reward_spread = 1.0;
  ASSERT_TRUE(baseline.advantages(b, a));  // baseline 0.5 (-2) + 0.5 (-4) = -3
  EXPECT_EQ(a, (std::vector<double>{1.0, -1.0}));
  baseline.reset();
  b.rewards = {-1.0, -2.0};
  b.mean_reward = -1.5;
  b.reward_spread = 0.5;
  ASSERT_TRUE(baseline.advantages(b, a));  // started again at -1.5
  EXPECT_EQ(a, (std::vector<double>{1.0, -1.0}));
}

}  // namespace
}  // namespace dplace::testing
