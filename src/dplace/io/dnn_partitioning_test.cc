#include "dplace/io/dnn_partitioning.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"
#include "dplace/io/importers.h"

namespace dplace {
namespace {

const std::string kDir = std::string(DPLACE_TEST_DATA_DIR) + "/workloads/msr-dnn-partitioning";

// Writes `text` to a fresh file in the test's temp directory and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = scratch_path(name);
  std::ofstream(path) << text;
  return path;
}

// The FormatError message for reading `text`, or "" if it reads.
std::string read_error(const std::string& name, const std::string& text) {
  try {
    read_dnn_partitioning_file(write_temp(name, text), {});
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

const char* kTiny = R"({"maxSizePerFPGA": 1000, "maxFPGAs": 2, "maxCPUs": 1,
  "nodes": [
    {"id": 7, "name": "a", "supportedOnFpga": 1, "cpuLatency": 10, "fpgaLatency": 1,
     "isBackwardNode": 0, "colorClass": 3, "size": 100},
    {"id": 9, "supportedOnFpga": false, "cpuLatency": 20, "fpgaLatency": 2,
     "isBackwardNode": false, "size": 50},
    {"id": 11, "name": "a_grad", "supportedOnFpga": true, "cpuLatency": 30, "fpgaLatency": 3,
     "isBackwardNode": true, "colorClass": 3}],
  "edges": [
    {"sourceId": 7, "destId": 9, "cost": 0.5, "size": 2048},
    {"sourceId": 7, "destId": 11, "cost": 0.5, "size": 4096},
    {"sourceId": 9, "destId": 11, "cost": 0.25}]})";

TEST(DnnPartitioningTest, DetectsTheFormatByItsFields) {
  EXPECT_TRUE(is_dnn_partitioning_json(Json::parse(kTiny)));
  EXPECT_FALSE(is_dnn_partitioning_json(Json::parse(R"({"format": "dplace.graph/1", "ops": []})")));
  EXPECT_FALSE(is_dnn_partitioning_json(Json::parse(R"({"nodes": [], "edges": []})")));
  EXPECT_FALSE(is_dnn_partitioning_json(Json::parse("[1, 2]")));
}

TEST(DnnPartitioningTest, ReadsNodesEdgesAndTheirFields) {
  const LoadedGraph g = read_dnn_partitioning_file(write_temp("tiny.json", kTiny), {});
  EXPECT_EQ(g.format, "dnn-partitioning");
  ASSERT_EQ(g.graph.num_ops(), 3u);
  EXPECT_EQ(g.graph.num_edges(), 3u);
  const Op& a = g.graph.op(*g.graph.find_op("a"));
  const Op& b = g.graph.op(*g.graph.find_op("node9"));  // no name: "node<id>"
  const Op& grad = g.graph.op(*g.graph.find_op("a_grad"));
  EXPECT_EQ(a.colocate, "cc3");
  EXPECT_EQ(grad.colocate, "cc3");
  EXPECT_EQ(b.colocate, "");
  EXPECT_EQ(a.phase, Phase::kForward);
  EXPECT_EQ(grad.phase, Phase::kBackward);
  EXPECT_TRUE(a.devices.empty());
  EXPECT_EQ(b.devices, std::vector<std::string>{"cpu"});
  EXPECT_EQ(a.param_bytes, 100);
  EXPECT_EQ(grad.param_bytes, 0);
  // The largest out-edge size, and a warning that the two sizes differ.
  EXPECT_EQ(a.output_bytes, std::vector<int64_t>{4096});
  EXPECT_EQ(g.warnings.size(), 1u);
  // Times per device kind, in seconds (the file's unit is ms).
  ASSERT_EQ(a.time_s.size(), 3u);
  EXPECT_EQ(a.time_s[0].device, "accel");
  EXPECT_DOUBLE_EQ(a.time_s[0].time_s, 1e-3);
  EXPECT_EQ(a.time_s[1].device, "gpu");
  EXPECT_EQ(a.time_s[2].device, "cpu");
  EXPECT_DOUBLE_EQ(a.time_s[2].time_s, 10e-3);
  EXPECT_EQ(a.extra["dnn_id"], 7);
  EXPECT_DOUBLE_EQ(a.extra["comm_cost_s"].get<double>(), 0.5e-3);
  EXPECT_DOUBLE_EQ(b.extra["comm_cost_s"].get<double>(), 0.25e-3);
  EXPECT_FALSE(grad.extra.contains("comm_cost_s"));
  // Inputs: a_grad reads a and node9.
  ASSERT_EQ(grad.inputs.size(), 2u);
}

TEST(DnnPartitioningTest, ImpliesAClusterOfAcceleratorsAndCpuCores) {
  const LoadedGraph g = read_dnn_partitioning_file(write_temp("tiny.json", kTiny), {});
  ASSERT_TRUE(g.implied_cluster.has_value());
  const Cluster& c = *g.implied_cluster;
  ASSERT_EQ(c.num_devices(), 3u);
  EXPECT_EQ(c.device(DeviceId(0)).name, "/accel:0");
  EXPECT_EQ(c.device(DeviceId(0)).kind, DeviceKind::kAccel);
  EXPECT_EQ(c.device(DeviceId(0)).memory_bytes, 1000);
  EXPECT_EQ(c.device(DeviceId(2)).name, "/cpu:0");
  EXPECT_EQ(c.device(DeviceId(2)).kind, DeviceKind::kCpu);
  // Bandwidth sum(size) / sum(cost) over edges with both: (2048 + 4096) B / 1 ms.
  const Link* host = c.link(DeviceId(0), DeviceId(2));
  ASSERT_NE(host, nullptr);
  EXPECT_DOUBLE_EQ(host->bandwidth_bytes_per_s, 6144 / 1e-3);
  const Link* peer = c.link(DeviceId(0), DeviceId(1));
  ASSERT_NE(peer, nullptr);
  EXPECT_DOUBLE_EQ(peer->bandwidth_bytes_per_s, 6144 / 1e-3 / 2);
}

TEST(DnnPartitioningTest, KeepsTheRawFileLosslessly) {
  const DnnPartitioningFile f = read_dnn_partitioning_raw(write_temp("tiny.json", kTiny));
  EXPECT_EQ(f.max_accels, 2);
  EXPECT_EQ(f.max_cpus, 1);
  EXPECT_EQ(f.max_size_per_accel_bytes, 1000);
  ASSERT_EQ(f.nodes.size(), 3u);
  EXPECT_EQ(f.nodes[1].id, 9);
  EXPECT_FALSE(f.nodes[1].supported_on_accel);
  EXPECT_FALSE(f.nodes[1].color_class.has_value());
  EXPECT_EQ(f.nodes[2].cpu_latency, 30);
  ASSERT_EQ(f.edges.size(), 3u);
  EXPECT_EQ(f.edges[2].cost, 0.25);
  EXPECT_FALSE(f.edges[2].size_bytes.has_value());
}

struct WorkloadCounts {
  const char* file;
  size_t nodes;
  size_t edges;
  int accels;
  int cpus;
};

TEST(DnnPartitioningTest, ReadsEveryPublishedWorkloadWithItsCounts) {
  // Counts from the files themselves (nodes[] and edges[] lengths, maxFPGAs, maxCPUs).
  const WorkloadCounts cases[] = {
      {"throughput-inputs/LayerGraphs/bert24_inference.json", 32, 55, 6, 1},
      {"throughput-inputs/LayerGraphs/bert24_training.json", 64, 110, 6, 1},
      {"throughput-inputs/LayerGraphs/resnet50_training.json", 354, 386, 6, 1},
      {"throughput-inputs/OperatorGraphs/bert_l-3_inference.json", 235, 250, 3, 1},
      {"throughput-inputs/OperatorGraphs/bert_l-3_training.json", 600, 817, 3, 1},
      {"throughput-inputs/OperatorGraphs/resnet50_training.json", 1243, 1806, 6, 1},
      {"latency-inputs/LayerGraphs/bert24_inference.json", 32, 55, 5, 8},
      {"latency-inputs/OperatorGraphs/bert_l-3_inference.json", 235, 250, 4, 8},
  };
  for (const WorkloadCounts& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = kDir + "/" + c.file;
    const Json value = read_json_file(path);
    EXPECT_TRUE(is_dnn_partitioning_json(value));
    const LoadedGraph g = read_dnn_partitioning_file(path, {});
    EXPECT_EQ(g.graph.num_ops(), c.nodes);
    EXPECT_EQ(g.graph.num_edges(), c.edges);
    ASSERT_TRUE(g.implied_cluster.has_value());
    EXPECT_EQ(g.implied_cluster->devices_of_kind(DeviceKind::kAccel).size(),
              static_cast<size_t>(c.accels));
    EXPECT_EQ(g.implied_cluster->devices_of_kind(DeviceKind::kCpu).size(),
              static_cast<size_t>(c.cpus));
    EXPECT_EQ(g.implied_cluster->device(DeviceId(0)).memory_bytes,
              static_cast<int64_t>(value["maxSizePerFPGA"].get<double>()));
  }
}

TEST(DnnPartitioningTest, ReadsTheExpertSplits) {
  const DnnPartitioningSplit s =
      read_dnn_partitioning_split(kDir + "/human-experts/bert24_training_expert.json");
  EXPECT_EQ(s.cpus.size(), 1u);
  EXPECT_EQ(s.accels.size(), 6u);
  EXPECT_TRUE(s.cpus[0].empty());
  EXPECT_EQ(s.accels[0].front(), 1);
}

TEST(DnnPartitioningTest, MissingFieldNamesFileNodeAndField) {
  const std::string msg = read_error("missing.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 1,
    "maxCPUs": 1, "nodes": [{"id": 4, "supportedOnFpga": 1, "fpgaLatency": 1,
    "isBackwardNode": 0}], "edges": []})");
  EXPECT_NE(msg.find("missing.json: node 4: field 'cpuLatency': missing"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(DnnPartitioningTest, NegativeLatencyIsRejected) {
  const std::string msg = read_error("negative.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 1,
    "maxCPUs": 1, "nodes": [{"id": 4, "supportedOnFpga": 1, "cpuLatency": 1,
    "fpgaLatency": -2, "isBackwardNode": 0}], "edges": []})");
  EXPECT_NE(msg.find("negative.json: node 4: field 'fpgaLatency': must be non-negative"),
            std::string::npos)
      << msg;
}

TEST(DnnPartitioningTest, TooManyDevicesAreRefused) {
  // 5,000 accelerators made a cluster of 25 million links: the import ran for minutes.
  const std::string msg = read_error("many.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 5000,
    "maxCPUs": 0, "nodes": [{"id": 4, "supportedOnFpga": 1, "cpuLatency": 1,
    "fpgaLatency": 2, "isBackwardNode": 0}], "edges": []})");
  EXPECT_NE(msg.find("many.json: field 'maxFPGAs': maxFPGAs + maxCPUs = 5000 devices, more than "
                     "the limit of 1024"),
            std::string::npos)
      << msg;
}

TEST(DnnPartitioningTest, SizeBeyondAByteCountIsRefused) {
  // 1e300 was converted to int64 (undefined) and reported as a negative size.
  const std::string msg = read_error("huge.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 1,
    "maxCPUs": 1, "nodes": [{"id": 4, "supportedOnFpga": 1, "cpuLatency": 1,
    "fpgaLatency": 2, "isBackwardNode": 0, "size": 1e300}], "edges": []})");
  EXPECT_NE(msg.find("huge.json: node 4: field 'size': byte count 1e+300 is too large"),
            std::string::npos)
      << msg;
}

// Sizes that are not whole bytes are rounded up and the cap down, so no split the importer allows
// exceeds the file's cap: three nodes of 0.4 under a cap of 1.0 no longer look like three of 0
// bytes that fit together. A cap below one byte with accelerators is refused (it became 1 byte).
TEST(DnnPartitioningTest, FractionalSizesRoundUpAndTheCapDown) {
  const std::string path = write_temp("frac.json", R"({"maxSizePerFPGA": 2.5, "maxFPGAs": 1,
    "maxCPUs": 1, "nodes": [
    {"id": 1, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 1, "isBackwardNode": 0,
     "size": 0.4},
    {"id": 2, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 1, "isBackwardNode": 0,
     "size": 3}], "edges": []})");
  const LoadedGraph loaded = read_dnn_partitioning_file(path, {});
  EXPECT_EQ(loaded.graph.op(OpId(0)).param_bytes, 1);
  EXPECT_EQ(loaded.graph.op(OpId(1)).param_bytes, 3);
  ASSERT_TRUE(loaded.implied_cluster.has_value());
  EXPECT_EQ(loaded.implied_cluster->device(DeviceId(0)).memory_bytes, 2);
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_NE(loaded.warnings[0].find("1 node sizes and maxSizePerFPGA are not whole bytes: sizes "
                                    "are rounded up and the cap down"),
            std::string::npos)
      << loaded.warnings[0];

  const std::string msg = read_error("cap0.json", R"({"maxSizePerFPGA": 0.5, "maxFPGAs": 1,
    "maxCPUs": 1, "nodes": [{"id": 4, "supportedOnFpga": 1, "cpuLatency": 1,
    "fpgaLatency": 2, "isBackwardNode": 0, "size": 1}], "edges": []})");
  EXPECT_NE(msg.find("cap0.json: field 'maxSizePerFPGA': 0.5 bytes is less than one byte per "
                     "accelerator (set maxFPGAs to 0 for a CPU-only instance)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(read_error("cpu_only.json", R"({"maxSizePerFPGA": 0, "maxFPGAs": 0,
    "maxCPUs": 1, "nodes": [{"id": 4, "supportedOnFpga": 1, "cpuLatency": 1,
    "fpgaLatency": 2, "isBackwardNode": 0, "size": 1}], "edges": []})"),
            "");
}

TEST(DnnPartitioningTest, UnknownNodeInAnEdgeNamesTheEdge) {
  const std::string msg = read_error("unknown.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 1,
    "maxCPUs": 1, "nodes": [{"id": 4, "supportedOnFpga": 1, "cpuLatency": 1,
    "fpgaLatency": 2, "isBackwardNode": 0}],
    "edges": [{"sourceId": 4, "destId": 99, "cost": 0}]})");
  EXPECT_NE(msg.find("unknown.json: edge #0 (4 -> 99): field 'destId': no node with id 99"),
            std::string::npos)
      << msg;
}

TEST(DnnPartitioningTest, TruncatedJsonNamesTheFile) {
  std::string text = kTiny;
  text.resize(text.size() / 2);
  const std::string msg = read_error("truncated.json", text);
  EXPECT_NE(msg.find("truncated.json: truncated JSON"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(DnnPartitioningTest, DisagreeingOutEdgeCostsAreRejected) {
  const std::string msg = read_error("costs.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 1,
    "maxCPUs": 1, "nodes": [
    {"id": 1, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 2, "isBackwardNode": 0},
    {"id": 2, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 2, "isBackwardNode": 0},
    {"id": 3, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 2, "isBackwardNode": 0}],
    "edges": [{"sourceId": 1, "destId": 2, "cost": 1}, {"sourceId": 1, "destId": 3, "cost": 2}]})");
  EXPECT_NE(msg.find("costs.json: edge #1 (1 -> 3): field 'cost': node 1 has out-edges with "
                     "different costs"),
            std::string::npos)
      << msg;
}

TEST(DnnPartitioningTest, DuplicateIdAndWrongTypesAreRejected) {
  EXPECT_NE(read_error("dup.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 1,
    "nodes": [
    {"id": 1, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 2, "isBackwardNode": 0},
    {"id": 1, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 2, "isBackwardNode": 0}],
    "edges": []})")
                .find("dup.json: node 1: field 'id': duplicate node id"),
            std::string::npos);
  EXPECT_NE(read_error("flag.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 1,
    "nodes": [
    {"id": 1, "supportedOnFpga": "yes", "cpuLatency": 1, "fpgaLatency": 2, "isBackwardNode": 0}],
    "edges": []})")
                .find("flag.json: node 1: field 'supportedOnFpga': expected true or false"),
            std::string::npos);
  EXPECT_NE(read_error("nodes.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 1,
    "nodes": {}, "edges": []})")
                .find("nodes.json: field 'nodes': expected an array"),
            std::string::npos);
}

TEST(DnnPartitioningTest, ACycleIsAGraphError) {
  const std::string path = write_temp("cycle.json", R"({"maxSizePerFPGA": 1, "maxFPGAs": 1,
    "maxCPUs": 1, "nodes": [
    {"id": 1, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 2, "isBackwardNode": 0},
    {"id": 2, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 2, "isBackwardNode": 0}],
    "edges": [{"sourceId": 1, "destId": 2, "cost": 1}, {"sourceId": 2, "destId": 1, "cost": 1}]})");
  EXPECT_THROW(read_dnn_partitioning_file(path, {}), GraphError);
}

}  // namespace
}  // namespace dplace
