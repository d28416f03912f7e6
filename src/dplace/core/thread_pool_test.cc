#include "dplace/core/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "dplace/core/limited_child.h"

namespace dplace {
namespace {

// A pool whose threads cannot all start throws, having stopped the ones that did: destroying the
// condition variable they waited on hung the process. In a child process whose address space
// leaves 16 MiB: room for a few thread stacks (8 MiB each by default) but not 255.
TEST(ThreadPoolTest, AThreadThatCannotStartIsAnErrorNotAHang) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit allows";
#else
  const int status = limited_child::exit_status_in_child(
      [] {
        std::ifstream statm("/proc/self/statm");
        size_t pages = 0;
        statm >> pages;
        const rlim_t used = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
        if (!limited_child::set_soft_limit(RLIMIT_AS, used + (16u << 20))) return 10;
        try {
          ThreadPool pool(256);
          return 11;  // every thread started: the limit did not bite
        } catch (const std::system_error& e) {
          return std::string(e.what()).find("cannot start worker thread") == 0 ? 0 : 12;
        } catch (...) {
          return 13;
        }
      },
      std::chrono::seconds(20));
  if (status == limited_child::kTimedOut) FAIL() << "the pool hung when a thread could not start";
  ASSERT_LT(status, 128) << "child killed by signal " << status - 128;
  EXPECT_EQ(status, 0) << "10: setrlimit failed, 11: no failure, 12: message, 13: "
                          "another exception";
#endif
}

TEST(ThreadPoolTest, EveryIndexRunsExactlyOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(hits.size(), [&](size_t i, size_t worker) {
    ASSERT_LT(worker, pool.size());
    hits[i].fetch_add(1);
  });
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPoolTest, ReusableAcrossManyLoops) {
  ThreadPool pool(2);
  for (int round = 0; round < 200; ++round) {
    std::vector<int> out(17, 0);
    pool.parallel_for(out.size(), [&](size_t i, size_t) { out[i] = static_cast<int>(i) * round; });
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<int>(i) * round);
  }
}

TEST(ThreadPoolTest, RethrowsTheLowestIndexException) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(10,
                                 [](size_t i, size_t) {
                                   if (i == 3 || i == 7) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  // Still usable afterwards.
  std::atomic<int> n{0};
  pool.parallel_for(5, [&](size_t, size_t) { n.fetch_add(1); });
  EXPECT_EQ(n.load(), 5);
}

TEST(ThreadPoolTest, SizeOneRunsOnTheCaller) {
  ThreadPool pool(1);
  int sum = 0;  // no synchronisation needed: one thread
  pool.parallel_for(4, [&](size_t i, size_t worker) {
    EXPECT_EQ(worker, 0u);
    sum += static_cast<int>(i);
  });
  EXPECT_EQ(sum, 6);
}

}  // namespace
}  // namespace dplace
