#include <gtest/gtest.h>

#include <cmath>

#include "dplace/core/run_forked.h"
#include "dplace/placers/pipeline/milp.h"
#include "dplace/placers/pipeline/pipeline.h"
#include "dplace/placers/pipeline/test_problems.h"
#include "dplace/placers/pipeline/throughput_ilp.h"

namespace dplace {
namespace {

using testing_pipeline::add_node;
using testing_pipeline::add_tensor;
using testing_pipeline::brute_force_throughput;
using testing_pipeline::make_problem;
using testing_pipeline::random_problem;

TEST(MilpTest, SolvesASmallKnapsack) {
  // max 5a + 4b + 3c s.t. 2a + 3b + c <= 4 (as min of the negation): a = c = 1, value 8.
  MilpModel m;
  const int a = m.add_column(0, 1, -5, true);
  const int b = m.add_column(0, 1, -4, true);
  const int c = m.add_column(0, 1, -3, true);
  m.add_row({{a, 2.0}, {b, 3.0}, {c, 1.0}}, MilpModel::Sense::kLessEqual, 4.0);
  const MilpResult r = solve_milp(m, {});
  ASSERT_EQ(r.status, MilpResult::Status::kOptimal);
  EXPECT_NEAR(r.objective, -8.0, 1e-9);
  EXPECT_NEAR(r.values[a], 1.0, 1e-9);
  EXPECT_NEAR(r.values[b], 0.0, 1e-9);
  EXPECT_NEAR(r.values[c], 1.0, 1e-9);
}

TEST(MilpTest, ReportsInfeasibility) {
  MilpModel m;
  const int a = m.add_column(0, 1, 1, true);
  m.add_row({{a, 1.0}}, MilpModel::Sense::kGreaterEqual, 2.0);
  EXPECT_EQ(solve_milp(m, {}).status, MilpResult::Status::kInfeasible);
}

TEST(ThroughputIlpTest, StopsSoonAfterItsTimeLimitEvenInsideAnLpSolve) {
  // A program whose root LP alone takes CBC seconds on the build machine (it does not check its
  // clock there): with a 0.1 s limit it is stopped at the grace period (run_forked.h) at the
  // latest.
  std::mt19937_64 rng(11);
  const PipelineProblem p = random_problem(rng, 1000, 4, 1, /*with_backward=*/true, false);
  ThroughputIlpOptions options;
  options.time_limit_s = 0.1;
  const ThroughputIlpResult r = solve_throughput_ilp(p, options);
  EXPECT_LT(r.seconds, options.time_limit_s + kOverrunMinGraceSeconds + 1.0);
  if (!r.feasible) {
    EXPECT_NE(r.note.find("CBC was stopped after"), std::string::npos) << r.note;
  }
}

TEST(ThroughputIlpTest, NonContiguousSplitBeatsEveryContiguousOne) {
  const PipelineProblem p = testing_pipeline::cpu_op_between_two_accelerator_ops();
  EXPECT_DOUBLE_EQ(brute_force_throughput(p, true), 51.0);
  const double any = brute_force_throughput(p, false);
  EXPECT_DOUBLE_EQ(any, 11.0);
  PipelineRequest request;
  request.problem = &p;
  request.options.contiguous = false;
  request.options.time_limit_s = 20;
  const PipelinePlan plan = solve_pipeline(request);
  ASSERT_TRUE(plan.feasible);
  EXPECT_TRUE(plan.optimal);
  EXPECT_EQ(plan.method, "ilp-cbc");
  EXPECT_NEAR(plan.max_load_s, any, 1e-7);
  EXPECT_FALSE(plan.contiguous);
}

TEST(ThroughputIlpTest, MatchesBruteForceOnRandomSmallDags) {
  std::mt19937_64 rng(777);
  int checked = 0;
  for (int trial = 0; trial < 16; ++trial) {
    const int n = 4 + trial % 3;
    const PipelineProblem p =
        random_problem(rng, n, 1 + trial % 3, trial % 2, trial % 4 == 1, trial % 2 == 0);
    const double expected = brute_force_throughput(p, false);
    ThroughputIlpOptions options;
    options.time_limit_s = 20;
    const ThroughputIlpResult r = solve_throughput_ilp(p, options);
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    if (std::isinf(expected)) {
      EXPECT_FALSE(r.feasible);
      continue;
    }
    ASSERT_TRUE(r.feasible);
    EXPECT_TRUE(r.optimal);
    const PipelineEvaluation ev = evaluate_pipeline(p, r.device_of_node);
    EXPECT_TRUE(ev.violation.empty()) << ev.violation;
    EXPECT_NEAR(ev.max_load_s, expected, 1e-6 * std::max(1.0, expected));
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(ThroughputIlpTest, WarmStartFromTheContiguousOptimumIsKept) {
  std::mt19937_64 rng(5);
  const PipelineProblem p = random_problem(rng, 6, 2, 1, false, false);
  PipelineRequest request;
  request.problem = &p;
  request.options.time_limit_s = 20;
  const PipelinePlan contiguous = solve_pipeline(request);
  request.options.contiguous = false;
  const PipelinePlan any = solve_pipeline(request);
  ASSERT_TRUE(contiguous.feasible && any.feasible);
  EXPECT_LE(any.max_load_s, contiguous.max_load_s + 1e-9);
}

}  // namespace
}  // namespace dplace
