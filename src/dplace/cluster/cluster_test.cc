#include "dplace/cluster/cluster.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dplace/cluster/cluster_json.h"
#include "dplace/core/error.h"

namespace dplace {
namespace {

const std::string kMalformed = std::string(DPLACE_TEST_DATA_DIR) + "/malformed/cluster/";

Cluster parse(const std::string& text) {
  return parse_cluster_json(parse_json_text(text, "c.json"), "c.json");
}

constexpr const char* kTwoDevices = R"({
  "format": "dplace.cluster/1", "name": "two", "source": ["sheet A", "sheet B"],
  "devices": [
    { "name": "/cpu:0", "kind": "cpu", "peak_flops": 1e12, "mem_bandwidth_bytes_per_s": 5e10,
      "memory_bytes": 5e10, "op_overhead_s": 5e-6, "efficiency": { "default": 0.3 },
      "description": "a CPU" },
    { "name": "/gpu:0", "kind": "gpu", "peak_flops": 4e12, "mem_bandwidth_bytes_per_s": 2.4e11,
      "memory_bytes": 12000000000, "efficiency": { "default": 0.5, "MatMul": 0.7 } } ],
  "links": [ { "from": "/cpu:0", "to": "/gpu:0", "bandwidth_bytes_per_s": 1.2e10,
               "latency_s": 1e-5 } ] })";

// Three GPUs: a->b has its own link (one direction), every other pair the default link.
constexpr const char* kDirectedLinkAndDefault = R"({ "format": "dplace.cluster/1", "name": "d",
    "devices": [
      { "name": "a", "kind": "gpu", "peak_flops": 1, "mem_bandwidth_bytes_per_s": 1, "memory_bytes": 1 },
      { "name": "b", "kind": "gpu", "peak_flops": 1, "mem_bandwidth_bytes_per_s": 1, "memory_bytes": 1 },
      { "name": "c", "kind": "gpu", "peak_flops": 1, "mem_bandwidth_bytes_per_s": 1, "memory_bytes": 1 } ],
    "links": [ { "from": "a", "to": "b", "bandwidth_bytes_per_s": 100, "latency_s": 1, "directed": true } ],
    "default_link": { "bandwidth_bytes_per_s": 7, "latency_s": 2 } })";

TEST(ClusterJsonTest, ReadsDevicesAndFigures) {
  const Cluster c = parse(kTwoDevices);
  EXPECT_EQ(c.name(), "two");
  EXPECT_EQ(c.source(), "sheet A; sheet B");
  ASSERT_EQ(c.num_devices(), 2u);
  const Device& cpu = c.device(DeviceId(0));
  EXPECT_EQ(cpu.name, "/cpu:0");
  EXPECT_EQ(cpu.kind, DeviceKind::kCpu);
  EXPECT_DOUBLE_EQ(cpu.peak_flops, 1e12);
  EXPECT_DOUBLE_EQ(cpu.mem_bandwidth_bytes_per_s, 5e10);
  EXPECT_EQ(cpu.memory_bytes, 50000000000);
  EXPECT_DOUBLE_EQ(cpu.op_overhead_s, 5e-6);
  EXPECT_EQ(cpu.description, "a CPU");
  const Device& gpu = c.device(DeviceId(1));
  EXPECT_EQ(gpu.kind, DeviceKind::kGpu);
  EXPECT_EQ(gpu.memory_bytes, 12000000000);
  EXPECT_DOUBLE_EQ(gpu.op_overhead_s, 0.0);  // absent: 0
}

TEST(ClusterJsonTest, EfficiencyFallsBackToDefaultThenOne) {
  const Cluster c = parse(kTwoDevices);
  const Device& gpu = c.device(DeviceId(1));
  EXPECT_DOUBLE_EQ(gpu.efficiency_for("MatMul"), 0.7);
  EXPECT_DOUBLE_EQ(gpu.efficiency_for("Relu"), 0.5);
  Device bare;
  EXPECT_DOUBLE_EQ(bare.efficiency_for("MatMul"), 1.0);
}

TEST(ClusterJsonTest, UndirectedLinkServesBothDirections) {
  const Cluster c = parse(kTwoDevices);
  const Link* up = c.link(DeviceId(0), DeviceId(1));
  const Link* down = c.link(DeviceId(1), DeviceId(0));
  ASSERT_NE(up, nullptr);
  ASSERT_NE(down, nullptr);
  EXPECT_DOUBLE_EQ(up->bandwidth_bytes_per_s, 1.2e10);
  EXPECT_DOUBLE_EQ(down->latency_s, 1e-5);
}

TEST(ClusterJsonTest, DirectedLinkServesOneDirectionAndDefaultLinkTheRest) {
  const Cluster c = parse(kDirectedLinkAndDefault);
  EXPECT_DOUBLE_EQ(c.link(DeviceId(0), DeviceId(1))->bandwidth_bytes_per_s, 100);
  EXPECT_DOUBLE_EQ(c.link(DeviceId(1), DeviceId(0))->bandwidth_bytes_per_s, 7);
  EXPECT_DOUBLE_EQ(c.link(DeviceId(2), DeviceId(0))->latency_s, 2);
}

TEST(ClusterJsonTest, PairWithoutEntryOrDefaultHasNoLink) {
  const Cluster c = parse(R"({ "format": "dplace.cluster/1", "name": "d",
    "devices": [
      { "name": "a", "kind": "cpu", "peak_flops": 1, "mem_bandwidth_bytes_per_s": 1, "memory_bytes": 1 },
      { "name": "b", "kind": "gpu", "peak_flops": 1, "mem_bandwidth_bytes_per_s": 1, "memory_bytes": 1 } ] })");
  EXPECT_EQ(c.link(DeviceId(0), DeviceId(1)), nullptr);
  EXPECT_EQ(c.link(DeviceId(1), DeviceId(0)), nullptr);
  EXPECT_EQ(c.mean_link_cost().links, 0);
  EXPECT_EQ(c.mean_link_cost().transfer_s(1000), 0.0);
}

TEST(ClusterTest, MeanLinkCostAveragesLatencyAndInverseBandwidthOverDirectedLinks) {
  // a->b: 100 B/s, 1 s; the other five directed pairs take the default link, 7 B/s, 2 s.
  const Cluster c = parse(kDirectedLinkAndDefault);
  const MeanLinkCost mean = c.mean_link_cost();
  EXPECT_EQ(mean.links, 6);
  EXPECT_DOUBLE_EQ(mean.latency_s, (1.0 + 5 * 2.0) / 6);
  EXPECT_DOUBLE_EQ(mean.seconds_per_byte, (1.0 / 100 + 5.0 / 7) / 6);
  EXPECT_DOUBLE_EQ(mean.transfer_s(600), 11.0 / 6 + 600 * (1.0 / 100 + 5.0 / 7) / 6);
}

TEST(ClusterJsonTest, NameDefaultsToFileStem) {
  const Cluster c =
      parse_cluster_json(parse_json_text(R"({ "format": "dplace.cluster/1", "devices": [
        { "name": "a", "kind": "cpu", "peak_flops": 1, "mem_bandwidth_bytes_per_s": 1,
          "memory_bytes": 1 } ] })",
                                         "dir/my-box.json"),
                         "dir/my-box.json");
  EXPECT_EQ(c.name(), "my-box");
}

TEST(ClusterJsonTest, FindsDevicesByNameAndKind) {
  const Cluster c = parse(kTwoDevices);
  EXPECT_EQ(c.find_device("/gpu:0"), DeviceId(1));
  EXPECT_FALSE(c.find_device("/gpu:1").has_value());
  ASSERT_EQ(c.devices_of_kind(DeviceKind::kGpu).size(), 1u);
  EXPECT_TRUE(c.devices_of_kind(DeviceKind::kAccel).empty());
}

TEST(ClusterJsonTest, WriterRoundTrips) {
  const Cluster c = parse(kTwoDevices);
  const Json doc = cluster_to_json(c);
  EXPECT_EQ(doc.at("format"), "dplace.cluster/1");
  const Cluster back = parse_cluster_json(doc, "round-trip");
  EXPECT_EQ(back.name(), c.name());
  EXPECT_EQ(back.source(), c.source());
  ASSERT_EQ(back.num_devices(), c.num_devices());
  for (size_t i = 0; i < c.num_devices(); ++i) {
    const Device& a = c.device(DeviceId::from_index(i));
    const Device& b = back.device(DeviceId::from_index(i));
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.peak_flops, b.peak_flops);
    EXPECT_EQ(a.mem_bandwidth_bytes_per_s, b.mem_bandwidth_bytes_per_s);
    EXPECT_EQ(a.memory_bytes, b.memory_bytes);
    EXPECT_EQ(a.op_overhead_s, b.op_overhead_s);
    EXPECT_EQ(a.efficiency, b.efficiency);
    EXPECT_EQ(a.description, b.description);
    for (size_t j = 0; j < c.num_devices(); ++j) {
      if (i == j) continue;
      const Link* la = c.link(DeviceId::from_index(i), DeviceId::from_index(j));
      const Link* lb = back.link(DeviceId::from_index(i), DeviceId::from_index(j));
      ASSERT_EQ(la == nullptr, lb == nullptr);
      if (la) {
        EXPECT_EQ(*la, *lb);
      }
    }
  }
}

// --- Malformed inputs: one-line messages that start with the file and name the field. ---

struct MalformedCase {
  const char* file;
  // The message after "<path>: "; a trailing '*' means "starts with".
  const char* rest;
};

std::string error_of(const std::string& path) {
  try {
    read_cluster_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ClusterJsonTest, MalformedFilesGiveOneLineMessages) {
  const std::vector<MalformedCase> cases = {
      {"no_devices.json", "field 'devices': cluster has no devices"},
      {"missing_devices.json", "field 'devices': missing (a cluster needs at least one device)"},
      {"link_unknown_device.json", "link '/cpu:0' -> '/gpu:9': unknown device '/gpu:9'"},
      {"zero_bandwidth.json",
       "link '/cpu:0' -> '/gpu:0': field 'bandwidth_bytes_per_s': must be positive, got 0"},
      {"negative_latency.json",
       "link '/cpu:0' -> '/gpu:0': field 'latency_s': must be non-negative, got -1e-05"},
      {"self_link.json", "link '/gpu:0' -> '/gpu:0': joins a device to itself"},
      // An undirected link sets both directions; a later entry used to replace one silently.
      {"duplicate_link.json",
       "link '/gpu:0' -> '/cpu:0': the direction '/gpu:0' -> '/cpu:0' is already given by an "
       "earlier links entry"},
      {"control_character_device.json",
       "device '/gpu:0\\x09': the name contains a control character (a line break, tab or "
       "other)"},
      {"empty_name.json",
       "field 'name': must not be empty (leave it out to name the cluster after the file)"},
      {"zero_default_link.json",
       "default_link: field 'bandwidth_bytes_per_s': must be positive, got -5"},
      {"negative_peak_flops.json",
       "device '/gpu:0': field 'peak_flops': must be positive, got -4000000000000"},
      {"tiny_bandwidth.json",
       "device '/gpu:0': field 'mem_bandwidth_bytes_per_s': 1e-300 is outside the supported "
       "range [1, 1e+21]"},
      {"huge_latency.json",
       "default_link: field 'latency_s': 1e+300 is outside the supported range [0, 1000]"},
      {"negative_memory.json",
       "device '/gpu:0': field 'memory_bytes': must be non-negative, got -1"},
      {"bad_kind.json",
       "device '/tpu:0': field 'kind': unknown device kind 'tpu' (known: cpu, gpu, accel)"},
      {"duplicate_device.json", "device '/gpu:0': duplicate device name"},
      {"efficiency_out_of_range.json",
       "device '/gpu:0': field 'efficiency.MatMul': must be in (0, 1], got 1.5"},
      {"unknown_field.json",
       "device '/cpu:0': field 'op_overhead': unknown field (known: name, kind, peak_flops, "
       "mem_bandwidth_bytes_per_s, memory_bytes, op_overhead_s, efficiency, description)"},
      {"missing_peak_flops.json", "device '/cpu:0': field 'peak_flops': missing"},
      {"wrong_format.json",
       "field 'format': expected \"dplace.cluster/1\", got \"dplace.graph/1\""},
      {"not_object.json", "expected a JSON object"},
      {"truncated.json", "truncated JSON at byte*"},
      {"empty.json", "file is empty"},
      {"does_not_exist.json", "cannot open file"},
  };
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = kMalformed + c.file;
    const std::string message = error_of(path);
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    std::string expected = path + ": " + c.rest;
    if (expected.back() == '*') {
      expected.pop_back();
      EXPECT_EQ(message.substr(0, expected.size()), expected);
    } else {
      EXPECT_EQ(message, expected);
    }
  }
}

TEST(ClusterJsonTest, MoreDevicesThanTheLimitAreRefused) {
  std::string devices;
  for (size_t i = 0; i <= kMaxDevices; ++i) {
    devices += fmt::format(R"({}{{"name": "/gpu:{}", "kind": "gpu", "peak_flops": 1e12,
        "mem_bandwidth_bytes_per_s": 1e11, "memory_bytes": 1e10}})",
                           i == 0 ? "" : ",", i);
  }
  const std::string text = R"({"format": "dplace.cluster/1", "devices": [)" + devices + "]}";
  try {
    parse(text);
    ADD_FAILURE() << "1,025 devices were accepted";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "c.json: field 'devices': 1025 devices, more than the limit of 1024");
  }
}

TEST(ClusterJsonTest, SemanticErrorsAreConfigErrorsAndSyntaxErrorsFormatErrors) {
  EXPECT_THROW(read_cluster_file(kMalformed + "no_devices.json"), ConfigError);
  EXPECT_THROW(read_cluster_file(kMalformed + "link_unknown_device.json"), ConfigError);
  EXPECT_THROW(read_cluster_file(kMalformed + "truncated.json"), FormatError);
  EXPECT_THROW(read_cluster_file(kMalformed + "bad_kind.json"), FormatError);
}

}  // namespace
}  // namespace dplace
