#include <gtest/gtest.h>

#include "dplace/placers/common/test_cases.h"

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

}  // namespace
}  // namespace dplace::testing
