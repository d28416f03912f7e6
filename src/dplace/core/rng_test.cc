#include "dplace/core/rng.h"

#include <gtest/gtest.h>

#include <vector>

namespace dplace {
namespace {

TEST(RngTest, SameSeedGivesSameSequence) {
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
}

TEST(RngTest, DifferentSeedsDiffer) {
  Rng a(1), b(2);
  int same = 0;
  for (int i = 0; i < 100; ++i) same += a.next_u64() == b.next_u64();
  EXPECT_EQ(same, 0);
}

TEST(RngTest, UniformIntStaysInRangeAndCoversIt) {
  Rng rng(7);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 5000; ++i) {
    const uint64_t x = rng.uniform_int(5);
    ASSERT_LT(x, 5u);
    ++counts[x];
  }
  for (int c : counts) EXPECT_GT(c, 800);  // expected 1000 each
}

TEST(RngTest, Uniform01IsInUnitInterval) {
  Rng rng(3);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double x = rng.uniform01();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    sum += x;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

TEST(RngTest, SplitIsDeterministic) {
  Rng a(9), b(9);
  Rng sa = a.split(), sb = b.split();
  EXPECT_EQ(sa.next_u64(), sb.next_u64());
  EXPECT_EQ(a.next_u64(), b.next_u64());
}

}  // namespace
}  // namespace dplace
