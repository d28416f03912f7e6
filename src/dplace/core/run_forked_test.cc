#include "dplace/core/run_forked.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "dplace/core/limited_child.h"

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

// No pipe (or no fork) is kNotStarted, which callers do not answer by solving in their own
// process (where the solver's limit could not be enforced).
TEST(RunForkedTest, NoPipeIsNotStarted) {
  const int status = limited_child::exit_status_without_free_descriptors([] {
    const ForkedRun run =
        run_forked([] { return std::string("ran"); }, Clock::now() + std::chrono::seconds(30));
    if (run.outcome != ForkedRun::Outcome::kNotStarted) return 1;
    return run.problem == "cannot create a pipe: Too many open files" ? 0 : 2;
  });
  EXPECT_EQ(status, 0) << "1: another outcome, 2: another problem";
}

// A dplace killed while its solver ran left the solver's process running at full CPU until the
// solver's own limit. Here a "parent" process runs run_forked with work that would sleep 30 s and
// first writes its pid to a pipe; the parent is killed, and the work's process must go with it.
TEST(RunForkedTest, TheChildDiesWithItsParent) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    close(fds[0]);
    run_forked(
        [&] {
          const pid_t self = getpid();
          if (write(fds[1], &self, sizeof self) != sizeof self) _exit(3);
          sleep(30);
          return std::string("late");
        },
        Clock::now() + std::chrono::seconds(60));
    _exit(0);
  }
  close(fds[1]);
  pid_t worker = 0;
  ASSERT_EQ(read(fds[0], &worker, sizeof worker), static_cast<ssize_t>(sizeof worker));
  close(fds[0]);
  ASSERT_EQ(kill(parent, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(parent, &status, 0), parent);
  // The worker is not our child: poll until it is gone, or a zombie (dead, waiting for whoever
  // reaps orphans, which in a container may be nobody).
  auto dead = [](pid_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string fields;
    std::getline(stat, fields);
    const size_t close_paren = fields.rfind(')');
    return close_paren != std::string::npos && close_paren + 2 < fields.size() &&
           fields[close_paren + 2] == 'Z';
  };
  const auto start = Clock::now();
  bool gone = false;
  while (!gone && Clock::now() - start < std::chrono::seconds(10)) {
    gone = dead(worker);
    if (!gone) usleep(10000);
  }
  EXPECT_TRUE(gone) << "the work's process " << worker << " outlived its parent";
  if (!gone) kill(worker, SIGKILL);
}

}  // namespace
}  // namespace dplace
