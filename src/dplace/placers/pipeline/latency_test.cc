#include "dplace/placers/pipeline/latency.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "dplace/placers/pipeline/pipeline.h"
#include "dplace/placers/pipeline/test_problems.h"

namespace dplace {
namespace {

using testing_pipeline::add_node;
using testing_pipeline::add_tensor;
using testing_pipeline::for_each_assignment;
using testing_pipeline::make_problem;

// a -> b -> c -> d, accel time 1, CPU time 5, size 6 each, every tensor costs 0.5.
PipelineProblem chain4(double cap) {
  PipelineProblem p = make_problem(2, 1, cap);
  for (int i = 0; i < 4; ++i) add_node(p, 1, 5, 6);
  for (uint32_t i = 0; i < 3; ++i) add_tensor(p, i, {i + 1}, 0.5);
  return p;
}

double brute_force_latency(const PipelineProblem& p) {
  double best = std::numeric_limits<double>::infinity();
  for_each_assignment(p, [&](const std::vector<int>& a) {
    if (!evaluate_pipeline(p, a).violation.empty()) return;
    const LatencyEvaluation ev = evaluate_latency(p, a);
    if (ev.valid) best = std::min(best, ev.latency_s);
  });
  return best;
}

TEST(LatencyTest, SubgraphStartsWhenItsInputsAreReadyAndPaysCommunicationBothWays) {
  const PipelineProblem p = chain4(100);
  // a, b on accel 0; c on the CPU; d on accel 1.
  const LatencyEvaluation ev = evaluate_latency(p, {0, 0, 2, 1});
  ASSERT_TRUE(ev.valid);
  // accel 0: 0 + 1 + 1 + 0.5 (b leaves) = 2.5; c: 2.5 + 5 = 7.5;
  // accel 1: starts 7.5, 0.5 (c enters) + 1 = 9.
  EXPECT_DOUBLE_EQ(ev.finish_s[0], 2.5);
  EXPECT_DOUBLE_EQ(ev.finish_of_node_s[2], 7.5);
  EXPECT_DOUBLE_EQ(ev.start_s[1], 7.5);
  EXPECT_DOUBLE_EQ(ev.latency_s, 9.0);
}

TEST(LatencyTest, NonContiguousSubgraphIsInvalid) {
  const PipelineProblem p = chain4(100);
  // a and c on accel 0 with b on the CPU between them: a cycle accel 0 -> CPU -> accel 0.
  EXPECT_FALSE(evaluate_latency(p, {0, 2, 0, 0}).valid);
}

TEST(LatencyTest, GreedyFillsAcceleratorsInTopologicalOrderUpToTheirMemory) {
  const PipelineProblem p = chain4(10);
  const LatencyResult r = latency_greedy(p);
  ASSERT_TRUE(r.feasible);
  EXPECT_EQ(r.device_of_node, (std::vector<int>{0, 1, 2, 2}));
  // accel 0: 1 + 0.5 = 1.5; accel 1: 1.5 + 0.5 + 1 + 0.5 = 3.5; c: 8.5; d: 13.5.
  EXPECT_DOUBLE_EQ(r.latency_s, 13.5);
}

TEST(LatencyTest, IntegerProgramFindsTheBestSplit) {
  const PipelineProblem p = chain4(10);
  const LatencyResult r = latency_ilp(p, {});
  ASSERT_TRUE(r.feasible);
  EXPECT_TRUE(r.optimal);
  EXPECT_NEAR(r.latency_s, brute_force_latency(p), 1e-7);
  EXPECT_LE(r.latency_s, latency_greedy(p).latency_s);
}

// Twelve random DAGs of 4-6 nodes on 2 accelerators and a CPU, half with a memory cap: the
// program's optimum equals the brute force's.
struct RandomDags {
  uint64_t seed = 1;
  int colour_back = 1;      // a node may share the class of the node this many before it
  int colour_percent = 20;  // with this probability (%)
  int edge_percent = 40;    // each later node reads a node with this probability (%)
  bool chain = false;       // also always an edge to the next node
};
void expect_ilp_matches_brute_force(const RandomDags& dags) {
  const auto [seed, colour_back, colour_percent, edge_percent, chain] = dags;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> time(1.0, 6.0);
  std::uniform_real_distribution<double> cost(0.0, 2.0);
  std::uniform_int_distribution<int> coin(0, 99);
  for (int trial = 0; trial < 12; ++trial) {
    PipelineProblem p = make_problem(2, 1, trial % 2 == 0 ? 12.0 : kUncappedBytes);
    const int n = 4 + trial % 3;
    for (int i = 0; i < n; ++i) {
      const double a = time(rng);
      add_node(p, a, 3 * a, time(rng),
               coin(rng) < colour_percent && i >= colour_back ? i - colour_back : i);
    }
    for (int i = 0; i < n; ++i) {
      std::vector<uint32_t> consumers;
      for (int j = i + 1; j < n; ++j) {
        if (coin(rng) < edge_percent || (chain && j == i + 1)) {
          consumers.push_back(static_cast<uint32_t>(j));
        }
      }
      if (!consumers.empty()) add_tensor(p, static_cast<uint32_t>(i), consumers, cost(rng));
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    const double expected = brute_force_latency(p);
    ASSERT_TRUE(std::isfinite(expected));
    const LatencyResult r = latency_ilp(p, {20.0, 1});
    ASSERT_TRUE(r.feasible) << r.note;
    EXPECT_TRUE(r.optimal);
    EXPECT_NEAR(r.latency_s, expected, 1e-6 * expected);
  }
}

TEST(LatencyTest, IntegerProgramMatchesBruteForceOnRandomSmallDags) {
  expect_ilp_matches_brute_force({.seed = 2024});
}

// A colour class around another node: 1 -> 2 -> 3 with {1, 3} one class too big for an
// accelerator (cap 5, sizes 3). Best: {1, 3} on the CPU, 2 alone on an accelerator: 1 ends at 10,
// the accelerator runs 0.5 + 1 + 0.5 until 12, 3 ends at 22. Contiguity written over the edges
// between classes saw a cycle {1, 3} -> 2 -> {1, 3}, kept 2 off the accelerators and called the
// all-CPU 30 optimal.
TEST(LatencyTest, ANodeInsideAColourClassMayStillRunOnAnAccelerator) {
  PipelineProblem p = make_problem(2, 1, 5.0);
  add_node(p, 1, 10, 3, 7);
  add_node(p, 1, 10, 3);
  add_node(p, 1, 10, 3, 7);
  add_tensor(p, 0, {1}, 0.5);
  add_tensor(p, 1, {2}, 0.5);
  const LatencyResult r = latency_ilp(p, {20.0, 1});
  ASSERT_TRUE(r.feasible) << r.note;
  EXPECT_TRUE(r.optimal);
  EXPECT_DOUBLE_EQ(brute_force_latency(p), 22.0);
  EXPECT_NEAR(r.latency_s, 22.0, 1e-9);
  EXPECT_NEAR(r.best_bound_s, 22.0, 1e-6);
}

// With colour classes that may skip a node (a class around others), on chains with more edges.
TEST(LatencyTest, IntegerProgramMatchesBruteForceWithClassesAroundNodes) {
  expect_ilp_matches_brute_force(
      {.seed = 7, .colour_back = 2, .colour_percent = 35, .chain = true});
}

// solve_pipeline with the latency objective and the greedy method.
PipelinePlan greedy_latency_plan(const PipelineProblem& p) {
  PipelineRequest request;
  request.problem = &p;
  request.options.objective = PipelineObjective::kLatency;
  request.options.latency_method = LatencyMethod::kGreedy;
  return solve_pipeline(request);
}

// With room for the whole chain on one accelerator the greedy split is the chain's critical path,
// the lower bound itself: reported optimal (it was "gap 0.00%").
TEST(LatencyTest, AGreedySplitAtTheLowerBoundIsOptimal) {
  const PipelineProblem p = chain4(100);
  const PipelinePlan plan = greedy_latency_plan(p);
  ASSERT_TRUE(plan.feasible);
  EXPECT_DOUBLE_EQ(plan.latency_s, 4.0);
  EXPECT_DOUBLE_EQ(plan.lower_bound_s, 4.0);
  EXPECT_TRUE(plan.optimal);
  EXPECT_EQ(plan.gap, 0.0);
}

TEST(LatencyTest, PipelineSolverReportsLatencyAndSubgraphTimes) {
  const PipelineProblem p = chain4(10);
  const PipelinePlan plan = greedy_latency_plan(p);
  ASSERT_TRUE(plan.feasible);
  EXPECT_EQ(plan.method, "latency-greedy");
  EXPECT_DOUBLE_EQ(plan.latency_s, 13.5);
  EXPECT_DOUBLE_EQ(plan.objective_s, 13.5);
  ASSERT_TRUE(plan.devices[1].start_s.has_value());
  EXPECT_DOUBLE_EQ(*plan.devices[1].start_s, 1.5);
  const Json j = pipeline_plan_to_json(p, plan);
  EXPECT_EQ(j["objective"], "latency");
  EXPECT_DOUBLE_EQ(j["latency"].get<double>(), 13.5);
}

}  // namespace
}  // namespace dplace
