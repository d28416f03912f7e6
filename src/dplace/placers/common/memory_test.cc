#include "dplace/placers/common/memory.h"

#include <gtest/gtest.h>

#include "dplace/placers/common/list_schedule.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

PlaceRequest request_for(const PlacerCase& c) {
  PlaceRequest r;
  r.graph = &c.graph();
  r.cluster = &c.cluster();
  r.costs = &c.costs();
  r.simulator = &c.simulator();
  return r;
}

std::vector<DeviceId> by_name(const PlacerCase& c, std::vector<const char*> devices) {
  std::vector<DeviceId> out(c.graph().num_groups());
  for (size_t i = 0; i < devices.size(); ++i) {
    out[c.graph().group_of(OpId::from_index(i)).value()] = c.device(devices[i]);
  }
  return out;
}

TEST(MemoryAmountTest, UsesTheLargestDecimalUnitReached) {
  EXPECT_EQ(memory_amount(12'150'000'000), "12.15 GB");
  EXPECT_EQ(memory_amount(6'000'000), "6.00 MB");
  EXPECT_EQ(memory_amount(4'200), "4.20 kB");
  EXPECT_EQ(memory_amount(512), "512 B");
}

TEST(RepairMemoryTest, KeepsAPlacementThatFits) {
  auto c = memory_tight_case();
  const GroupGraph groups(c->graph(), c->cluster(), c->costs());
  const auto fits = by_name(*c, {"/gpu:1", "/gpu:0", "/gpu:0", "/gpu:1"});
  const MemoryRepairResult r = repair_memory(request_for(*c), groups, fits);
  EXPECT_TRUE(r.feasible);
  EXPECT_EQ(r.device_of_group, fits);
  EXPECT_EQ(r.moved_groups, 0u);
  EXPECT_EQ(r.evaluations, 1);
}

TEST(RepairMemoryTest, FindsTheOnlySplitThatFits) {
  auto c = memory_tight_case();
  const GroupGraph groups(c->graph(), c->cluster(), c->costs());
  // {A, B} = 14 GB on /gpu:0: no single move helps, first-fit decreasing does.
  const auto oom = by_name(*c, {"/gpu:0", "/gpu:0", "/gpu:1", "/gpu:1"});
  const MemoryRepairResult r = repair_memory(request_for(*c), groups, oom);
  EXPECT_TRUE(r.feasible) << r.reason;
  EXPECT_EQ(r.device_of_group, by_name(*c, {"/gpu:0", "/gpu:1", "/gpu:1", "/gpu:0"}));
  EXPECT_EQ(r.moved_groups, 2u);
}

TEST(RepairMemoryTest, SaysWhyWhenNothingFits) {
  auto c = memory_tight_case();
  const GroupGraph groups(c->graph(), c->cluster(), c->costs());
  PlaceRequest r = request_for(*c);
  // A single 10.5 GB GPU cannot hold 19 GB of parameters.
  ClusterSpec spec = c->cluster().spec();
  spec.devices.resize(1);
  const Cluster one(spec, "test");
  const CostTable costs(c->graph(), one);
  const Simulator sim(c->graph(), one, costs);
  r.cluster = &one;
  r.costs = &costs;
  r.simulator = &sim;
  const GroupGraph one_groups(c->graph(), one, costs);
  const MemoryRepairResult out =
      repair_memory(r, one_groups, std::vector<DeviceId>(c->graph().num_groups(), DeviceId(0)));
  EXPECT_FALSE(out.feasible);
  EXPECT_NE(out.reason.find("/gpu:0 needs 19.00 GB of 10.50 GB"), std::string::npos) << out.reason;
}

TEST(ScheduleWithMemoryRetriesTest, LowersTheLimitOfAnOverflowingDevice) {
  auto c = memory_tight_case();
  std::vector<std::vector<int64_t>> seen;
  // A scheduler that packs by limit in op order, ignoring activations: 10.5 GB admits A + D...
  auto schedule = [&](const std::vector<int64_t>& limits) {
    seen.push_back(limits);
    ScheduleOutcome out;
    // First call: everything on /gpu:0 (OOM); later calls: the split that fits.
    out.placement = seen.size() == 1
                        ? single_device_placement(c->graph(), c->device("/gpu:0"))
                        : placement_from_groups(
                              c->graph(), by_name(*c, {"/gpu:0", "/gpu:1", "/gpu:1", "/gpu:0"}));
    return out;
  };
  const MemoryRetryResult r = schedule_with_memory_retries(request_for(*c), 1.0, 3, schedule);
  EXPECT_TRUE(r.feasible);
  EXPECT_EQ(r.retries, 1);
  EXPECT_EQ(r.evaluations, 2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0][0], int64_t(10.5e9));
  EXPECT_LT(seen[1][0], seen[0][0]);  // /gpu:0 overflowed: its limit shrank
  EXPECT_EQ(seen[1][1], seen[0][1]);  // /gpu:1 did not
}

TEST(ScheduleWithMemoryRetriesTest, StopsWhenTheSchedulerFoundNoFit) {
  auto c = memory_tight_case();
  int calls = 0;
  auto schedule = [&](const std::vector<int64_t>&) {
    ++calls;
    ScheduleOutcome out;
    out.placement = single_device_placement(c->graph(), c->device("/gpu:0"));
    out.no_fit_reason = "op 'A' fits on no allowed device";
    return out;
  };
  const MemoryRetryResult r = schedule_with_memory_retries(request_for(*c), 1.0, 5, schedule);
  EXPECT_FALSE(r.feasible);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.reason, "op 'A' fits on no allowed device");
}

TEST(ListScheduleTest, TracksParamsAndLiveTensorsPerDevice) {
  auto c = memory_tight_case();
  const GroupGraph groups(c->graph(), c->cluster(), c->costs());
  PlaceRequest r = request_for(*c);
  ListSchedule s(r, groups, memory_limits(c->cluster(), 1.0));
  const DeviceId g0 = c->device("/gpu:0"), g1 = c->device("/gpu:1");
  EXPECT_EQ(s.take_ready(), std::vector<OpId>{c->op("A")});
  EXPECT_TRUE(s.fits(c->op("A"), g0));
  s.place(c->op("A"), g0);
  EXPECT_EQ(s.take_ready(), std::vector<OpId>{c->op("B")});
  EXPECT_DOUBLE_EQ(s.finish_s(c->op("A")), 1.0);
  // A's 1000-byte output is live until B is placed.
  EXPECT_EQ(s.free_bytes(g0), int64_t(10.5e9) - int64_t(8e9) - 1000);
  EXPECT_FALSE(s.fits(c->op("B"), g0));  // 8 + 6 GB > 10.5 GB
  EXPECT_TRUE(s.fits(c->op("B"), g1));
  // On /gpu:1, B waits for A's output: 1 s + 1000 B at 1 GB/s.
  EXPECT_NEAR(s.start_s(c->op("B"), g1), 1.0 + 1e-6, 1e-12);
  s.place(c->op("B"), g1);
  EXPECT_EQ(s.take_ready(), std::vector<OpId>{c->op("C")});
  EXPECT_NE(s.no_fit_message(c->op("C")).find("op 'C'"), std::string::npos);
}

TEST(UpwardRanksTest, AddsMeanTimeAndMeanTransferAlongTheLongestPath) {
  auto c = two_chains_case();
  const std::vector<double> with = upward_ranks(request_for(*c), true);
  const std::vector<double> without = upward_ranks(request_for(*c), false);
  // a2: 1 s; a1: 1 + 1 s transfer + 1; a0: 1 + 1 + 3.
  EXPECT_DOUBLE_EQ(with[c->op("a2").value()], 1.0);
  EXPECT_DOUBLE_EQ(with[c->op("a1").value()], 3.0);
  EXPECT_DOUBLE_EQ(with[c->op("a0").value()], 5.0);
  EXPECT_DOUBLE_EQ(without[c->op("a0").value()], 3.0);
}

}  // namespace
}  // namespace dplace::testing

namespace dplace::testing {
namespace {

TEST(ListScheduleTest, AFreeSourceIsPlacedWithItsFirstConsumer) {
  // busy (1 s) takes /gpu:0 first; w is a weight (no inputs, no time, 1 GB) read by mm (1 s).
  // Deferred, w goes where mm goes: /gpu:1, which is free, so the step is 1 s. Placed by
  // tie-break on /gpu:0 instead, mm would wait 1 s for w either way (2 s).
  GraphBuilder b("weights", "test");
  Op busy;
  busy.name = "busy";
  busy.output_bytes = {4};
  busy.time_s = {{"gpu", 1.0}};
  b.add_op(std::move(busy));
  Op w;
  w.name = "w";
  w.type = "VariableV2";
  w.output_bytes = {int64_t(1e9)};
  w.param_bytes = int64_t(1e9);
  w.time_s = {{"gpu", 0.0}};
  const OpId iw = b.add_op(std::move(w));
  Op mm;
  mm.name = "mm";
  mm.inputs = {{iw, 0}};
  mm.output_bytes = {4};
  mm.time_s = {{"gpu", 1.0}};
  b.add_op(std::move(mm));
  auto base = two_chains_case();
  const PlacerCase c(std::move(b).build(), base->cluster(), 1.0);
  for (const char* placer : {"m-etf", "heft"}) {
    const PlacerRun run = run_placer(c, placer);
    EXPECT_EQ(describe(c, run.result.placement), "busy=/gpu:0 w=/gpu:1 mm=/gpu:1") << placer;
    EXPECT_DOUBLE_EQ(run.sim.step_time_s, 1.0) << placer;
  }
}

}  // namespace
}  // namespace dplace::testing
