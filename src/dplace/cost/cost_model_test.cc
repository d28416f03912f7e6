#include "dplace/cost/cost_model.h"

#include <gtest/gtest.h>

#include <string>

#include "dplace/core/error.h"

namespace dplace {
namespace {

Device make_device(std::string name, DeviceKind kind) {
  Device d;
  d.name = std::move(name);
  d.kind = kind;
  d.peak_flops = 1e12;
  d.mem_bandwidth_bytes_per_s = 1e11;
  d.memory_bytes = int64_t{1} << 30;
  d.op_overhead_s = 1e-5;
  return d;
}

// /cpu:0 (no efficiency table), /gpu:0 (default 0.5, MatMul 0.8), /gpu:1 (only MatMul 0.25).
Cluster make_cluster() {
  ClusterSpec spec;
  spec.name = "test";
  spec.devices.push_back(make_device("/cpu:0", DeviceKind::kCpu));
  Device gpu0 = make_device("/gpu:0", DeviceKind::kGpu);
  gpu0.efficiency = {{"default", 0.5}, {"MatMul", 0.8}};
  spec.devices.push_back(gpu0);
  Device gpu1 = make_device("/gpu:1", DeviceKind::kGpu);
  gpu1.efficiency = {{"MatMul", 0.25}};
  spec.devices.push_back(gpu1);
  spec.default_link = Link{.bandwidth_bytes_per_s = 1e10, .latency_s = 1e-5};
  return Cluster(std::move(spec), "test");
}

const DeviceId kCpu0(0);
const DeviceId kGpu0(1);
const DeviceId kGpu1(2);

TEST(CostModelTest, ComputeBoundOpUsesFlopsOverEfficientPeak) {
  GraphBuilder b("g", "g");
  const OpId mm = b.add_op({.name = "mm", .type = "Conv2D", .flops = 2e9, .bytes_accessed = 8e6});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  // gpu0: default eff 0.5 -> 2e9 / (1e12 * 0.5) = 4e-3 s; memory 8e6 / 1e11 = 8e-5 s.
  // time = 1e-5 + max(4e-3, 8e-5) = 4.01e-3.
  EXPECT_DOUBLE_EQ(op_time_s(g, mm, c.device(kGpu0)), 4.01e-3);
  // cpu0: no table -> eff 1: 1e-5 + 2e-3.
  EXPECT_DOUBLE_EQ(op_time_s(g, mm, c.device(kCpu0)), 2.01e-3);
}

TEST(CostModelTest, MemoryBoundOpUsesBytesOverBandwidth) {
  GraphBuilder b("g", "g");
  const OpId add = b.add_op({.name = "add", .type = "Add", .flops = 1e6, .bytes_accessed = 1e9});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  // compute 1e6 / 5e11 = 2e-6 s; memory 1e9 / 1e11 = 1e-2 s -> 1e-5 + 1e-2.
  EXPECT_DOUBLE_EQ(op_time_s(g, add, c.device(kGpu0)), 1.001e-2);
}

TEST(CostModelTest, AbsentBytesAccessedIsInputsPlusOutputs) {
  GraphBuilder b("g", "g");
  const OpId x = b.add_op({.name = "x", .output_bytes = {1000, 3000}});
  const OpId y =
      b.add_op({.name = "y", .inputs = {{x, 0}, {x, 1}, {x, 1}}, .output_bytes = {2000}});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  // Inputs 1000 + 3000 + 3000 (argument list, repeated tensor read twice) + output 2000 = 9000 B.
  // 9000 / 1e11 = 9e-8 s, + overhead 1e-5. x alone: 4000 B written.
  EXPECT_DOUBLE_EQ(op_time_s(g, y, c.device(kCpu0)), 1e-5 + 9e-8);
  EXPECT_DOUBLE_EQ(op_time_s(g, x, c.device(kCpu0)), 1e-5 + 4e-8);
}

TEST(CostModelTest, EfficiencyByTypeThenDefaultThenOne) {
  GraphBuilder b("g", "g");
  const OpId mm = b.add_op({.name = "mm", .type = "MatMul", .flops = 1e9});
  const OpId conv = b.add_op({.name = "conv", .type = "Conv2D", .flops = 1e9});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  // Outputs are 0 bytes, bytes_accessed absent -> 0: pure compute.
  EXPECT_DOUBLE_EQ(op_time_s(g, mm, c.device(kGpu0)), 1e-5 + 1e9 / 0.8e12);    // type entry
  EXPECT_DOUBLE_EQ(op_time_s(g, conv, c.device(kGpu0)), 1e-5 + 1e9 / 0.5e12);  // default
  EXPECT_DOUBLE_EQ(op_time_s(g, mm, c.device(kGpu1)), 1e-5 + 1e9 / 0.25e12);   // type entry
  EXPECT_DOUBLE_EQ(op_time_s(g, conv, c.device(kGpu1)), 1e-5 + 1e9 / 1e12);    // absent: 1.0
  EXPECT_DOUBLE_EQ(op_time_s(g, conv, c.device(kCpu0)), 1e-5 + 1e9 / 1e12);    // no table: 1.0
}

TEST(CostModelTest, TimeOverrideByNameBeatsKindAndSkipsOverhead) {
  GraphBuilder b("g", "g");
  const OpId op = b.add_op(
      {.name = "op",
       .flops = 1e9,
       .time_s = {{.device = "gpu", .time_s = 0.5}, {.device = "/gpu:1", .time_s = 0.25}}});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  EXPECT_EQ(op_time_s(g, op, c.device(kGpu0)), 0.5);   // kind
  EXPECT_EQ(op_time_s(g, op, c.device(kGpu1)), 0.25);  // name wins although listed after kind
  EXPECT_DOUBLE_EQ(op_time_s(g, op, c.device(kCpu0)), 1e-5 + 1e-3);  // formula
}

TEST(CostModelTest, ZeroWorkOpTakesNoTimeNotEvenOverhead) {
  GraphBuilder b("g", "g");
  const OpId id = b.add_op({.name = "id", .type = "Identity"});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  EXPECT_EQ(op_time_s(g, id, c.device(kGpu0)), 0.0);
  const CostTable costs(g, c);
  EXPECT_EQ(costs.time_s(id, kCpu0), 0.0);
  EXPECT_EQ(costs.fastest_time_s(id), 0.0);
}

TEST(CostModelTest, TransferIsLatencyPlusBytesOverBandwidth) {
  const Link link{.bandwidth_bytes_per_s = 1e9, .latency_s = 2e-5};
  EXPECT_DOUBLE_EQ(transfer_time_s(1000000, link), 2e-5 + 1e-3);
  EXPECT_EQ(transfer_time_s(0, link), 2e-5);
}

TEST(CostModelTest, DisallowedDeviceIsInfiniteAndFastestIgnoresIt) {
  GraphBuilder b("g", "g");
  // cpu0 (allowed by kind) and gpu1 (allowed by name) both take 1e-5 + 1e9 / 1e12. gpu0 would be
  // fastest through its override but is not allowed, so it is infinite and fastest ignores it.
  const OpId op = b.add_op({.name = "op",
                            .flops = 1e9,
                            .devices = {"cpu", "/gpu:1"},
                            .time_s = {{.device = "/gpu:0", .time_s = 1e-9}}});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  const CostTable costs(g, c);
  EXPECT_EQ(costs.time_s(op, kGpu0), kInfiniteTime);
  EXPECT_FALSE(costs.allowed(op, kGpu0));
  EXPECT_TRUE(costs.allowed(op, kCpu0));
  EXPECT_TRUE(costs.allowed(op, kGpu1));
  EXPECT_DOUBLE_EQ(costs.fastest_time_s(op), 1e-5 + 1e-3);
  EXPECT_TRUE(op_allows_device(g.op(op), c.device(kGpu1)));
  EXPECT_FALSE(op_allows_device(g.op(op), c.device(kGpu0)));
}

TEST(CostModelTest, GroupDevicesAreTheIntersectionInClusterOrder) {
  GraphBuilder b("g", "g");
  const OpId a = b.add_op({.name = "a", .colocate = "L", .devices = {"gpu"}});
  b.add_op({.name = "b", .inputs = {{a, 0}}, .colocate = "L", .devices = {"/gpu:1", "/gpu:0"}});
  b.add_op({.name = "c"});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  const CostTable costs(g, c);
  ASSERT_EQ(g.num_groups(), 2u);
  EXPECT_EQ(costs.group_devices(GroupId(0)), (std::vector<DeviceId>{kGpu0, kGpu1}));
  EXPECT_EQ(costs.group_devices(GroupId(1)), (std::vector<DeviceId>{kCpu0, kGpu0, kGpu1}));
}

TEST(CostModelTest, GroupWithDisjointAllowedDevicesIsConfigError) {
  GraphBuilder b("g", "g");
  b.add_op({.name = "a", .colocate = "L", .devices = {"cpu"}});
  b.add_op({.name = "b", .colocate = "L", .devices = {"gpu"}});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  try {
    CostTable costs(g, c);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("colocation group 'L'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("op 'b'"), std::string::npos) << msg;
  }
}

TEST(CostModelTest, OpWithNoAllowedDeviceIsConfigError) {
  GraphBuilder b("g", "g");
  b.add_op({.name = "t", .devices = {"accel"}});
  const Graph g = std::move(b).build();
  const Cluster c = make_cluster();
  try {
    CostTable costs(g, c);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "graph 'g': op 't': no device of cluster 'test' is allowed (devices: accel)");
  }
}

}  // namespace
}  // namespace dplace
