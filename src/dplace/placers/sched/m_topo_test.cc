#include <gtest/gtest.h>

#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

TEST(MTopoPlacerTest, FillsTheFirstGpuToItsMemoryShareInTopologicalOrder) {
  auto c = two_chains_case();
  // Groups hold 1 GB each (their output): share = 6 GB / 2 + 1 GB = 4 GB, so a0 a1 a2 b0 fill
  // /gpu:0 and b1 b2 go to /gpu:1. /gpu:0 runs a0, b0 (ready first), a1, a2; b1 waits for b0's
  // tensor (1 s) and runs 3-4 s, b2 4-5 s.
  const PlacerRun run = run_placer(*c, "m-topo");
  EXPECT_EQ(describe(*c, run.result.placement),
            "a0=/gpu:0 a1=/gpu:0 a2=/gpu:0 b0=/gpu:0 b1=/gpu:1 b2=/gpu:1");
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 5.0);
}

TEST(MTopoPlacerTest, MovesOnWhenTheNextOpDoesNotFitAndBackfillsTheRoom) {
  auto c = memory_tight_case();
  const PlacerRun run = run_placer(*c, "m-topo");
  // A (8 GB) on /gpu:0; B (6 GB) does not fit beside it: /gpu:1 with C; D no longer fits on
  // /gpu:1 (11 GB) and goes to the device with room.
  EXPECT_EQ(describe(*c, run.result.placement), "A=/gpu:0 B=/gpu:1 C=/gpu:1 D=/gpu:0");
  EXPECT_TRUE(run.sim.feasible);
}

TEST(MTopoPlacerTest, NamesTheCpuItWasNotOfferedWhenTheGpuOverflows) {
  auto c = oversubscribed_gpu_with_cpu_case();
  // Baechi's setting offers the accelerators only: B fits on no GPU and the reason says that the
  // CPU, where everything fits, was left out and how to offer it.
  const PlacerRun gpus_only = run_placer(*c, "m-topo");
  EXPECT_FALSE(gpus_only.sim.feasible);
  EXPECT_NE(gpus_only.result.infeasible_reason.find(
                "(not offered: /cpu:0; --param devices=all offers every device)"),
            std::string::npos)
      << gpus_only.result.infeasible_reason;
  const PlacerRun all = run_placer(*c, "m-topo", {.params = {{"devices", "all"}}});
  EXPECT_TRUE(all.sim.feasible) << all.result.infeasible_reason;
}

TEST(MTopoPlacerTest, BalancesMemoryNotTimeSoTheColocatedPairTakesTheLightOp) {
  auto c = colocation_case();
  // Everything is tiny, so all of it fits in /gpu:0's share: a, b, c on one GPU, 6 s.
  const PlacerRun run = run_placer(*c, "m-topo");
  EXPECT_EQ(describe(*c, run.result.placement), "a=/gpu:0 b=/gpu:0 c=/gpu:0");
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 6.0);
}

TEST(MTopoPlacerTest, KeepsTheCpuOnlyOpOnTheCpu) {
  auto c = cpu_only_case();
  const PlacerRun run = run_placer(*c, "m-topo");
  EXPECT_EQ(describe(*c, run.result.placement), "load=/cpu:0 mm1=/gpu:0 mm2=/gpu:0 loss=/gpu:0");
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9);
}

TEST(MTopoPlacerTest, ADeviceARestrictedOpMayNotUseStaysTheCurrentOne) {
  // o0-o2 fill /gpu:0's 30 GB share. o3 may not use /gpu:1, so it goes on to /gpu:2, but /gpu:1
  // stays the current device: o4 and o5 fill it instead of joining o3.
  auto c = restricted_fill_case();
  const PlacerRun run = run_placer(*c, "m-topo");
  EXPECT_EQ(describe(*c, run.result.placement),
            "o0=/gpu:0 o1=/gpu:0 o2=/gpu:0 o3=/gpu:2 o4=/gpu:1 o5=/gpu:1");
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 3.0);
}

}  // namespace
}  // namespace dplace::testing
