#include "dplace/placers/pipeline/problem.h"

#include <gtest/gtest.h>

#include "dplace/core/error.h"
#include "dplace/placers/pipeline/test_problems.h"
#include "dplace/placers/pipeline/units.h"

namespace dplace {
namespace {

using testing_pipeline::add_node;
using testing_pipeline::add_tensor;
using testing_pipeline::make_problem;

// a -> b -> c, and a -> c: one tensor from a (cost 1) read by b and c, one from b (cost 2).
PipelineProblem chain3() {
  PipelineProblem p = make_problem(2, 1);
  add_node(p, 1, 10, 5);  // a
  add_node(p, 2, 20, 6);  // b
  add_node(p, 3, 30, 7);  // c
  add_tensor(p, 0, {1, 2}, 1.0);
  add_tensor(p, 1, {2}, 2.0);
  return p;
}

TEST(PipelineEvaluateTest, AcceleratorPaysEachCrossingTensorOnce) {
  const PipelineProblem p = chain3();
  // a on accel 0; b, c on accel 1.
  const PipelineEvaluation ev = evaluate_pipeline(p, {0, 1, 1});
  // accel 0: 1 + tensor a (leaves, once although two edges) = 2.
  EXPECT_DOUBLE_EQ(ev.devices[0].load_s, 2.0);
  EXPECT_DOUBLE_EQ(ev.devices[0].comm_s, 1.0);
  // accel 1: 2 + 3 + tensor a (enters, once) = 6; tensor b stays inside.
  EXPECT_DOUBLE_EQ(ev.devices[1].load_s, 6.0);
  EXPECT_DOUBLE_EQ(ev.devices[1].memory_bytes, 13.0);
  EXPECT_DOUBLE_EQ(ev.max_load_s, 6.0);
  EXPECT_TRUE(ev.violation.empty());
  EXPECT_TRUE(ev.contiguous);
}

TEST(PipelineEvaluateTest, CpuPaysNoCommunication) {
  const PipelineProblem p = chain3();
  // a, c on accel 0; b on the CPU (device 2).
  const PipelineEvaluation ev = evaluate_pipeline(p, {0, 2, 0});
  EXPECT_DOUBLE_EQ(ev.devices[2].load_s, 20.0);
  EXPECT_DOUBLE_EQ(ev.devices[2].comm_s, 0.0);
  // accel 0: 1 + 3 + tensor a (b reads it outside) + tensor b (enters) = 7.
  EXPECT_DOUBLE_EQ(ev.devices[0].load_s, 7.0);
  // a -> b -> c with b elsewhere: accel 0's set is not convex, so not contiguous.
  EXPECT_FALSE(ev.contiguous);
}

TEST(PipelineEvaluateTest, ReportsMemoryColourAndAllowedTypeViolations) {
  PipelineProblem p = make_problem(2, 1, 10.0);
  add_node(p, 1, 1, 8, 7);
  add_node(p, 1, kInfiniteTime, 8, 7);
  add_tensor(p, 0, {1}, 0);
  EXPECT_NE(evaluate_pipeline(p, {0, 0}).violation.find("more than its memory of 10"),
            std::string::npos);
  EXPECT_NE(evaluate_pipeline(p, {0, 1}).violation.find("colour class"), std::string::npos);
  EXPECT_NE(evaluate_pipeline(p, {2, 2}).violation.find("may not run on '/cpu:0'"),
            std::string::npos);
}

TEST(UnitDagTest, BackwardNodesFollowTheirForwardColour) {
  PipelineProblem p = make_problem(2, 0);
  add_node(p, 1, 1, 0, 1);        // f0
  add_node(p, 1, 1, 0, 2);        // f1
  add_node(p, 1, 1, 0, 2, true);  // b1
  add_node(p, 1, 1, 0, 1, true);  // b0
  add_tensor(p, 0, {1, 3}, 0);
  add_tensor(p, 1, {2}, 0);
  add_tensor(p, 2, {3}, 0);
  const UnitDag dag = build_unit_dag(p);
  ASSERT_EQ(dag.num_units, 2u);
  EXPECT_EQ(dag.unit_of_node[0], dag.unit_of_node[3]);
  EXPECT_EQ(dag.unit_of_node[1], dag.unit_of_node[2]);
  // Only the forward edge f0 -> f1 orders the units.
  EXPECT_EQ(dag.succ[dag.unit_of_node[0]], std::vector<uint32_t>{dag.unit_of_node[1]});
  EXPECT_DOUBLE_EQ(dag.time_s[0][0], 2.0);
}

TEST(UnitDagTest, OrphanBackwardNodesGetMirroredEdges) {
  PipelineProblem p = make_problem(2, 0);
  add_node(p, 1, 1, 0, 1);         // f0
  add_node(p, 1, 1, 0, 1, true);   // b0
  add_node(p, 1, 1, 0, 99, true);  // orphan o, fed by b0
  add_tensor(p, 0, {1}, 0);
  add_tensor(p, 1, {2}, 0);
  const UnitDag dag = build_unit_dag(p);
  ASSERT_EQ(dag.num_units, 2u);
  const uint32_t f = dag.unit_of_node[0];
  const uint32_t o = dag.unit_of_node[2];
  // b0 -> o (backward) becomes o -> f in the unit DAG.
  EXPECT_EQ(dag.succ[o], std::vector<uint32_t>{f});
  EXPECT_TRUE(dag.succ[f].empty());
}

TEST(UnitDagTest, ColourCyclesAreFusedIntoOneUnit) {
  PipelineProblem p = make_problem(2, 0);
  add_node(p, 1, 1, 0, 1);   // x (colour 1)
  add_node(p, 1, 1, 0, 2);   // y (colour 2)
  add_node(p, 1, 1, 0, 1);   // z (colour 1)
  add_node(p, 1, 1, 0, 3);   // w
  add_tensor(p, 0, {1}, 0);  // x -> y
  add_tensor(p, 1, {2}, 0);  // y -> z: colour 1 -> 2 -> 1 is a cycle
  add_tensor(p, 2, {3}, 0);
  const UnitDag dag = build_unit_dag(p);
  ASSERT_EQ(dag.num_units, 2u);
  EXPECT_EQ(dag.unit_of_node[0], dag.unit_of_node[1]);
  EXPECT_EQ(dag.unit_of_node[0], dag.unit_of_node[2]);
  EXPECT_NE(dag.unit_of_node[0], dag.unit_of_node[3]);
}

TEST(UnitDagTest, TensorsInsideOneUnitNeverCross) {
  PipelineProblem p = make_problem(2, 0);
  add_node(p, 1, 1, 0, 5);
  add_node(p, 1, 1, 0, 5);
  add_node(p, 1, 1);
  add_tensor(p, 0, {1}, 4.0);  // inside the colour class
  add_tensor(p, 1, {2}, 1.5);
  const UnitDag dag = build_unit_dag(p);
  ASSERT_EQ(dag.tensors.size(), 1u);
  EXPECT_DOUBLE_EQ(dag.tensors[0].comm_s[0], 1.5);
  EXPECT_EQ(dag.tensors[0].units.size(), 2u);
}

TEST(PipelineProblemTest, FromGraphGroupsIdenticalDevicesAndUsesLinksForCommunication) {
  GraphBuilder b("g", "test");
  const OpId x =
      b.add_op({.name = "x", .output_bytes = {1000}, .time_s = {{"gpu", 0.5}, {"cpu", 2.0}}});
  b.add_op({.name = "y",
            .inputs = {{x, 0}},
            .output_bytes = {10},
            .param_bytes = 64,
            .colocate = "grp",
            .phase = Phase::kBackward,
            .time_s = {{"gpu", 0.25}, {"cpu", 1.0}}});
  b.add_op({.name = "z",
            .inputs = {{x, 0}},
            .colocate = "grp",
            .time_s = {{"gpu", 0.125}, {"cpu", 1.0}}});
  const Graph g = std::move(b).build();
  ClusterSpec spec;
  spec.name = "c";
  for (const char* name : {"/cpu:0", "/gpu:0", "/gpu:1"}) {
    Device d;
    d.name = name;
    d.kind = name[1] == 'c' ? DeviceKind::kCpu : DeviceKind::kGpu;
    d.peak_flops = 1e12;
    d.mem_bandwidth_bytes_per_s = 1e11;
    d.memory_bytes = 1 << 20;
    spec.devices.push_back(d);
  }
  spec.links.push_back({"/cpu:0", "/gpu:0", Link{1e3, 0.5}, false});
  spec.links.push_back({"/cpu:0", "/gpu:1", Link{1e3, 0.5}, false});
  spec.default_link = Link{1e6, 0};
  const Cluster cluster(spec, "test");
  const CostTable costs(g, cluster);
  const PipelineProblem p = pipeline_problem_from_graph(g, cluster, costs);
  ASSERT_EQ(p.types.size(), 2u);
  EXPECT_EQ(p.types[0].name, "cpu");
  EXPECT_FALSE(p.types[0].pays_communication);
  EXPECT_EQ(p.types[1].name, "gpu");
  EXPECT_EQ(p.types[1].count, 2);
  EXPECT_EQ(p.device_name(2), "/gpu:1");
  ASSERT_EQ(p.nodes.size(), 3u);
  EXPECT_DOUBLE_EQ(p.nodes[0].time_s[1], 0.5);
  EXPECT_DOUBLE_EQ(p.nodes[1].time_s[0], 1.0);
  EXPECT_TRUE(p.nodes[1].backward);
  EXPECT_DOUBLE_EQ(p.nodes[1].size_bytes, 64);
  EXPECT_EQ(p.nodes[1].colour, p.nodes[2].colour);
  EXPECT_EQ(p.nodes[0].colour, -1);
  // One tensor with consumers; cost on a GPU = 0.5 s + 1000 B / (1000 B/s) over the host link.
  ASSERT_EQ(p.tensors.size(), 1u);
  EXPECT_EQ(p.tensors[0].consumers, (std::vector<uint32_t>{1, 2}));
  EXPECT_DOUBLE_EQ(p.tensors[0].comm_s[1], 1.5);
  EXPECT_DOUBLE_EQ(p.tensors[0].comm_s[0], 0.0);
}

TEST(PipelineProblemTest, IdenticalCpusAreOneTypeWhateverTheirPartnerLink) {
  // The host CPU's partner is an accelerator, the other CPUs' is the host; CPUs pay no
  // communication, so the link must not split them (it made types "cpu@/cpu:0" and "cpu@/cpu:1").
  GraphBuilder b("g", "test");
  b.add_op({.name = "x", .output_bytes = {1000}, .time_s = {{"accel", 0.5}, {"cpu", 2.0}}});
  const Graph g = std::move(b).build();
  ClusterSpec spec;
  spec.name = "c";
  for (const char* name : {"/accel:0", "/cpu:0", "/cpu:1", "/cpu:2"}) {
    Device d;
    d.name = name;
    d.kind = name[1] == 'c' ? DeviceKind::kCpu : DeviceKind::kAccel;
    d.peak_flops = 1e12;
    d.mem_bandwidth_bytes_per_s = 1e11;
    d.memory_bytes = 1 << 20;
    spec.devices.push_back(d);
  }
  spec.links.push_back({"/cpu:0", "/accel:0", Link{1e3, 0.5}, false});
  spec.default_link = Link{1e9, 0};
  const Cluster cluster(spec, "test");
  const CostTable costs(g, cluster);
  const PipelineProblem p = pipeline_problem_from_graph(g, cluster, costs);
  ASSERT_EQ(p.types.size(), 2u);
  EXPECT_EQ(p.types[0].name, "accel");
  EXPECT_EQ(p.types[1].name, "cpu");
  EXPECT_EQ(p.types[1].count, 3);
}

TEST(PipelineProblemTest, ExtraCommCostOverridesTheLink) {
  GraphBuilder b("g", "test");
  Op x{.name = "x", .output_bytes = {1000}};
  x.extra = Json{{"comm_cost_s", 0.125}, {"dnn_id", 42}};
  const OpId xid = b.add_op(x);
  b.add_op({.name = "y", .inputs = {{xid, 0}}});
  const Graph g = std::move(b).build();
  ClusterSpec spec;
  spec.name = "c";
  for (const char* name : {"/cpu:0", "/accel:0"}) {
    Device d;
    d.name = name;
    d.kind = name[1] == 'c' ? DeviceKind::kCpu : DeviceKind::kAccel;
    d.peak_flops = 1e12;
    d.mem_bandwidth_bytes_per_s = 1e11;
    d.memory_bytes = 1 << 20;
    spec.devices.push_back(d);
  }
  spec.default_link = Link{1.0, 0};
  const Cluster cluster(spec, "test");
  const CostTable costs(g, cluster);
  const PipelineProblem p = pipeline_problem_from_graph(g, cluster, costs);
  ASSERT_EQ(p.tensors.size(), 1u);
  EXPECT_DOUBLE_EQ(p.tensors[0].comm_s[1], 0.125);
  EXPECT_EQ(p.nodes[0].external_id, 42);
}

TEST(PipelineProblemTest, ValidationNamesTheProblem) {
  PipelineProblem p = make_problem(1, 0);
  add_node(p, 1, 1);
  p.nodes[0].time_s = {1.0};
  EXPECT_THROW(validate_pipeline_problem(p), ConfigError);
}

}  // namespace
}  // namespace dplace
