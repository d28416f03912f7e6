// The built-in models on the 2017 paper's machine (paper-k80x4: one CPU and four 12 GB K80
// dies), simulated: which placements fit in memory. See docs/models.md for the figures.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dplace/cluster/presets.h"
#include "dplace/cost/cost_model.h"
#include "dplace/models/registry.h"
#include "dplace/sim/placement.h"
#include "dplace/sim/simulator.h"

namespace dplace {
namespace {

struct Outcome {
  SimResult result;
  std::string problem;  // placement_problem; empty when valid
};

Outcome simulate(const Graph& graph, const Cluster& cluster, const Placement& placement) {
  const CostTable costs(graph, cluster);
  Outcome out;
  out.problem = placement_problem(graph, cluster, costs, placement);
  if (!out.problem.empty()) return out;
  const Simulator sim(graph, cluster, costs);
  out.result = sim.run(placement);
  return out;
}

Outcome on_one_gpu(const std::string& name, const ModelOptions& options = {}) {
  const Cluster cluster = load_preset("paper-k80x4");
  const Graph g = find_model(name)->build(options);
  return simulate(g, cluster, single_device_placement(g, *cluster.find_device("/gpu:0")));
}

int64_t peak_bytes(const SimResult& r) {
  int64_t peak = 0;
  for (const DeviceStats& d : r.devices) peak = std::max(peak, d.peak_memory_bytes);
  return peak;
}

constexpr int64_t kK80DieBytes = 12'000'000'000;

TEST(ModelsSimTest, RnnlmFitsOnOneK80Die) {
  const Outcome o = on_one_gpu("rnnlm");
  ASSERT_EQ(o.problem, "");
  EXPECT_TRUE(o.result.feasible);
  // Weights + Adam slots alone are 1.3 GB; activations and gradients add several more.
  EXPECT_GT(peak_bytes(o.result), 3'000'000'000);
}

TEST(ModelsSimTest, InceptionV3FitsOnOneK80Die) {
  const Outcome o = on_one_gpu("inception_v3");
  ASSERT_EQ(o.problem, "");
  EXPECT_TRUE(o.result.feasible);
  EXPECT_GT(peak_bytes(o.result), 2'000'000'000);  // batch 32 of 299x299 activations
}

TEST(ModelsSimTest, NmtNeedsMostOfOneK80Die) {
  // At the default sizes the single-GPU NMT peaks at about 80% of a die in our exact memory
  // accounting (the 2017 paper reports OOM; docs/models.md discusses the gap).
  const Outcome o = on_one_gpu("nmt");
  ASSERT_EQ(o.problem, "");
  EXPECT_GT(peak_bytes(o.result), kK80DieBytes * 3 / 4);
}

TEST(ModelsSimTest, NmtOverflowsOneK80DieWithAWordLevelVocabulary) {
  // The per-step softmax gradients grow with the target vocabulary: with Sutskever et al.'s
  // 80k-word target vocabulary one die is out of memory.
  const Outcome o = on_one_gpu("nmt", {.vocab = 80000});
  ASSERT_EQ(o.problem, "");
  EXPECT_FALSE(o.result.feasible);
  ASSERT_EQ(o.result.oom_devices.size(), 1u);
  EXPECT_EQ(o.result.oom_devices[0].capacity_bytes, kK80DieBytes);
  EXPECT_GT(o.result.oom_devices[0].overflow_bytes, 0);
}

TEST(ModelsSimTest, EveryExpertPlacementIsValidAndFitsOnFourK80Dies) {
  const Cluster cluster = load_preset("paper-k80x4");
  for (const ModelEntry& e : model_registry()) {
    if (!e.expert) continue;
    const Graph g = e.build({});
    const Outcome o = simulate(g, cluster, e.expert(g, cluster));
    ASSERT_EQ(o.problem, "") << e.name;
    EXPECT_TRUE(o.result.feasible) << e.name;
    // The expert spreads the model: at least two GPUs hold parameters.
    int gpus_used = 0;
    for (DeviceId d : cluster.devices_of_kind(DeviceKind::kGpu)) {
      if (o.result.devices[d.value()].param_bytes > 0) ++gpus_used;
    }
    EXPECT_GE(gpus_used, 2) << e.name;
  }
}

TEST(ModelsSimTest, RnnExpertsBeatOneGpu) {
  const Cluster cluster = load_preset("paper-k80x4");
  for (const char* name : {"rnnlm", "nmt", "gnmt4"}) {
    const ModelEntry& e = *find_model(name);
    const Graph g = e.build({});
    const Outcome expert = simulate(g, cluster, e.expert(g, cluster));
    const Outcome single =
        simulate(g, cluster, single_device_placement(g, *cluster.find_device("/gpu:0")));
    EXPECT_LT(expert.result.step_time_s, single.result.step_time_s) << name;
  }
}

}  // namespace
}  // namespace dplace
