#include "dplace/cluster/presets.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dplace/cluster/cluster_json.h"
#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"

namespace dplace {
namespace {

int count_kind(const Cluster& c, DeviceKind kind) {
  return static_cast<int>(c.devices_of_kind(kind).size());
}

DeviceId dev(const Cluster& c, const std::string& name) {
  auto id = c.find_device(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(DeviceId(0));
}

double bandwidth(const Cluster& c, const std::string& a, const std::string& b) {
  const Link* l = c.link(dev(c, a), dev(c, b));
  return l ? l->bandwidth_bytes_per_s : 0.0;
}

std::string gpu(int i) { return "/gpu:" + std::to_string(i); }

TEST(PresetsTest, NamesAreTheSixDocumentedPresetsSorted) {
  const std::vector<std::string> expected = {"cpu+igpu",      "cpu-only",    "dgx1-v100x8",
                                             "h100x8-nvlink", "paper-k80x2", "paper-k80x4"};
  EXPECT_EQ(preset_names(), expected);
}

TEST(PresetsTest, EveryPresetLoadsCitesSourcesAndDescribesDevices) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    const Cluster c = load_preset(name);
    EXPECT_EQ(c.name(), name);
    EXPECT_GT(c.source().size(), 40u);
    for (const Device& d : c.devices()) {
      EXPECT_FALSE(d.description.empty()) << d.name;
      EXPECT_GT(d.op_overhead_s, 0) << d.name;
      EXPECT_LT(d.op_overhead_s, 1e-4) << d.name;
      // Every device has a default efficiency, and GEMMs beat it.
      EXPECT_LT(d.efficiency_for("NoSuchType"), 1.0) << d.name;
      EXPECT_GT(d.efficiency_for("MatMul"), d.efficiency_for("NoSuchType")) << d.name;
    }
    // Every pair of devices can exchange tensors.
    for (size_t a = 0; a < c.num_devices(); ++a) {
      for (size_t b = 0; b < c.num_devices(); ++b) {
        if (a != b) {
          EXPECT_NE(c.link(DeviceId::from_index(a), DeviceId::from_index(b)), nullptr) << a << b;
        }
      }
    }
  }
}

TEST(PresetsTest, PaperK80x2IsOneHaswellAndTwoK80Dies) {
  const Cluster c = load_preset("paper-k80x2");
  EXPECT_EQ(count_kind(c, DeviceKind::kCpu), 1);
  EXPECT_EQ(count_kind(c, DeviceKind::kGpu), 2);
  const Device& cpu = c.device(dev(c, "/cpu:0"));
  EXPECT_DOUBLE_EQ(cpu.peak_flops, 18 * 2.3e9 * 32);  // 18 cores, AVX2 FMA x2
  EXPECT_DOUBLE_EQ(cpu.mem_bandwidth_bytes_per_s, 68e9);
  for (int i = 0; i < 2; ++i) {
    const Device& g = c.device(dev(c, gpu(i)));
    EXPECT_EQ(g.memory_bytes, 12000000000);            // 12 GB GDDR5 per die
    EXPECT_DOUBLE_EQ(g.peak_flops, 2496 * 2 * 875e6);  // per die, boost clock
    EXPECT_DOUBLE_EQ(g.mem_bandwidth_bytes_per_s, 240e9);
    EXPECT_DOUBLE_EQ(bandwidth(c, "/cpu:0", gpu(i)), 12e9);  // PCIe 3.0 x16 effective
    EXPECT_DOUBLE_EQ(bandwidth(c, gpu(i), "/cpu:0"), 12e9);
  }
  EXPECT_DOUBLE_EQ(bandwidth(c, "/gpu:0", "/gpu:1"), 10e9);
}

TEST(PresetsTest, PaperK80x4HasTwoBoardsWithFasterOnBoardPeers) {
  const Cluster c = load_preset("paper-k80x4");
  EXPECT_EQ(count_kind(c, DeviceKind::kCpu), 1);
  EXPECT_EQ(count_kind(c, DeviceKind::kGpu), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.device(dev(c, gpu(i))).memory_bytes, 12000000000);
  EXPECT_DOUBLE_EQ(bandwidth(c, "/gpu:0", "/gpu:1"), 10e9);
  EXPECT_DOUBLE_EQ(bandwidth(c, "/gpu:3", "/gpu:2"), 10e9);
  for (int a : {0, 1}) {
    for (int b : {2, 3}) {
      EXPECT_DOUBLE_EQ(bandwidth(c, gpu(a), gpu(b)), 8e9);
      EXPECT_DOUBLE_EQ(bandwidth(c, gpu(b), gpu(a)), 8e9);
    }
  }
  // Same devices as the two-die preset apart from the second board.
  const Cluster two = load_preset("paper-k80x2");
  EXPECT_EQ(c.device(dev(c, "/cpu:0")).peak_flops, two.device(dev(two, "/cpu:0")).peak_flops);
  EXPECT_EQ(c.device(dev(c, "/gpu:3")).peak_flops, two.device(dev(two, "/gpu:0")).peak_flops);
}

TEST(PresetsTest, CpuOnlyIsOneDevice) {
  const Cluster c = load_preset("cpu-only");
  ASSERT_EQ(c.num_devices(), 1u);
  EXPECT_EQ(c.device(DeviceId(0)).kind, DeviceKind::kCpu);
}

TEST(PresetsTest, Dgx1HasTheHybridCubeMeshNvlinkPairs) {
  const Cluster c = load_preset("dgx1-v100x8");
  EXPECT_EQ(count_kind(c, DeviceKind::kCpu), 1);
  EXPECT_EQ(count_kind(c, DeviceKind::kGpu), 8);
  const std::vector<std::pair<int, int>> one_link = {{0, 1}, {0, 2}, {1, 3}, {2, 6},
                                                     {3, 7}, {4, 5}, {4, 6}, {5, 7}};
  const std::vector<std::pair<int, int>> two_links = {{0, 3}, {0, 4}, {1, 2}, {1, 5},
                                                      {2, 3}, {4, 7}, {5, 6}, {6, 7}};
  std::set<std::pair<int, int>> nvlink;
  for (auto [a, b] : one_link) {
    EXPECT_DOUBLE_EQ(bandwidth(c, gpu(a), gpu(b)), 25e9);
    EXPECT_DOUBLE_EQ(bandwidth(c, gpu(b), gpu(a)), 25e9);
    nvlink.insert({a, b});
  }
  for (auto [a, b] : two_links) {
    EXPECT_DOUBLE_EQ(bandwidth(c, gpu(a), gpu(b)), 50e9);
    nvlink.insert({a, b});
  }
  // Each V100 has six NVLinks of 25 GB/s per direction, all in use.
  for (int g = 0; g < 8; ++g) {
    double total = 0;
    for (int h = 0; h < 8; ++h) {
      if (h != g && nvlink.count({std::min(g, h), std::max(g, h)})) {
        total += bandwidth(c, gpu(g), gpu(h));
      }
    }
    EXPECT_DOUBLE_EQ(total, 6 * 25e9) << g;
  }
  // The other 12 pairs cross sockets and use the slower default link.
  int others = 0;
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      if (nvlink.count({a, b})) continue;
      ++others;
      EXPECT_DOUBLE_EQ(bandwidth(c, gpu(a), gpu(b)), 8e9) << a << b;
    }
  }
  EXPECT_EQ(others, 12);
  EXPECT_EQ(c.device(dev(c, "/gpu:5")).memory_bytes, 16000000000);
}

TEST(PresetsTest, H100x8IsAllToAllOverNvSwitch) {
  const Cluster c = load_preset("h100x8-nvlink");
  EXPECT_EQ(count_kind(c, DeviceKind::kCpu), 1);
  EXPECT_EQ(count_kind(c, DeviceKind::kGpu), 8);
  for (int a = 0; a < 8; ++a) {
    EXPECT_EQ(c.device(dev(c, gpu(a))).memory_bytes, 80000000000);
    EXPECT_DOUBLE_EQ(c.device(dev(c, gpu(a))).mem_bandwidth_bytes_per_s, 3.35e12);
    for (int b = 0; b < 8; ++b) {
      if (a != b) {
        EXPECT_DOUBLE_EQ(bandwidth(c, gpu(a), gpu(b)), 450e9);
      }
    }
    EXPECT_LT(bandwidth(c, "/cpu:0", gpu(a)), 450e9);
  }
}

TEST(PresetsTest, CpuPlusIgpuLoadsDespiteThePlusInItsName) {
  const Cluster c = load_cluster("cpu+igpu");
  EXPECT_EQ(c.name(), "cpu+igpu");
  EXPECT_EQ(count_kind(c, DeviceKind::kCpu), 1);
  EXPECT_EQ(count_kind(c, DeviceKind::kGpu), 1);
  // The iGPU shares the CPU's DRAM.
  EXPECT_EQ(c.device(DeviceId(0)).mem_bandwidth_bytes_per_s,
            c.device(DeviceId(1)).mem_bandwidth_bytes_per_s);
  EXPECT_GT(c.device(DeviceId(1)).peak_flops, c.device(DeviceId(0)).peak_flops);
}

TEST(PresetsTest, UnknownPresetListsTheKnownOnes) {
  try {
    load_cluster("k80");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("cluster 'k80': not a preset (presets: cpu+igpu, cpu-only, ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
}

TEST(PresetsTest, LoadClusterReadsJsonFilesAndWriterRoundTripsPresets) {
  const std::filesystem::path dir = scratch_dir();
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    const Cluster c = load_preset(name);
    const std::string path = (dir / (name + ".json")).string();
    {
      std::ofstream out(path);
      out << cluster_to_json(c).dump(2);
    }
    const Cluster back = load_cluster(path);
    EXPECT_EQ(back.name(), name);
    EXPECT_EQ(back.source(), c.source());
    ASSERT_EQ(back.num_devices(), c.num_devices());
    for (size_t a = 0; a < c.num_devices(); ++a) {
      EXPECT_EQ(back.device(DeviceId::from_index(a)).peak_flops,
                c.device(DeviceId::from_index(a)).peak_flops);
      for (size_t b = 0; b < c.num_devices(); ++b) {
        if (a == b) continue;
        EXPECT_EQ(*back.link(DeviceId::from_index(a), DeviceId::from_index(b)),
                  *c.link(DeviceId::from_index(a), DeviceId::from_index(b)));
      }
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dplace
