#include "dplace/placers/pipeline/refine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "dplace/placers/pipeline/test_problems.h"
#include "dplace/placers/pipeline/throughput_dp.h"

namespace dplace {
namespace {

using testing_pipeline::add_node;
using testing_pipeline::add_tensor;
using testing_pipeline::brute_force_throughput;
using testing_pipeline::make_problem;
using testing_pipeline::random_problem;

TEST(SplitRefineTest, UntanglesASplitThatCutsBothBranches) {
  // Two independent chains a0..a3 and b0..b3 (time 1 each, tensors of cost 5 along each chain)
  // on two accelerators. The start splits both chains in the middle, {a0 a1 b0 b1} | {a2 a3 b2
  // b3}: each device pays two crossing tensors, load 2 + 2 + 10 = 14. The optimum gives each
  // chain a device: load 4, no communication.
  PipelineProblem p = make_problem(2, 0);
  for (int i = 0; i < 8; ++i) add_node(p, 1, 10);  // a_i = i, b_i = 4 + i
  for (int i = 0; i < 3; ++i) {
    add_tensor(p, i, {uint32_t(i + 1)}, 5);
    add_tensor(p, 4 + i, {uint32_t(5 + i)}, 5);
  }
  const UnitDag dag = build_unit_dag(p);
  ASSERT_EQ(dag.num_units, 8u);
  const std::vector<int> start{0, 0, 1, 1, 0, 0, 1, 1};
  const SplitRefineResult r = refine_split(p, dag, start, {});
  EXPECT_DOUBLE_EQ(r.start_max_load_s, 14.0);
  EXPECT_DOUBLE_EQ(r.max_load_s, 4.0);
  EXPECT_DOUBLE_EQ(r.max_load_s, brute_force_throughput(p, true));
  EXPECT_EQ(r.device_of_unit[0], r.device_of_unit[3]);
  EXPECT_EQ(r.device_of_unit[4], r.device_of_unit[7]);
  EXPECT_NE(r.device_of_unit[0], r.device_of_unit[4]);
  EXPECT_FALSE(r.stopped_by_time_limit);
}

TEST(SplitRefineTest, KeepsSplitsContiguousWithinCapsAndNeverWorse) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    const bool backward = trial % 2 == 1;
    const bool cap = trial % 4 >= 2;
    const PipelineProblem p = random_problem(rng, 9, 2, 1, backward, cap);
    const UnitDag dag = build_unit_dag(p);
    std::vector<int> start;
    if (!std::isfinite(chain_throughput_dp(p, dag, dag.topo_order, start))) continue;
    SplitRefineOptions options;
    options.moves = 20000;
    options.seed = static_cast<uint64_t>(trial);
    const SplitRefineResult r = refine_split(p, dag, start, options);
    const PipelineEvaluation ev = evaluate_pipeline(p, device_of_nodes(dag, r.device_of_unit));
    EXPECT_EQ(ev.violation, "");
    EXPECT_TRUE(ev.contiguous);
    EXPECT_NEAR(ev.max_load_s, r.max_load_s, 1e-9);
    EXPECT_LE(r.max_load_s, r.start_max_load_s);
    EXPECT_GE(r.max_load_s, brute_force_throughput(p, true) - 1e-9);
  }
}

TEST(SplitRefineTest, SameSeedSameSplit) {
  std::mt19937_64 rng(3);
  const PipelineProblem p = random_problem(rng, 12, 3, 1, true, false);
  const UnitDag dag = build_unit_dag(p);
  std::vector<int> start;
  ASSERT_TRUE(std::isfinite(chain_throughput_dp(p, dag, dag.topo_order, start)));
  SplitRefineOptions options;
  options.moves = 20000;
  options.seed = 11;
  const SplitRefineResult a = refine_split(p, dag, start, options);
  const SplitRefineResult b = refine_split(p, dag, start, options);
  EXPECT_EQ(a.device_of_unit, b.device_of_unit);
  EXPECT_EQ(a.moves_accepted, b.moves_accepted);
}

TEST(SplitRefineTest, ReturnsANonContiguousStartUnchanged) {
  // a -> b -> c with a and c on one device and b on the other: the device quotient has a cycle.
  PipelineProblem p = make_problem(2, 0);
  for (int i = 0; i < 3; ++i) add_node(p, 1, 10);
  add_tensor(p, 0, {1}, 1);
  add_tensor(p, 1, {2}, 1);
  const UnitDag dag = build_unit_dag(p);
  const std::vector<int> start{0, 1, 0};
  const SplitRefineResult r = refine_split(p, dag, start, {});
  EXPECT_TRUE(std::isinf(r.max_load_s));
  EXPECT_EQ(r.device_of_unit, start);
  EXPECT_EQ(r.moves_tried, 0u);
}

TEST(SplitRefineTest, WithoutContiguityFindsASplitNoContiguousOneMatches) {
  // Start: x on the accelerator, y and z on the CPU (load 51). Best: {x, z} on the accelerator, 11.
  const PipelineProblem p = testing_pipeline::cpu_op_between_two_accelerator_ops();
  const UnitDag dag = build_unit_dag(p);
  const std::vector<int> start{0, 1, 1};
  SplitRefineOptions options;
  EXPECT_DOUBLE_EQ(refine_split(p, dag, start, options).max_load_s, 51.0);  // contiguous: stuck
  options.contiguous = false;
  const SplitRefineResult r = refine_split(p, dag, start, options);
  EXPECT_DOUBLE_EQ(r.start_max_load_s, 51.0);
  EXPECT_DOUBLE_EQ(r.max_load_s, 11.0);
  EXPECT_DOUBLE_EQ(r.max_load_s, brute_force_throughput(p, false));
  EXPECT_EQ(r.device_of_unit, (std::vector<int>{0, 1, 0}));
}

TEST(SplitRefineTest, WithoutContiguityKeepsCapsAndTypesAndNeverWorse) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    const PipelineProblem p = random_problem(rng, 9, 2, 1, trial % 2 == 1, trial % 4 >= 2);
    const UnitDag dag = build_unit_dag(p);
    std::vector<int> start;
    if (!std::isfinite(chain_throughput_dp(p, dag, dag.topo_order, start))) continue;
    SplitRefineOptions options;
    options.contiguous = false;
    options.moves = 20000;
    options.seed = static_cast<uint64_t>(trial);
    const SplitRefineResult r = refine_split(p, dag, start, options);
    const PipelineEvaluation ev = evaluate_pipeline(p, device_of_nodes(dag, r.device_of_unit));
    EXPECT_EQ(ev.violation, "");
    EXPECT_NEAR(ev.max_load_s, r.max_load_s, 1e-9);
    EXPECT_LE(r.max_load_s, r.start_max_load_s);
    EXPECT_GE(r.max_load_s, brute_force_throughput(p, false) - 1e-9);
  }
}

TEST(SplitRefineTest, HotAndColdKeepsTheBetterOfTheTwoSearches) {
  // An unrolled 3-layer recurrence over 16 steps (node 3 t + l), recurrent tensors of cost 2,
  // layer-to-layer tensors of cost 0.5, times 1 to 3, three accelerators; the start deals the
  // nodes out in index order, which cuts every layer twice. Over seeds 1-8 each search wins on
  // some (the hot one on seed 6, the cold one on seeds 4, 7 and 8).
  PipelineProblem p = make_problem(3, 0);
  const int layers = 3, steps = 16;
  for (int i = 0; i < layers * steps; ++i) add_node(p, 1 + i % 3, 10);
  for (int t = 0; t < steps; ++t) {
    for (int l = 0; l < layers; ++l) {
      const uint32_t v = uint32_t(layers * t + l);
      if (l + 1 < layers) add_tensor(p, v, {v + 1}, 0.5);
      if (t + 1 < steps) add_tensor(p, v, {v + uint32_t(layers)}, 2);
    }
  }
  const UnitDag dag = build_unit_dag(p);
  ASSERT_EQ(dag.num_units, size_t(layers * steps));
  std::vector<int> start(dag.num_units);
  for (size_t u = 0; u < dag.num_units; ++u) start[u] = int(3 * u / dag.num_units);
  int hot_wins = 0, cold_wins = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(seed);
    SplitRefineOptions options;
    options.contiguous = false;
    options.moves = 20000;
    options.seed = seed;
    SplitRefineOptions cold_options = options;
    cold_options.t_start = 0.003;
    const double hot = refine_split(p, dag, start, options).max_load_s;
    const double cold = refine_split(p, dag, start, cold_options).max_load_s;
    const HotAndColdRefineResult both = refine_split_hot_and_cold(p, dag, start, options, 0.003);
    EXPECT_EQ(both.best.max_load_s, std::min(hot, cold));
    EXPECT_EQ(both.cold_won, cold < hot);
    const PipelineEvaluation ev =
        evaluate_pipeline(p, device_of_nodes(dag, both.best.device_of_unit));
    EXPECT_EQ(ev.violation, "");
    EXPECT_DOUBLE_EQ(ev.max_load_s, both.best.max_load_s);
    hot_wins += hot < cold;
    cold_wins += cold < hot;
  }
  EXPECT_GT(hot_wins, 0);
  EXPECT_GT(cold_wins, 0);
}

}  // namespace
}  // namespace dplace
