#include "dplace/placers/pipeline/throughput_dp.h"

#include <gtest/gtest.h>

#include <cmath>

#include "dplace/placers/pipeline/pipeline.h"
#include "dplace/placers/pipeline/test_problems.h"

namespace dplace {
namespace {

using testing_pipeline::add_node;
using testing_pipeline::add_tensor;
using testing_pipeline::brute_force_throughput;
using testing_pipeline::make_problem;
using testing_pipeline::random_problem;

PipelinePlan solve(const PipelineProblem& p, bool contiguous = true) {
  PipelineRequest request;
  request.problem = &p;
  request.options.contiguous = contiguous;
  request.options.time_limit_s = 20;
  return solve_pipeline(request);
}

TEST(ThroughputDpTest, SplitsAChainWhereCommunicationIsCheapest) {
  // a(4) -> b(4) -> c(4) -> d(4) on 2 accelerators; cutting after b costs 1, elsewhere 10.
  PipelineProblem p = make_problem(2, 0);
  for (int i = 0; i < 4; ++i) add_node(p, 4, 40);
  add_tensor(p, 0, {1}, 10);
  add_tensor(p, 1, {2}, 1);
  add_tensor(p, 2, {3}, 10);
  const PipelinePlan plan = solve(p);
  ASSERT_TRUE(plan.feasible);
  EXPECT_TRUE(plan.optimal);
  EXPECT_DOUBLE_EQ(plan.max_load_s, 9.0);  // 4 + 4 + 1 on each side
  EXPECT_EQ(plan.device_of_node[0], plan.device_of_node[1]);
  EXPECT_NE(plan.device_of_node[1], plan.device_of_node[2]);
  EXPECT_TRUE(plan.contiguous);
  EXPECT_EQ(plan.method, "ideal-dp");
  EXPECT_EQ(plan.ideals, 5u);
}

TEST(ThroughputDpTest, UsesTheCpuWhenItHelpsAndPaysItNoCommunication) {
  // Two independent nodes of accel time 10 (CPU 12) and one accelerator: the CPU takes one.
  PipelineProblem p = make_problem(1, 1);
  add_node(p, 10, 12);
  add_node(p, 10, 12);
  add_node(p, 1, 100);
  add_tensor(p, 0, {2}, 5);
  add_tensor(p, 1, {2}, 5);
  const PipelinePlan plan = solve(p);
  ASSERT_TRUE(plan.feasible);
  // Best: CPU takes one of the 10s (load 12); accel: 10 + 1 + tensor from the CPU node (5) = 16.
  EXPECT_DOUBLE_EQ(plan.max_load_s, 16.0);
  EXPECT_DOUBLE_EQ(plan.max_load_s, brute_force_throughput(p, true));
}

TEST(ThroughputDpTest, RespectsTheMemoryCap) {
  PipelineProblem p = make_problem(2, 0, 10.0);
  add_node(p, 1, 10, 6);
  add_node(p, 100, 1000, 6);
  add_tensor(p, 0, {1}, 0);
  const PipelinePlan plan = solve(p);
  ASSERT_TRUE(plan.feasible);
  EXPECT_NE(plan.device_of_node[0], plan.device_of_node[1]);
  EXPECT_DOUBLE_EQ(plan.max_load_s, 100.0);
}

TEST(ThroughputDpTest, ReportsInfeasibleWhenNothingFits) {
  PipelineProblem p = make_problem(1, 0, 10.0);
  add_node(p, 1, 10, 11);
  const PipelinePlan plan = solve(p);
  EXPECT_FALSE(plan.feasible);
  EXPECT_FALSE(plan.infeasible_reason.empty());
}

TEST(ThroughputDpTest, MatchesBruteForceOnRandomSmallDags) {
  std::mt19937_64 rng(12345);
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 4 + trial % 4;           // 4..7 nodes
    const bool backward = trial % 3 == 1;  // paired backward nodes and orphans
    const bool cap = trial % 2 == 0;
    const int accels = 1 + trial % 3;
    const PipelineProblem p = random_problem(rng, n, accels, trial % 4 == 0 ? 0 : 1, backward, cap);
    const double expected = brute_force_throughput(p, true);
    const PipelinePlan plan = solve(p);
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    if (std::isinf(expected)) {
      EXPECT_FALSE(plan.feasible);
      continue;
    }
    ASSERT_TRUE(plan.feasible);
    EXPECT_TRUE(plan.optimal);
    EXPECT_TRUE(plan.contiguous);
    EXPECT_NEAR(plan.max_load_s, expected, 1e-9 * expected);
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

TEST(ThroughputDpTest, ChainHeuristicIsAnUpperBound) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 20; ++trial) {
    const PipelineProblem p = random_problem(rng, 7, 2, 1, trial % 2 == 0, false);
    const UnitDag dag = build_unit_dag(p);
    std::vector<int> chain;
    const double chain_value = chain_throughput_dp(p, dag, dag.topo_order, chain);
    const ThroughputDpResult r = solve_contiguous_throughput(p, dag, {});
    ASSERT_TRUE(r.feasible);
    EXPECT_LE(r.max_load_s, chain_value + 1e-12);
    EXPECT_LE(r.lower_bound_s, r.max_load_s + 1e-12);
  }
}

TEST(ThroughputDpTest, CoarseBoundDoesNotChangeTheOptimum) {
  // Parallel chains of 6 units between a split and a join, repeated: the coarse DAG contracts the
  // chains, and the exact DP must reach the same optimum with or without its bound.
  // Each chain has one heavy unit and small ones, so the 2% blocks merge the small ones.
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> time(0.005, 0.01);
  std::uniform_real_distribution<double> cost(0.0, 0.05);
  PipelineProblem p = make_problem(3, 1);
  uint32_t join = add_node(p, 0.01, 0.1);
  for (int module = 0; module < 4; ++module) {
    std::vector<uint32_t> tails;
    for (int branch = 0; branch < 3; ++branch) {
      uint32_t last = join;
      for (int k = 0; k < 8; ++k) {
        const double a = k == 3 ? 1.0 + time(rng) : time(rng);
        const uint32_t v = add_node(p, a, 10 * a);
        add_tensor(p, last, {v}, cost(rng));
        last = v;
      }
      tails.push_back(last);
    }
    join = add_node(p, 0.01, 0.1);
    for (uint32_t t : tails) add_tensor(p, t, {join}, cost(rng));
  }
  const UnitDag dag = build_unit_dag(p);
  ASSERT_GT(dag.num_units, 32u);
  ThroughputDpOptions with;
  ThroughputDpOptions without;
  without.coarsen = false;
  const ThroughputDpResult a = solve_contiguous_throughput(p, dag, with);
  const ThroughputDpResult b = solve_contiguous_throughput(p, dag, without);
  ASSERT_TRUE(a.optimal && b.optimal);
  EXPECT_NEAR(a.max_load_s, b.max_load_s, 1e-12);
  EXPECT_GT(a.coarse_ideals, 0u);
  EXPECT_LT(a.coarse_ideals, a.num_ideals);
  EXPECT_LE(a.max_load_s, a.coarse_upper_bound_s + 1e-12);
  EXPECT_LE(a.pairs_visited, b.pairs_visited);
  EXPECT_NEAR(evaluate_pipeline(p, device_of_nodes(dag, a.device_of_unit)).max_load_s, a.max_load_s,
              1e-9);
}

TEST(ThroughputDpTest, FallsBackToTheChainBeyondTheMemoryBudget) {
  // 24 independent nodes have 2^24 ideals; a 1 MiB budget cannot hold them.
  PipelineProblem p = make_problem(3, 0);
  for (int i = 0; i < 24; ++i) add_node(p, 1 + i % 5, 10);
  const UnitDag dag = build_unit_dag(p);
  ThroughputDpOptions options;
  options.memory_budget_bytes = size_t{1} << 20;
  const ThroughputDpResult r = solve_contiguous_throughput(p, dag, options);
  EXPECT_TRUE(r.feasible);
  EXPECT_FALSE(r.optimal);
  EXPECT_EQ(r.num_ideals, 0u);
  EXPECT_NE(r.note.find("ideals"), std::string::npos);
  // The chain split, then the local search (refine.h), which may only improve it.
  EXPECT_LE(r.max_load_s, r.chain_upper_bound_s);
  EXPECT_NEAR(evaluate_pipeline(p, device_of_nodes(dag, r.device_of_unit)).max_load_s, r.max_load_s,
              1e-9);
  options.refine = false;
  const ThroughputDpResult chain = solve_contiguous_throughput(p, dag, options);
  EXPECT_DOUBLE_EQ(chain.max_load_s, chain.chain_upper_bound_s);
  EXPECT_EQ(chain.note.find("local search"), std::string::npos);
}

TEST(ThroughputDpTest, LocalSearchImprovesTheChainSplitBeyondTheMemoryBudget) {
  // An unrolled two-layer recurrence, numbered step by step (layer l, step t: node 2 t + l):
  // tensors of cost 3 along each layer, 0.1 from layer 0 to layer 1, time 1 per node, two
  // accelerators. Both chain heuristics interleave the layers, so every prefix split cuts both
  // layers' recurrent tensors; the optimum gives each layer a device: 6 + 6 x 0.1 = 6.6.
  // max_ideals = 10 forces the fallback.
  PipelineProblem p = make_problem(2, 0);
  for (int i = 0; i < 12; ++i) add_node(p, 1, 10);
  for (int t = 0; t < 6; ++t) {
    add_tensor(p, 2 * t, {uint32_t(2 * t + 1)}, 0.1);  // layer 0's output, read by layer 1
    if (t + 1 < 6) {
      add_tensor(p, 2 * t, {uint32_t(2 * t + 2)}, 3);  // the recurrent states
      add_tensor(p, 2 * t + 1, {uint32_t(2 * t + 3)}, 3);
    }
  }
  const UnitDag dag = build_unit_dag(p);
  ThroughputDpOptions options;
  options.max_ideals = 10;
  const ThroughputDpResult r = solve_contiguous_throughput(p, dag, options);
  EXPECT_FALSE(r.optimal);
  EXPECT_GT(r.chain_upper_bound_s, 7.0);
  EXPECT_NEAR(r.max_load_s, 6.6, 1e-12);
  EXPECT_NEAR(r.max_load_s, brute_force_throughput(p, true), 1e-12);
  EXPECT_NE(r.note.find("local search improved it"), std::string::npos) << r.note;
}

}  // namespace
}  // namespace dplace
