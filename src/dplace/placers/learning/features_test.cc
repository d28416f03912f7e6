#include "dplace/placers/learning/features.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dplace {
namespace {

// in (Input) -> m1 (MatMul) -> m2 (MatMul) -> r (Relu), in -> r; r is allowed on the CPU only.
struct Fixture {
  Fixture() : graph(make()), cluster(make_cluster()), costs(graph, cluster) {}
  static Graph make() {
    GraphBuilder b("g", "test");
    Op in{.name = "in", .type = "Input", .output_bytes = {100}};
    const OpId i = b.add_op(in);
    const OpId m1 = b.add_op({.name = "m1",
                              .type = "MatMul",
                              .inputs = {{i, 0}},
                              .output_bytes = {1000},
                              .flops = 1e6,
                              .param_bytes = 4000});
    const OpId m2 = b.add_op(
        {.name = "m2", .type = "MatMul", .inputs = {{m1, 0}}, .output_bytes = {10}, .flops = 1e6});
    b.add_op({.name = "r",
              .type = "Relu",
              .inputs = {{m2, 0}, {i, 0}},
              .output_bytes = {10},
              .flops = 10,
              .devices = {"cpu"}});
    return std::move(b).build();
  }
  static Cluster make_cluster() {
    ClusterSpec spec;
    spec.name = "c";
    Device cpu{.name = "/cpu:0",
               .kind = DeviceKind::kCpu,
               .peak_flops = 1e9,
               .mem_bandwidth_bytes_per_s = 1e10,
               .memory_bytes = 1 << 30};
    Device gpu = cpu;
    gpu.name = "/gpu:0";
    gpu.kind = DeviceKind::kGpu;
    spec.devices = {cpu, gpu};
    spec.default_link = Link{.bandwidth_bytes_per_s = 1e9, .latency_s = 0};
    return Cluster(spec, "test");
  }
  Graph graph;
  Cluster cluster;
  CostTable costs;
};

TEST(FeaturesTest, EncodesTypesOutputsAdjacencyAndAllowedDevices) {
  Fixture f;
  // Groups: {in}, {m1}, {m2}, {r} (one op per group, as a coarsening without merges).
  Coarsening c;
  c.num_groups = 4;
  c.group_of_op = {GroupId(0), GroupId(1), GroupId(2), GroupId(3)};
  c.group_ops = {{OpId(0)}, {OpId(1)}, {OpId(2)}, {OpId(3)}};
  FeatureOptions o;
  o.type_vocabulary = 2;
  o.output_slots = 2;
  o.adjacency_slots = 2;
  const GroupFeatures g = make_group_features(f.graph, f.costs, c, o);
  ASSERT_EQ(g.feature_dim, 3 + 2 + 4 + 3);
  EXPECT_EQ(g.vocabulary, (std::vector<std::string>{"MatMul", "Input"}));  // 2 MatMuls first
  auto at = [&](int group, int col) { return g.values[group * g.feature_dim + col]; };
  // Type counts: m1 has one MatMul of a maximum count of 1; r falls in "other".
  EXPECT_FLOAT_EQ(at(1, 0), 1.0f);
  EXPECT_FLOAT_EQ(at(1, 1), 0.0f);
  EXPECT_FLOAT_EQ(at(3, 2), 1.0f);
  EXPECT_FLOAT_EQ(at(0, 1), 1.0f);
  // Output sizes: m1 sends its 1000-byte output, the graph's largest tensor.
  EXPECT_FLOAT_EQ(at(1, 3), 1.0f);
  EXPECT_FLOAT_EQ(at(1, 4), 0.0f);
  EXPECT_NEAR(at(0, 3), std::log1p(100.0) / std::log1p(1000.0), 1e-6);
  // Adjacency of r (group 3): predecessors m2 (10 bytes) and in (100 bytes): in first.
  EXPECT_FLOAT_EQ(at(3, 5), 1.0f / 4);  // (id 0 + 1) / 4
  EXPECT_FLOAT_EQ(at(3, 6), 3.0f / 4);  // m2: (2 + 1) / 4
  EXPECT_FLOAT_EQ(at(3, 7), 0.0f);      // no successors
  // Parameter bytes: m1 holds all of them.
  EXPECT_FLOAT_EQ(at(1, 10), 1.0f);
  EXPECT_FLOAT_EQ(at(2, 10), 0.0f);
  // Position.
  EXPECT_FLOAT_EQ(at(2, 11), 0.5f);
  // r may only use the CPU.
  EXPECT_EQ(g.allowed, (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 0}));
}

}  // namespace
}  // namespace dplace
