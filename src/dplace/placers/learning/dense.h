// The small dense-math kit of the hand-written policy networks (hsdag, hierarchical): row-major
// matrix products in double precision, weight initialisation, Adam, and sampling from a masked
// distribution. Written out because the networks are small (tens to hundreds of units) and the
// placers must not need LibTorch; each product is a plain triple loop that GCC vectorises at -O3
// (the module's CMake sets it), with the same summation order whatever the machine.
//
// Thread safety: pure functions, and Adam is used by one thread at a time.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dplace/core/rng.h"

namespace dplace::dense {

// c (n x m) += a (n x k) b (k x m).
void add_product(const double* a, const double* b, double* c, size_t n, size_t k, size_t m);
// c (k x m) += a^T b for a (n x k) and b (n x m).
void add_product_tn(const double* a, const double* b, double* c, size_t n, size_t k, size_t m);
// c (n x k) += a b^T for a (n x m) and b (k x m).
void add_product_nt(const double* a, const double* b, double* c, size_t n, size_t m, size_t k);
// The transpose (cols x rows) of w (rows x cols). (A product with a transposed right-hand side,
// add_product_nt, reduces along rows, which GCC does not vectorise without reassociating the sum;
// add_product with the transpose does the same arithmetic as independent column updates.)
std::vector<double> transposed(const double* w, size_t rows, size_t cols);
// `bias` (cols) added to every row of x (rows x cols).
void add_bias(const double* bias, double* x, size_t rows, size_t cols);
// Column sums of x (rows x cols) added to `out` (cols).
void add_column_sums(const double* x, double* out, size_t rows, size_t cols);

inline double sigmoid(double t) { return 1 / (1 + std::exp(-t)); }

// tanh of each x[i] into y[i], within a few units in the last place of std::tanh, written so that
// GCC vectorises the loop (libm's tanh is a call per element; it took a third of the
// hierarchical planner's time in its attention).
void tanh_of(const double* x, double* y, size_t n);  // x == y allowed

// Glorot-uniform weights for a fan_in x fan_out matrix: uniform in +-scale * sqrt(6 / (fan_in +
// fan_out)), drawn in order from rng.
void glorot_uniform(std::span<double> weights, size_t fan_in, size_t fan_out, double scale,
                    Rng& rng);
// Biases as PyTorch's linear layers start them: uniform in +-scale / sqrt(fan_in).
void linear_bias(std::span<double> bias, size_t fan_in, double scale, Rng& rng);

// Softmax of logits over the entries where allowed is nonzero, written to probs and log_probs (0
// elsewhere); returns its entropy in nats. REQUIRES: at least one allowed entry.
double masked_softmax(std::span<const double> logits, std::span<const uint8_t> allowed,
                      std::span<double> probs, std::span<double> log_probs);

// The entry that inverse-CDF sampling with u in [0, 1) picks from probs, among the allowed ones
// (rounding that leaves u past the last allowed entry picks that entry). REQUIRES: as above.
size_t sample_index(std::span<const double> probs, std::span<const uint8_t> allowed, double u);

// Adam (beta 0.9, 0.999, epsilon 1e-8) over one parameter vector.
class Adam {
 public:
  explicit Adam(size_t num_parameters) : m_(num_parameters, 0.0), v_(num_parameters, 0.0) {}
  // One step descending `grad`. REQUIRES: sizes equal num_parameters.
  void step(std::span<double> theta, std::span<const double> grad, double learning_rate);

 private:
  std::vector<double> m_, v_;
  int64_t steps_ = 0;
};

}  // namespace dplace::dense
