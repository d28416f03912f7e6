#include "dplace/placers/learning/dense.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "dplace/core/error.h"

namespace dplace::dense {

// The products are compiled twice, for AVX2 and for the baseline x86-64 (SSE2), and the loader
// picks the one the CPU runs (GCC's function multiversioning): twice the doubles per instruction
// where AVX2 is present. Without FMA in either, each product rounds the same on both. Other
// architectures get the plain build.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define DPLACE_DENSE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DPLACE_DENSE_CLONES
#endif

DPLACE_DENSE_CLONES void add_product(const double* __restrict a, const double* __restrict b,
                                     double* __restrict c, size_t n, size_t k, size_t m) {
  for (size_t i = 0; i < n; ++i) {
    double* ci = c + i * m;
    for (size_t j = 0; j < k; ++j) {
      const double aij = a[i * k + j];
      if (aij == 0) continue;
      const double* bj = b + j * m;
      for (size_t t = 0; t < m; ++t) ci[t] += aij * bj[t];
    }
  }
}

DPLACE_DENSE_CLONES void add_product_tn(const double* __restrict a, const double* __restrict b,
                                        double* __restrict c, size_t n, size_t k, size_t m) {
  for (size_t i = 0; i < n; ++i) {
    const double* bi = b + i * m;
    for (size_t j = 0; j < k; ++j) {
      const double aij = a[i * k + j];
      if (aij == 0) continue;
      double* cj = c + j * m;
      for (size_t t = 0; t < m; ++t) cj[t] += aij * bi[t];
    }
  }
}

DPLACE_DENSE_CLONES void add_product_nt(const double* __restrict a, const double* __restrict b,
                                        double* __restrict c, size_t n, size_t m, size_t k) {
  for (size_t i = 0; i < n; ++i) {
    const double* ai = a + i * m;
    for (size_t j = 0; j < k; ++j) {
      const double* bj = b + j * m;
      double sum = 0;
      for (size_t t = 0; t < m; ++t) sum += ai[t] * bj[t];
      c[i * k + j] += sum;
    }
  }
}

DPLACE_DENSE_CLONES void tanh_of(const double* x, double* y, size_t n) {
  // tanh |x| = (e - 1) / (e + 1) with e = exp(2 |x|) = 2^k exp(r), k = round(2 |x| / ln 2) and
  // |r| <= ln 2 / 2, exp(r) by its Taylor series to r^13 (error below 1e-17); |x| capped at 20,
  // where tanh is 1 in double precision. 2^k is built in the exponent bits: adding 1.5 x 2^52
  // rounds to an integer held in the low mantissa bits.
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2High = 0.693145751953125, kLn2Low = 1.4286068203094172e-6;
  constexpr double kRound = 6755399441055744.0;  // 1.5 x 2^52
  for (size_t i = 0; i < n; ++i) {
    const double magnitude = std::fabs(x[i]);
    const double t = 2 * (magnitude < 20.0 ? magnitude : 20.0);
    const double shifted = t * kLog2e + kRound;
    const double k = shifted - kRound;
    const double r = (t - k * kLn2High) - k * kLn2Low;
    double p = 1.0 / 6227020800.0;  // 1 / 13!
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    const double expm1_r = p * r;  // exp(r) - 1
    const double scale = std::bit_cast<double>((std::bit_cast<uint64_t>(shifted) + 1023) << 52);
    // e - 1 = 2^k (exp(r) - 1) + (2^k - 1), exact enough for small |x| (k = 0).
    const double e_minus_1 = scale * expm1_r + (scale - 1);
    const double result = std::copysign(e_minus_1 / (e_minus_1 + 2), x[i]);
    y[i] = x[i] == x[i] ? result : x[i];  // NaN stays NaN
  }
}

std::vector<double> transposed(const double* w, size_t rows, size_t cols) {
  std::vector<double> t(rows * cols);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) t[j * rows + i] = w[i * cols + j];
  return t;
}

void add_bias(const double* bias, double* x, size_t rows, size_t cols) {
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) x[i * cols + j] += bias[j];
}

void add_column_sums(const double* x, double* out, size_t rows, size_t cols) {
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) out[j] += x[i * cols + j];
}

void glorot_uniform(std::span<double> weights, size_t fan_in, size_t fan_out, double scale,
                    Rng& rng) {
  DPLACE_CHECK(weights.size() == fan_in * fan_out);
  const double limit = scale * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  for (double& w : weights) w = limit * (2 * rng.uniform01() - 1);
}

void linear_bias(std::span<double> bias, size_t fan_in, double scale, Rng& rng) {
  const double limit = scale / std::sqrt(static_cast<double>(fan_in));
  for (double& b : bias) b = limit * (2 * rng.uniform01() - 1);
}

double masked_softmax(std::span<const double> logits, std::span<const uint8_t> allowed,
                      std::span<double> probs, std::span<double> log_probs) {
  const size_t n = logits.size();
  DPLACE_CHECK(allowed.size() == n && probs.size() == n && log_probs.size() == n);
  double top = -INFINITY;
  for (size_t d = 0; d < n; ++d)
    if (allowed[d]) top = std::max(top, logits[d]);
  double sum = 0;
  for (size_t d = 0; d < n; ++d)
    if (allowed[d]) sum += std::exp(logits[d] - top);
  const double log_sum = std::log(sum);
  double entropy = 0;
  for (size_t d = 0; d < n; ++d) {
    probs[d] = 0;
    log_probs[d] = 0;
    if (!allowed[d]) continue;
    log_probs[d] = logits[d] - top - log_sum;
    probs[d] = std::exp(log_probs[d]);
    entropy -= probs[d] * log_probs[d];
  }
  return entropy;
}

size_t sample_index(std::span<const double> probs, std::span<const uint8_t> allowed, double u) {
  const size_t n = probs.size();
  DPLACE_CHECK(n > 0 && allowed.size() == n);
  size_t d = 0;
  while (d + 1 < n && (!allowed[d] || u >= probs[d])) {
    if (allowed[d]) u -= probs[d];
    ++d;
  }
  while (d > 0 && !allowed[d]) --d;
  DPLACE_CHECK(allowed[d]) << "no allowed entry";
  return d;
}

void Adam::step(std::span<double> theta, std::span<const double> grad, double learning_rate) {
  constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;
  DPLACE_CHECK(grad.size() == theta.size() && theta.size() == m_.size());
  ++steps_;
  const double c1 = 1 - std::pow(kBeta1, static_cast<double>(steps_));
  const double c2 = 1 - std::pow(kBeta2, static_cast<double>(steps_));
  for (size_t i = 0; i < theta.size(); ++i) {
    m_[i] = kBeta1 * m_[i] + (1 - kBeta1) * grad[i];
    v_[i] = kBeta2 * v_[i] + (1 - kBeta2) * grad[i] * grad[i];
    theta[i] -= learning_rate * (m_[i] / c1) / (std::sqrt(v_[i] / c2) + kEpsilon);
  }
}

}  // namespace dplace::dense
