#include "dplace/placers/sched/sct_lp.h"

#include <gtest/gtest.h>

#include "dplace/core/limited_child.h"

namespace dplace {
namespace {

TEST(SctLpTest, AChainMakesEveryEdgeFavourite) {
  // 0 -> 1 -> 2, 1 s each, 5 s to communicate: the relaxation runs the chain in 3 s.
  const SctLpProblem p{{1.0, 1.0, 1.0}, {{0, 1, 5.0}, {1, 2, 5.0}}};
  const SctLpSolution s = solve_sct_lp(p, 60);
  ASSERT_TRUE(s.optimal) << s.status;
  EXPECT_NEAR(s.makespan_s, 3.0, 1e-9);
  EXPECT_EQ(favourite_children(p, s), (std::vector<int64_t>{1, 2, -1}));
}

TEST(SctLpTest, AForkHasOneFavouriteChildAndPaysForTheOther) {
  // 0 -> {1, 2}: at most one child without delay. Child 1 has a 4 s tail, so it is the favourite
  // and child 2 absorbs the 1 s delay: makespan 1 + 4 = 5 s (2 would end at 1 + 1 + 1 = 3 s).
  const SctLpProblem p{{1.0, 4.0, 1.0}, {{0, 1, 1.0}, {0, 2, 1.0}}};
  const SctLpSolution s = solve_sct_lp(p, 60);
  ASSERT_TRUE(s.optimal) << s.status;
  EXPECT_NEAR(s.makespan_s, 5.0, 1e-9);
  EXPECT_EQ(favourite_children(p, s), (std::vector<int64_t>{1, -1, -1}));
}

TEST(SctLpTest, ASymmetricJoinSplitsTheRelaxationAndRoundsToNoFavourite) {
  // {0, 1} -> 2 with 3 s delays: x_02 + x_12 >= 1, and the relaxation halves both (s_2 = 1 + 1.5,
  // makespan 3.5 s). Rounding keeps only x < 0.5, so neither parent is favourite.
  const SctLpProblem p{{1.0, 1.0, 1.0}, {{0, 2, 3.0}, {1, 2, 3.0}}};
  const SctLpSolution s = solve_sct_lp(p, 60);
  ASSERT_TRUE(s.optimal) << s.status;
  EXPECT_NEAR(s.makespan_s, 3.5, 1e-9);
  EXPECT_EQ(favourite_children(p, s), (std::vector<int64_t>{-1, -1, -1}));
}

TEST(SctLpTest, StopsAtItsTimeLimit) {
  // A layered DAG big enough that the dual simplex needs many iterations: 20 layers of 30 tasks,
  // each task feeding three of the next layer. With a 1 us limit Clp stops at its first check.
  SctLpProblem p;
  constexpr uint32_t kLayers = 20, kWidth = 30;
  for (uint32_t i = 0; i < kLayers * kWidth; ++i) p.duration_s.push_back(1.0 + (i * 7 % 13) / 13.0);
  for (uint32_t l = 0; l + 1 < kLayers; ++l) {
    for (uint32_t i = 0; i < kWidth; ++i) {
      for (uint32_t k = 0; k < 3; ++k) {
        p.edges.push_back({l * kWidth + i, (l + 1) * kWidth + (i + 17 * k) % kWidth, 0.5 + k});
      }
    }
  }
  const SctLpSolution limited = solve_sct_lp(p, 1e-6);
  EXPECT_FALSE(limited.optimal);
  EXPECT_EQ(limited.status, "time limit reached");
  const SctLpSolution full = solve_sct_lp(p, 60);
  EXPECT_TRUE(full.optimal) << full.status;
}

// When Clp's process cannot start, the LP is not solved (m-sct is then m-etf and its note says
// why): solving in this process instead ran past the time limit for minutes.
TEST(SctLpTest, NoProcessForClpIsAnUnsolvedLp) {
  const int status = limited_child::exit_status_without_free_descriptors([] {
    const SctLpProblem p{{1.0, 1.0, 1.0}, {{0, 1, 5.0}, {1, 2, 5.0}}};
    const SctLpSolution s = solve_sct_lp(p, 60);
    if (s.optimal || !s.x.empty()) return 1;
    return s.status == "Clp's process could not start: cannot create a pipe: Too many open files"
               ? 0
               : 2;
  });
  EXPECT_EQ(status, 0) << "1: solved, 2: another status";
}

}  // namespace
}  // namespace dplace
