#include "dplace/core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace dplace {
namespace {

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
