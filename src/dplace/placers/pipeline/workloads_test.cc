// The published workloads of Tarnawski et al. (tests/data/workloads/msr-dnn-partitioning): the
// DP must reproduce the optima of the authors' reference DP (../shared/workloads/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "dplace/cost/cost_model.h"
#include "dplace/io/dnn_partitioning.h"
#include "dplace/placers/pipeline/latency.h"
#include "dplace/placers/pipeline/pipeline.h"

namespace dplace {
namespace {

const std::string kDir = std::string(DPLACE_TEST_DATA_DIR) + "/workloads/msr-dnn-partitioning";

PipelineProblem load(const std::string& relative) {
  const LoadedGraph g = read_dnn_partitioning_file(kDir + "/" + relative, {});
  const CostTable costs(g.graph, *g.implied_cluster);
  return pipeline_problem_from_graph(g.graph, *g.implied_cluster, costs);
}

double round_significant(double x, int digits) {
  const double scale = std::pow(10.0, digits - 1 - std::floor(std::log10(std::fabs(x))));
  return std::round(x * scale) / scale;
}

struct Optimum {
  const char* file;
  double reference_ms;  // README, from the authors' reference DP
};

class PublishedOptimumTest : public ::testing::TestWithParam<Optimum> {};

TEST_P(PublishedOptimumTest, DpReproducesTheReferenceOptimum) {
  const Optimum& c = GetParam();
  const PipelineProblem p = load(c.file);
  PipelineRequest request;
  request.problem = &p;
  const PipelinePlan plan = solve_pipeline(request);
  ASSERT_TRUE(plan.feasible) << plan.infeasible_reason;
  EXPECT_TRUE(plan.optimal) << plan.note;
  EXPECT_TRUE(plan.contiguous);
  const double ms = plan.max_load_s * 1e3;  // the files' unit is ms
  EXPECT_EQ(round_significant(ms, 4), round_significant(c.reference_ms, 4)) << ms;
  EXPECT_NEAR(ms, c.reference_ms, 1e-5 * c.reference_ms);
  // Every accelerator within its memory cap.
  for (const PipelineDevicePlan& d : plan.devices) EXPECT_LE(d.memory_bytes, d.memory_cap_bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Throughput, PublishedOptimumTest,
    ::testing::Values(Optimum{"throughput-inputs/LayerGraphs/bert24_inference.json", 17.7899},
                      Optimum{"throughput-inputs/LayerGraphs/bert24_training.json", 41.7458},
                      Optimum{"throughput-inputs/LayerGraphs/resnet50_training.json", 78.6318},
                      Optimum{"throughput-inputs/OperatorGraphs/bert_l-3_inference.json", 27.9186},
                      Optimum{"throughput-inputs/OperatorGraphs/bert_l-3_training.json", 65.3031},
                      Optimum{"throughput-inputs/OperatorGraphs/resnet50_training.json", 255.194}));

TEST(PublishedWorkloadsTest, ExpertSplitsEvaluateNoBetterThanTheOptimum) {
  struct Case {
    const char* workload;
    const char* expert;
  };
  for (const Case& c : {Case{"throughput-inputs/LayerGraphs/bert24_training.json",
                             "human-experts/bert24_training_expert.json"},
                        Case{"throughput-inputs/LayerGraphs/resnet50_training.json",
                             "human-experts/resnet50_inference_expert.json"}}) {
    SCOPED_TRACE(c.expert);
    const PipelineProblem p = load(c.workload);
    const DnnPartitioningSplit split = read_dnn_partitioning_split(kDir + "/" + c.expert);
    const std::vector<int> assignment = assignment_from_split(p, split.cpus, split.accels);
    const PipelineEvaluation ev = evaluate_pipeline(p, assignment);
    PipelineRequest request;
    request.problem = &p;
    const PipelinePlan best = solve_pipeline(request);
    EXPECT_GE(ev.max_load_s, best.max_load_s);
    // Every node placed (backward nodes inferred from their colour class).
    for (int d : assignment) EXPECT_GE(d, 0);
  }
}

TEST(PublishedWorkloadsTest, LatencyInputsGetAGreedySplit) {
  for (const char* file : {"latency-inputs/LayerGraphs/bert24_inference.json",
                           "latency-inputs/OperatorGraphs/bert_l-3_inference.json"}) {
    SCOPED_TRACE(file);
    const PipelineProblem p = load(file);
    const LatencyResult r = latency_greedy(p);
    ASSERT_TRUE(r.feasible) << r.note;
    EXPECT_GT(r.latency_s, 0);
    // The greedy split respects the memory caps.
    EXPECT_TRUE(evaluate_pipeline(p, r.device_of_node).violation.empty());
  }
}

}  // namespace
}  // namespace dplace
