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
