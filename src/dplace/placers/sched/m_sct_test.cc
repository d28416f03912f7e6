#include <gtest/gtest.h>

#include "dplace/placers/common/group_graph.h"
#include "dplace/placers/common/test_cases.h"
#include "dplace/placers/sched/etf.h"

namespace dplace::testing {
namespace {

TEST(MSctPlacerTest, ReportsTheLpRelaxationInItsNote) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, "m-sct");
  // Each chain edge is a favourite edge; the relaxation's makespan is the 3 s chain.
  EXPECT_NE(run.result.note.find("LP relaxation makespan 3 s; 4 favourite children"),
            std::string::npos)
      << run.result.note;
}

TEST(MSctPlacerTest, KeepsTheEdgesOfASourceThatTakesTimeOnSomeDevice) {
  // S has no inputs and takes no time on the CPU but 1 s on the GPU, so the list schedule places
  // it like any op (it is not a free source) and the LP must give it its favourite child T.
  GraphBuilder b("source", "test");
  const OpId s = b.add_op(timed("S", {}, 1.0, 0.0, 1000));
  b.add_op(timed("T", {{s, 0}}, 1.0, 1.0, 4));
  auto base = cpu_only_case();
  const PlacerCase c(std::move(b).build(), base->cluster(), 0.0);
  const PlacerRun run = run_placer(c, "m-sct");
  EXPECT_NE(run.result.note.find("; 1 favourite children"), std::string::npos) << run.result.note;
}

// The budget bounds the LP; the list scheduling after it is m-etf's and is not cut. A run that
// ends past the budget says so (it used to overrun it by m-etf's whole time without a word).
TEST(MSctPlacerTest, SaysWhenTheListSchedulingRanPastTheBudget) {
  auto c = two_chains_case();
  const PlacerRun fast = run_placer(*c, "m-sct");
  EXPECT_EQ(fast.result.note.find("--budget-seconds does not bound"), std::string::npos)
      << fast.result.note;
  const PlacerRun past = run_placer(*c, "m-sct", {.budget_seconds = 1e-9});
  EXPECT_NE(past.result.note.find("which --budget-seconds does not bound (m-sct took"),
            std::string::npos)
      << past.result.note;
  EXPECT_DOUBLE_EQ(past.sim.step_time_s, c->optimum_s());
}

TEST(MSctPlacerTest, SkipsTheLpAboveTheEdgeLimit) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, "m-sct", {.params = {{"lp_max_edges", "2"}}});
  EXPECT_NE(run.result.note.find("plain m-etf"), std::string::npos) << run.result.note;
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, c->optimum_s());
}

TEST(MSctPlacerTest, AFavouriteChildFollowsItsParentBlindToColocation) {
  // a -> b is the only edge, so b is a's favourite child and, starting no later on a's GPU (at
  // 3 s, vs 3 s + 1 us after a transfer), follows it there; c, colocated with a, then queues
  // behind b on the same GPU: 6 s where the optimum (b alone on the other GPU) is 5 s.
  auto c = colocation_case();
  const PlacerRun run = run_placer(*c, "m-sct");
  EXPECT_EQ(describe(*c, run.result.placement), "a=/gpu:0 b=/gpu:0 c=/gpu:0");
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 6.0);
}

TEST(MSctPlacerTest, FollowsAFavouriteChildOntoItsParentsDevice) {
  // x -> {y, z}; y is heavy on x's tensor (10 s to move), z light. The LP makes y x's favourite
  // child, so y follows x; z, which would start as early on either GPU, goes to the other one.
  GraphBuilder b("fork", "test");
  Op x;
  x.name = "x";
  x.output_bytes = {int64_t(10e9)};
  x.time_s = {{"gpu", 1.0}};
  const OpId ix = b.add_op(std::move(x));
  Op y;
  y.name = "y";
  y.inputs = {{ix, 0}};
  y.output_bytes = {4};
  y.time_s = {{"gpu", 1.0}};
  b.add_op(std::move(y));
  Op z;
  z.name = "z";
  z.output_bytes = {4};
  z.time_s = {{"gpu", 1.0}};
  b.add_op(std::move(z));
  auto base = two_chains_case();
  const PlacerCase c(std::move(b).build(), base->cluster(), 2.0);
  const PlacerRun run = run_placer(c, "m-sct");
  EXPECT_EQ(run.result.placement[c.op("x")], run.result.placement[c.op("y")]);
  EXPECT_NE(run.result.placement[c.op("x")], run.result.placement[c.op("z")]);
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 2.0);
}

// An op that runs only on GPUs, in time_s there, with one output per entry of output_bytes.
OpId add_gpu_op(GraphBuilder& b, const char* name, std::vector<TensorRef> inputs, double time_s,
                std::vector<int64_t> output_bytes) {
  Op op;
  op.name = name;
  op.type = "Test";
  op.inputs = std::move(inputs);
  op.output_bytes = std::move(output_bytes);
  op.time_s = {{"gpu", time_s}};
  return b.add_op(std::move(op));
}

// a (1 s) on /gpu:0 and p (2 s) on /gpu:1 start at 0. b (1 s) reads a's 1 kB and p's 2 GB (2 s
// to move), so it can start at 2 on /gpu:1 and at 4 on /gpu:0. q (4 s) reads a's 1 kB and can
// start at 1 on /gpu:0 and at 2 on /gpu:1. b is a's favourite child (given, not from the LP).
struct KeptDeviceCase {
  std::unique_ptr<PlacerCase> c;
  std::vector<int64_t> favourite_child;
};

KeptDeviceCase kept_device_case() {
  GraphBuilder b("kept_device", "test");
  const OpId a = add_gpu_op(b, "a", {}, 1.0, {1000});
  const OpId p = add_gpu_op(b, "p", {}, 2.0, {int64_t(2e9)});
  const OpId ib = add_gpu_op(b, "b", {{a, 0}, {p, 0}}, 1.0, {4});
  add_gpu_op(b, "q", {{a, 0}}, 4.0, {4});
  KeptDeviceCase k;
  k.c = std::make_unique<PlacerCase>(std::move(b).build(), two_chains_case()->cluster(), 5.0);
  k.favourite_child.assign(k.c->graph().num_ops(), -1);
  k.favourite_child[a.value()] = ib.value();
  return k;
}

ScheduleOutcome run_sct_schedule(const PlacerCase& c, std::vector<int64_t> favourite_child,
                                 FavouriteReservation reservation) {
  PlaceRequest request;
  request.graph = &c.graph();
  request.cluster = &c.cluster();
  request.costs = &c.costs();
  request.simulator = &c.simulator();
  const GroupGraph groups(c.graph(), c.cluster(), c.costs());
  std::vector<int64_t> limits;
  for (const Device& d : c.cluster().devices()) limits.push_back(d.memory_bytes);
  return run_etf(
      request, groups, limits,
      EtfOptions{.favourite_child = std::move(favourite_child), .reservation = reservation});
}

TEST(MSctPlacerTest, BaechisRuleKeepsADeviceOnlyWhereTheFavouriteChildStartsEarliest) {
  // b starts earlier on /gpu:1, so Baechi's rule does not keep /gpu:0 for it: q takes /gpu:0 at
  // 1 and b runs on /gpu:1 at 2, the optimum 5 s (q cannot start before 1).
  const KeptDeviceCase k = kept_device_case();
  const ScheduleOutcome urgent =
      run_sct_schedule(*k.c, k.favourite_child, FavouriteReservation::kUrgent);
  EXPECT_EQ(describe(*k.c, urgent.placement), "a=/gpu:0 p=/gpu:1 b=/gpu:1 q=/gpu:0");
  EXPECT_DOUBLE_EQ(k.c->simulator().run(urgent.placement).step_time_s, 5.0);

  // The finish-before rule keeps /gpu:0 for b anyway, and q, which would still run at 4, goes
  // behind p on /gpu:1: b waits for p's tensor on /gpu:0 (4 to 5), q runs 2 to 6.
  const ScheduleOutcome finish =
      run_sct_schedule(*k.c, k.favourite_child, FavouriteReservation::kFinishBefore);
  EXPECT_EQ(describe(*k.c, finish.placement), "a=/gpu:0 p=/gpu:1 b=/gpu:0 q=/gpu:1");
  EXPECT_DOUBLE_EQ(k.c->simulator().run(finish.placement).step_time_s, 6.0);
}

TEST(MSctPlacerTest, BaechisRuleLetsAnotherOpUseAKeptDeviceOnlyOnceItIsUrgent) {
  // a (1 s) and p (2 s) start at 0 on different GPUs. b (1 s) reads a's 2 GB and p's 1 kB: it can
  // start at 2 + 1 us on a's GPU, 3 on p's, so a's GPU is kept for it from 1. q (0.5 s) reads a's
  // 1 kB: it can start at 1 on a's GPU, 2 on p's.
  GraphBuilder b("kept_device_gap", "test");
  const OpId a = add_gpu_op(b, "a", {}, 1.0, {int64_t(2e9), 1000});
  const OpId p = add_gpu_op(b, "p", {}, 2.0, {1000});
  const OpId ib = add_gpu_op(b, "b", {{a, 0}, {p, 0}}, 1.0, {4});
  add_gpu_op(b, "q", {{a, 1}}, 0.5, {4});
  const PlacerCase c(std::move(b).build(), two_chains_case()->cluster(), 3.000001);
  std::vector<int64_t> favourite(c.graph().num_ops(), -1);
  favourite[a.value()] = ib.value();

  // q could fill the idle time of a's GPU (1 to 1.5) before b can start; the finish-before rule
  // lets it. Under Baechi's rule q is urgent only at 2, when p's GPU is free too, and goes there.
  const ScheduleOutcome finish =
      run_sct_schedule(c, favourite, FavouriteReservation::kFinishBefore);
  const Placement& f = finish.placement;
  EXPECT_NE(f[c.op("a")], f[c.op("p")]) << describe(c, f);
  EXPECT_EQ(f[c.op("b")], f[c.op("a")]) << describe(c, f);
  EXPECT_EQ(f[c.op("q")], f[c.op("a")]) << describe(c, f);
  const ScheduleOutcome urgent = run_sct_schedule(c, favourite, FavouriteReservation::kUrgent);
  const Placement& u = urgent.placement;
  EXPECT_NE(u[c.op("a")], u[c.op("p")]) << describe(c, u);
  EXPECT_EQ(u[c.op("b")], u[c.op("a")]) << describe(c, u);
  EXPECT_EQ(u[c.op("q")], u[c.op("p")]) << describe(c, u);
  EXPECT_DOUBLE_EQ(urgent.estimated_step_s, 3.000001);
  EXPECT_DOUBLE_EQ(c.simulator().run(urgent.placement).step_time_s, 3.000001);
}

}  // namespace
}  // namespace dplace::testing
