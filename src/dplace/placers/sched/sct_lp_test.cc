#include "dplace/placers/sched/sct_lp.h"

#include <gtest/gtest.h>

namespace dplace {
namespace {

TEST(SctLpTest, AChainMakesEveryEdgeFavourite) {
  // 0 -> 1 -> 2, 1 s each, 5 s to communicate: the relaxation runs the chain in 3 s.
  const SctLpProblem p{{1.0, 1.0, 1.0}, {{0, 1, 5.0}, {1, 2, 5.0}}};
  const SctLpSolution s = solve_sct_lp(p);
  ASSERT_TRUE(s.optimal) << s.status;
  EXPECT_NEAR(s.makespan_s, 3.0, 1e-9);
  EXPECT_EQ(favourite_children(p, s), (std::vector<int64_t>{1, 2, -1}));
}

TEST(SctLpTest, AForkHasOneFavouriteChildAndPaysForTheOther) {
  // 0 -> {1, 2}: at most one child without delay. Child 1 has a 4 s tail, so it is the favourite
  // and child 2 absorbs the 1 s delay: makespan 1 + 4 = 5 s (2 would end at 1 + 1 + 1 = 3 s).
  const SctLpProblem p{{1.0, 4.0, 1.0}, {{0, 1, 1.0}, {0, 2, 1.0}}};
  const SctLpSolution s = solve_sct_lp(p);
  ASSERT_TRUE(s.optimal) << s.status;
  EXPECT_NEAR(s.makespan_s, 5.0, 1e-9);
  EXPECT_EQ(favourite_children(p, s), (std::vector<int64_t>{1, -1, -1}));
}

TEST(SctLpTest, ASymmetricJoinSplitsTheRelaxationAndRoundsToNoFavourite) {
  // {0, 1} -> 2 with 3 s delays: x_02 + x_12 >= 1, and the relaxation halves both (s_2 = 1 + 1.5,
  // makespan 3.5 s). Rounding keeps only x < 0.5, so neither parent is favourite.
  const SctLpProblem p{{1.0, 1.0, 1.0}, {{0, 2, 3.0}, {1, 2, 3.0}}};
  const SctLpSolution s = solve_sct_lp(p);
  ASSERT_TRUE(s.optimal) << s.status;
  EXPECT_NEAR(s.makespan_s, 3.5, 1e-9);
  EXPECT_EQ(favourite_children(p, s), (std::vector<int64_t>{-1, -1, -1}));
}

}  // namespace
}  // namespace dplace
