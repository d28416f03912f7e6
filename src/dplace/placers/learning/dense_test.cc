#include "dplace/placers/learning/dense.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace dplace::dense {
namespace {

TEST(DenseTest, TanhMatchesTheLibrary) {
  std::vector<double> x;
  for (double v = -25; v <= 25; v += 0.001) x.push_back(v);
  // ln 2 / 4 is where k = round(2 |x| / ln 2) steps from 0 to 1.
  const double quarter_ln2 = std::log(2.0) / 4;
  for (double v : {0.0,
                   -0.0,
                   1e-300,
                   -1e-300,
                   1e-310,
                   -5e-324,
                   1e-12,
                   -3e-9,
                   quarter_ln2,
                   std::nextafter(quarter_ln2, 0.0),
                   std::nextafter(quarter_ln2, 1.0),
                   0.34657359,
                   19.99,
                   20.0,
                   20.01,
                   700.0,
                   -700.0,
                   1e300,
                   std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()}) {
    x.push_back(v);
  }
  std::vector<double> y(x.size());
  tanh_of(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::tanh(x[i]);
    EXPECT_NEAR(y[i], want, 4 * std::numeric_limits<double>::epsilon() * std::abs(want) + 1e-300)
        << "x = " << x[i];
    EXPECT_EQ(std::signbit(y[i]), std::signbit(want)) << "x = " << x[i];
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double y_nan = 0;
  tanh_of(&nan, &y_nan, 1);
  EXPECT_TRUE(std::isnan(y_nan));
  // In place.
  std::vector<double> z = x;
  tanh_of(z.data(), z.data(), z.size());
  EXPECT_EQ(z, y);
}

TEST(DenseTest, ProductsMatchTheirDefinitions) {
  // a (2 x 3), b (3 x 2): a b, a^T c for c (2 x 2), a d^T for d (2 x 3).
  const std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, 0, 1, 1, 1};
  std::vector<double> ab(4, 1.0);  // accumulates onto 1s
  add_product(a.data(), b.data(), ab.data(), 2, 3, 2);
  EXPECT_EQ(ab, (std::vector<double>{5, 6, 11, 12}));
  const std::vector<double> c = {1, 2, 3, 4};
  std::vector<double> atc(6, 0.0);
  add_product_tn(a.data(), c.data(), atc.data(), 2, 3, 2);
  EXPECT_EQ(atc, (std::vector<double>{13, 18, 17, 24, 21, 30}));
  std::vector<double> adt(4, 0.0);
  add_product_nt(a.data(), a.data(), adt.data(), 2, 3, 2);
  EXPECT_EQ(adt, (std::vector<double>{14, 32, 32, 77}));
  EXPECT_EQ(transposed(a.data(), 2, 3), (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

TEST(DenseTest, MaskedSoftmaxAndSampling) {
  const std::vector<double> logits = {0.0, 5.0, std::log(3.0)};
  const std::vector<uint8_t> allowed = {1, 0, 1};
  std::vector<double> p(3), lp(3);
  const double entropy = masked_softmax(logits, allowed, p, lp);
  EXPECT_NEAR(p[0], 0.25, 1e-15);
  EXPECT_EQ(p[1], 0.0);
  EXPECT_NEAR(p[2], 0.75, 1e-15);
  EXPECT_NEAR(entropy, -(0.25 * std::log(0.25) + 0.75 * std::log(0.75)), 1e-15);
  EXPECT_EQ(sample_index(p, allowed, 0.1), 0u);
  EXPECT_EQ(sample_index(p, allowed, 0.3), 2u);
  EXPECT_EQ(sample_index(p, allowed, 0.9999999999999999), 2u);
  const std::vector<uint8_t> last_barred = {1, 1, 0};
  const std::vector<double> q = {0.5, 0.5, 0.0};
  EXPECT_EQ(sample_index(q, last_barred, 1.0 - 1e-17), 1u);  // rounding past the end
}

}  // namespace
}  // namespace dplace::dense
