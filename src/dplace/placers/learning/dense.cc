#include "dplace/placers/learning/dense.h"

#include <algorithm>
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
