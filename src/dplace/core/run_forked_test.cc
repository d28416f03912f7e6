#include "dplace/core/run_forked.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace dplace {
namespace {

using Clock = std::chrono::steady_clock;

TEST(RunForkedTest, ReturnsTheBytesTheWorkReturns) {
  // More than a pipe holds (64 KiB), so the parent must read while the child writes.
  std::string expected(3 << 20, '\0');
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<char>(i * 7 + i / 13);
  const ForkedRun run =
      run_forked([&] { return expected; }, Clock::now() + std::chrono::seconds(30));
  ASSERT_EQ(run.outcome, ForkedRun::Outcome::kFinished) << run.problem;
  EXPECT_EQ(run.output, expected);
}

TEST(RunForkedTest, WorkStillRunningAtTheDeadlineIsKilled) {
  const auto start = Clock::now();
  const ForkedRun run = run_forked(
      [] {
        sleep(30);
        return std::string("late");
      },
      start + std::chrono::milliseconds(200));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(run.outcome, ForkedRun::Outcome::kTimedOut);
  EXPECT_TRUE(run.output.empty());
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 5.0);
}

TEST(RunForkedTest, AChildThatDiesOrThrowsIsAFailure) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  const ForkedRun crashed = run_forked([]() -> std::string { std::abort(); }, deadline);
  EXPECT_EQ(crashed.outcome, ForkedRun::Outcome::kFailed);
  EXPECT_NE(crashed.problem.find("killed by signal"), std::string::npos) << crashed.problem;
  const ForkedRun threw =
      run_forked([]() -> std::string { throw std::runtime_error("no"); }, deadline);
  EXPECT_EQ(threw.outcome, ForkedRun::Outcome::kFailed);
  EXPECT_NE(threw.problem.find("exited with status 1"), std::string::npos) << threw.problem;
}

TEST(RunForkedTest, TheChildSeesTheParentsMemory) {
  const std::string state = "computed before the fork";
  const ForkedRun run =
      run_forked([&] { return state + "!"; }, Clock::now() + std::chrono::seconds(30));
  ASSERT_EQ(run.outcome, ForkedRun::Outcome::kFinished);
  EXPECT_EQ(run.output, "computed before the fork!");
}

}  // namespace
}  // namespace dplace
