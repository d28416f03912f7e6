#include <gtest/gtest.h>

#include "dplace/core/error.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

TEST(SingleDevicePlacerTest, SingleGpuPutsEveryOpOnTheFirstGpu) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, "single-gpu");
  for (DeviceId d : run.result.placement.device_of_op) EXPECT_EQ(d, c->device("/gpu:0"));
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 6.0);  // six 1 s ops in a row
  EXPECT_EQ(run.result.evaluations, 1);        // the memory check
  EXPECT_TRUE(run.result.infeasible_reason.empty());
}

TEST(SingleDevicePlacerTest, SingleGpuLeavesACpuOnlyOpOnTheCpu) {
  auto c = cpu_only_case();
  const PlacerRun run = run_placer(*c, "single-gpu");
  EXPECT_EQ(run.result.placement[c->op("load")], c->device("/cpu:0"));
  EXPECT_EQ(run.result.placement[c->op("mm1")], c->device("/gpu:0"));
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9);
}

TEST(SingleDevicePlacerTest, SingleCpuRunsEverythingOnTheCpu) {
  auto c = cpu_only_case();
  const PlacerRun run = run_placer(*c, "single-cpu");
  for (DeviceId d : run.result.placement.device_of_op) EXPECT_EQ(d, c->device("/cpu:0"));
  EXPECT_NEAR(run.sim.step_time_s, 0.5 + 10 + 10 + 1, 1e-9);
}

TEST(SingleDevicePlacerTest, NamedDeviceIsUsed) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, "single:/gpu:1");
  for (DeviceId d : run.result.placement.device_of_op) EXPECT_EQ(d, c->device("/gpu:1"));
}

TEST(SingleDevicePlacerTest, UnknownNamedDeviceIsAConfigError) {
  auto c = two_chains_case();
  try {
    run_placer(*c, "single:/tpu:7");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/tpu:7"), std::string::npos) << e.what();
  }
}

TEST(SingleDevicePlacerTest, SingleCpuWithoutACpuIsAConfigError) {
  auto c = two_chains_case();
  EXPECT_THROW(run_placer(*c, "single-cpu"), ConfigError);
}

TEST(SingleDevicePlacerTest, SingleGpuIsOomWhenTheParamsExceedOneGpu) {
  auto c = memory_tight_case();
  const PlacerRun run = run_placer(*c, "single-gpu");
  EXPECT_FALSE(run.sim.feasible);
  ASSERT_EQ(run.sim.oom_devices.size(), 1u);
  EXPECT_EQ(run.sim.oom_devices[0].device, c->device("/gpu:0"));
  EXPECT_EQ(run.result.infeasible_reason,
            "every op on /gpu:0 does not fit in memory: /gpu:0 needs 19.00 GB of 10.50 GB");
}

TEST(ExpertPlacerTest, ReturnsTheGivenPlacement) {
  auto c = two_chains_case();
  Placement expert = single_device_placement(c->graph(), c->device("/gpu:1"));
  expert.device_of_op[c->op("a0").value()] = c->device("/gpu:0");
  const PlacerRun run = run_placer(*c, "expert", {.expert = expert});
  EXPECT_EQ(run.result.placement, expert);
}

TEST(ExpertPlacerTest, WithoutAPlacementIsAConfigError) {
  auto c = two_chains_case();
  try {
    run_placer(*c, "expert");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--placement"), std::string::npos) << e.what();
  }
}

TEST(PlacerRegistryTest, ListsEveryClassicPlacer) {
  std::vector<std::string> names;
  for (const PlacerInfo& p : list_placers()) names.push_back(p.name);
  for (const char* want : {"single-cpu", "single-gpu", "expert", "round-robin", "scotch", "mincut",
                           "metis", "heft", "m-topo", "m-etf", "m-sct", "anneal"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
}

// Two GPUs with no link between them: every placer either is refused with a ConfigError naming
// the pair, or returns a placement that needs no link; none crashes.
TEST(PlacerRegistryTest, UnlinkedDevicesAreRefusedOrAvoided) {
  auto c = two_unlinked_chains_case();
  for (const PlacerInfo& p : list_placers()) {
    if (p.name == "expert") continue;  // needs a placement: below
    SCOPED_TRACE(p.name);
    try {
      const PlacerRun run = run_placer(*c, p.name, {.budget_seconds = 5});
      EXPECT_TRUE(
          placement_problem(c->graph(), c->cluster(), c->costs(), run.result.placement).empty())
          << describe(*c, run.result.placement);
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("link"), std::string::npos) << e.what();
    }
  }
  // Refused before running:
  try {
    run_placer(*c, "heft");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "placer 'heft': cluster 'two-unlinked-gpus' has no link '/gpu:0' -> '/gpu:1' (no "
              "links entry and no default_link), and this placer needs every pair of devices "
              "linked; add the link or a default_link, or use anneal, expert or a single-device "
              "placer");
  }
  // anneal rejects moves across the pair, and still finds the optimum: one chain per GPU.
  const PlacerRun anneal = run_placer(*c, "anneal");
  EXPECT_DOUBLE_EQ(anneal.sim.step_time_s, 3.0) << describe(*c, anneal.result.placement);
  EXPECT_DOUBLE_EQ(run_placer(*c, "single-gpu").sim.step_time_s, 6.0);
  // A given placement that splits a chain across the pair is the cluster's problem, not a bug.
  Placement split = single_device_placement(c->graph(), c->device("/gpu:1"));
  split.device_of_op[c->op("a0").value()] = c->device("/gpu:0");
  try {
    run_placer(*c, "expert", {.expert = split});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "placer 'expert': its placement needs a link cluster 'two-unlinked-gpus' lacks: "
              "tensor 'a0:0' must move '/gpu:0' -> '/gpu:1' but there is no link");
  }
}

// A graph of one op leaves nothing to partition; every placer that chooses still puts it on the
// faster device (metis used to leave it on the first device listed, the CPU).
TEST(PlacerRegistryTest, EveryChoosingPlacerPutsALoneOpOnTheFasterDevice) {
  auto c = lone_op_case();
  for (const PlacerInfo& p : list_placers()) {
    if (p.name == "expert" || p.name == "single-cpu") continue;
    SCOPED_TRACE(p.name);
    const PlacerRun run = run_placer(*c, p.name, {.budget_seconds = 5});
    EXPECT_DOUBLE_EQ(run.sim.step_time_s, c->optimum_s()) << describe(*c, run.result.placement);
  }
}

TEST(PlacerRegistryTest, UnknownNameIsAConfigErrorListingTheKnownOnes) {
  try {
    make_placer("simulated-anealing");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("anneal"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dplace::testing
