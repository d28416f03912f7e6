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
  options.moves = 5000;
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

}  // namespace
}  // namespace dplace
