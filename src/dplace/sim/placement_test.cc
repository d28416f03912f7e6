#include "dplace/sim/placement.h"

#include <gtest/gtest.h>

#include <string>

namespace dplace {
namespace {

Device gpu(std::string name, DeviceKind kind = DeviceKind::kGpu) {
  Device d;
  d.name = std::move(name);
  d.kind = kind;
  d.peak_flops = 1e12;
  d.mem_bandwidth_bytes_per_s = 1e11;
  d.memory_bytes = int64_t{1} << 30;
  return d;
}

// /cpu:0, /gpu:0, /gpu:1; only cpu<->gpu links (no default link), so gpu0 -> gpu1 has no link.
Cluster cluster_without_gpu_link() {
  ClusterSpec spec;
  spec.name = "c";
  spec.devices = {gpu("/cpu:0", DeviceKind::kCpu), gpu("/gpu:0"), gpu("/gpu:1")};
  const Link link{.bandwidth_bytes_per_s = 1e9, .latency_s = 0};
  spec.links = {{.from = "/cpu:0", .to = "/gpu:0", .link = link},
                {.from = "/cpu:0", .to = "/gpu:1", .link = link}};
  return Cluster(std::move(spec), "c");
}

// x -> mm (gpu only, group L) -> y (group L).
Graph tiny_graph() {
  GraphBuilder b("tiny", "tiny");
  const OpId x = b.add_op({.name = "x", .output_bytes = {16}});
  const OpId mm = b.add_op({.name = "mm", .inputs = {{x, 0}}, .colocate = "L", .devices = {"gpu"}});
  b.add_op({.name = "y", .inputs = {{mm, 0}}, .colocate = "L"});
  return std::move(b).build();
}

const DeviceId kCpu(0);
const DeviceId kGpu0(1);
const DeviceId kGpu1(2);

TEST(PlacementTest, FromGroupsPutsEveryOpOnItsGroupsDevice) {
  const Graph g = tiny_graph();
  ASSERT_EQ(g.num_groups(), 2u);  // {x}, {mm, y}
  const Placement p = placement_from_groups(g, {kCpu, kGpu1});
  EXPECT_EQ(p.device_of_op, (std::vector<DeviceId>{kCpu, kGpu1, kGpu1}));
  EXPECT_EQ(single_device_placement(g, kGpu0).device_of_op,
            (std::vector<DeviceId>{kGpu0, kGpu0, kGpu0}));
}

TEST(PlacementTest, GroupsFromPlacementInvertsFromGroups) {
  const Graph g = tiny_graph();
  const std::vector<DeviceId> devices = {kGpu1, kCpu};
  EXPECT_EQ(groups_from_placement(g, placement_from_groups(g, devices)), devices);
}

TEST(PlacementTest, ValidPlacementHasNoProblem) {
  const Graph g = tiny_graph();
  const Cluster c = cluster_without_gpu_link();
  const CostTable costs(g, c);
  EXPECT_EQ(placement_problem(g, c, costs, placement_from_groups(g, {kCpu, kGpu0})), "");
  EXPECT_EQ(placement_problem(g, c, costs, single_device_placement(g, kGpu1)), "");
}

TEST(PlacementTest, WrongSizeIsReported) {
  const Graph g = tiny_graph();
  const Cluster c = cluster_without_gpu_link();
  const CostTable costs(g, c);
  Placement p{{kGpu0, kGpu0}};
  EXPECT_EQ(placement_problem(g, c, costs, p),
            "placement has 2 entries but graph 'tiny' has 3 ops");
}

TEST(PlacementTest, UnassignedOrUnknownDeviceIsReported) {
  const Graph g = tiny_graph();
  const Cluster c = cluster_without_gpu_link();
  const CostTable costs(g, c);
  Placement p{{DeviceId(), kGpu0, kGpu0}};
  EXPECT_EQ(placement_problem(g, c, costs, p), "op 'x' is not assigned to a device of cluster 'c'");
  p.device_of_op[0] = DeviceId(7);
  EXPECT_EQ(placement_problem(g, c, costs, p), "op 'x' is not assigned to a device of cluster 'c'");
}

TEST(PlacementTest, DisallowedDeviceIsReported) {
  const Graph g = tiny_graph();
  const Cluster c = cluster_without_gpu_link();
  const CostTable costs(g, c);
  EXPECT_EQ(placement_problem(g, c, costs, single_device_placement(g, kCpu)),
            "op 'mm' is on '/cpu:0' but allows only gpu");
}

TEST(PlacementTest, SplitGroupIsReported) {
  const Graph g = tiny_graph();
  const Cluster c = cluster_without_gpu_link();
  const CostTable costs(g, c);
  EXPECT_EQ(placement_problem(g, c, costs, Placement{{kCpu, kGpu0, kGpu1}}),
            "colocation group 'L' is split over '/gpu:0' and '/gpu:1'");
}

TEST(PlacementTest, MissingLinkIsReported) {
  GraphBuilder b("g", "g");
  const OpId a = b.add_op({.name = "a", .output_bytes = {8, 8}});
  b.add_op({.name = "b", .inputs = {{a, 1}}});
  const Graph g = std::move(b).build();
  const Cluster c = cluster_without_gpu_link();
  const CostTable costs(g, c);
  EXPECT_EQ(placement_problem(g, c, costs, Placement{{kGpu0, kCpu}}), "");
  EXPECT_EQ(placement_problem(g, c, costs, Placement{{kGpu0, kGpu1}}),
            "tensor 'a:1' must move '/gpu:0' -> '/gpu:1' but there is no link");
}

}  // namespace
}  // namespace dplace
