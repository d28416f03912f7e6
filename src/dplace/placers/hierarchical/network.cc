#include "dplace/placers/hierarchical/network.h"

#include <algorithm>
#include <cmath>

#include "dplace/core/error.h"

namespace dplace::hierarchical {
namespace {

using dense::add_column_sums;
using dense::add_product;
using dense::add_product_nt;
using dense::add_product_tn;
using dense::sigmoid;

// One LSTM step of width n from its pre-activations z (4n: input, forget, output, candidate):
// gates (4n, activated), c = i * g + f * c_prev, h = o * tanh(c).
void lstm_forward(const double* z, const double* c_prev, double* gates, double* c, double* h,
                  size_t n) {
  for (size_t j = 0; j < n; ++j) {
    gates[j] = sigmoid(z[j]);
    gates[n + j] = sigmoid(z[n + j]);
    gates[2 * n + j] = sigmoid(z[2 * n + j]);
    gates[3 * n + j] = std::tanh(z[3 * n + j]);
    c[j] = gates[j] * gates[3 * n + j] + gates[n + j] * c_prev[j];
    h[j] = gates[2 * n + j] * std::tanh(c[j]);
  }
}

// Its backward step: from dh (the gradient of h) and dc (of c, from the later step), the gradient
// of the pre-activations (dz, 4n) and of c_prev (written over dc).
void lstm_backward(const double* gates, const double* c_prev, const double* c, const double* dh,
                   double* dc, double* dz, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    const double i = gates[j], f = gates[n + j], o = gates[2 * n + j], g = gates[3 * n + j];
    const double tc = std::tanh(c[j]);
    const double dct = dc[j] + dh[j] * o * (1 - tc * tc);
    dz[j] = dct * g * i * (1 - i);
    dz[n + j] = dct * c_prev[j] * f * (1 - f);
    dz[2 * n + j] = dh[j] * tc * o * (1 - o);
    dz[3 * n + j] = dct * i * (1 - g * g);
    dc[j] = dct * f;
  }
}

// out (m) += sum over the row's entries of value x row `column` of w (rows of width m).
void add_sparse_product(const SparseRow& row, const double* w, double* out, size_t m) {
  for (size_t e = 0; e < row.columns.size(); ++e) {
    const double value = row.values[e];
    const double* wj = w + static_cast<size_t>(row.columns[e]) * m;
    for (size_t t = 0; t < m; ++t) out[t] += value * wj[t];
  }
}

}  // namespace

Network::Network(const NetworkConfig& config, Rng& rng) : config_(config) {
  const size_t U = static_cast<size_t>(config.num_units);
  const size_t F = static_cast<size_t>(config.unit_feature_dim);
  const size_t Q = static_cast<size_t>(config.grouper_hidden);
  const size_t G = static_cast<size_t>(config.num_groups);
  const size_t E = static_cast<size_t>(config.group_embedding);
  const size_t D = static_cast<size_t>(config.num_devices);
  const size_t H = static_cast<size_t>(config.hidden);
  const size_t n = H / 2;
  DPLACE_CHECK(U > 0 && F > 0 && Q > 0 && G > 0 && E > 0 && D > 0 && H >= 2 && H % 2 == 0);

  size_t next = 0;
  auto take = [&](size_t size) {
    const size_t at = next;
    next += size;
    return at;
  };
  Layout& l = layout_;
  l.g_w1 = take(F * Q);
  l.g_b1 = take(Q);
  l.g_w2 = take(Q * G);
  l.g_b2 = take(G);
  for (int r = 0; r < 2; ++r) {
    l.enc_wx[r] = take(E * 4 * n);
    l.enc_wh[r] = take(n * 4 * n);
    l.enc_b[r] = take(4 * n);
  }
  l.w_a1 = take(H * H);
  l.w_a2 = take(H * H);
  l.v = take(H);
  l.start = take(H);
  l.device_embedding = take(D * H);
  l.dec_wy = take(H * 4 * H);
  l.dec_ws = take(H * 4 * H);
  l.dec_b = take(4 * H);
  l.w_o = take(2 * H * D);
  l.b_o = take(D);
  theta_.assign(next, 0.0);
  adam_ = dense::Adam(next);

  const double s = config.init_scale;
  auto glorot = [&](size_t at, size_t fan_in, size_t fan_out) {
    dense::glorot_uniform(std::span(theta_).subspan(at, fan_in * fan_out), fan_in, fan_out, s, rng);
  };
  glorot(l.g_w1, F, Q);
  dense::linear_bias(std::span(theta_).subspan(l.g_b1, Q), F, s, rng);
  glorot(l.g_w2, Q, G);
  dense::linear_bias(std::span(theta_).subspan(l.g_b2, G), Q, s, rng);
  for (int r = 0; r < 2; ++r) {
    glorot(l.enc_wx[r], E, 4 * n);
    glorot(l.enc_wh[r], n, 4 * n);
    for (size_t j = 0; j < n; ++j) theta_[l.enc_b[r] + n + j] = 1;  // forget gate
  }
  glorot(l.w_a1, H, H);
  glorot(l.w_a2, H, H);
  glorot(l.v, H, 1);
  glorot(l.start, 1, H);
  glorot(l.device_embedding, D, H);
  glorot(l.dec_wy, H, 4 * H);
  glorot(l.dec_ws, H, 4 * H);
  for (size_t j = 0; j < H; ++j) theta_[l.dec_b + H + j] = 1;  // forget gate
  glorot(l.w_o, 2 * H, D);
  dense::linear_bias(std::span(theta_).subspan(l.b_o, D), 2 * H, s, rng);
}

void Network::grouper_forward(std::span<const double> features, std::span<const double> prior,
                              GrouperPass& pass) const {
  const size_t U = static_cast<size_t>(config_.num_units);
  const size_t F = static_cast<size_t>(config_.unit_feature_dim);
  const size_t Q = static_cast<size_t>(config_.grouper_hidden);
  const size_t G = static_cast<size_t>(config_.num_groups);
  DPLACE_CHECK(features.size() == U * F);
  const double* theta = theta_.data();
  pass.pre.assign(U * Q, 0.0);
  add_product(features.data(), theta + layout_.g_w1, pass.pre.data(), U, F, Q);
  dense::add_bias(theta + layout_.g_b1, pass.pre.data(), U, Q);
  pass.hidden.resize(U * Q);
  for (size_t i = 0; i < U * Q; ++i) pass.hidden[i] = std::max(0.0, pass.pre[i]);
  std::vector<double> logits(U * G, 0.0);
  add_product(pass.hidden.data(), theta + layout_.g_w2, logits.data(), U, Q, G);
  dense::add_bias(theta + layout_.g_b2, logits.data(), U, G);
  if (!prior.empty()) {
    DPLACE_CHECK(prior.size() == U * G);
    for (size_t i = 0; i < U * G; ++i) logits[i] += prior[i];
  }
  pass.probs.assign(U * G, 0.0);
  pass.log_probs.assign(U * G, 0.0);
  const std::vector<uint8_t> every(G, 1);
  double entropy_sum = 0;
  for (size_t u = 0; u < U; ++u) {
    entropy_sum += dense::masked_softmax(std::span(logits).subspan(u * G, G), every,
                                         std::span(pass.probs).subspan(u * G, G),
                                         std::span(pass.log_probs).subspan(u * G, G));
  }
  pass.mean_entropy = entropy_sum / static_cast<double>(U);
}

double Network::grouper_backward(std::span<const double> features, const GrouperPass& pass,
                                 std::span<const uint32_t> groupings,
                                 std::span<const double> advantages, double entropy_weight,
                                 std::span<double> grad) const {
  const size_t U = static_cast<size_t>(config_.num_units);
  const size_t F = static_cast<size_t>(config_.unit_feature_dim);
  const size_t Q = static_cast<size_t>(config_.grouper_hidden);
  const size_t G = static_cast<size_t>(config_.num_groups);
  const size_t K = advantages.size();
  DPLACE_CHECK(K > 0 && groupings.size() == K * U && grad.size() == theta_.size());
  const double* theta = theta_.data();
  double* g = grad.data();
  // d loss / d logits: the policy-gradient term per sample, then the entropy bonus.
  std::vector<double> d_logits(U * G, 0.0);
  double loss = 0;
  for (size_t k = 0; k < K; ++k) {
    const double a = advantages[k] / static_cast<double>(K);
    for (size_t u = 0; u < U; ++u) {
      const size_t chosen = groupings[k * U + u];
      loss -= a * pass.log_probs[u * G + chosen];
      d_logits[u * G + chosen] -= a;
      for (size_t j = 0; j < G; ++j) d_logits[u * G + j] += a * pass.probs[u * G + j];
    }
  }
  const double beta = entropy_weight / static_cast<double>(U);
  for (size_t u = 0; u < U; ++u) {
    double entropy = 0;
    for (size_t j = 0; j < G; ++j) entropy -= pass.probs[u * G + j] * pass.log_probs[u * G + j];
    loss -= beta * entropy;
    for (size_t j = 0; j < G; ++j) {
      const double p = pass.probs[u * G + j];
      d_logits[u * G + j] += beta * p * (pass.log_probs[u * G + j] + entropy);
    }
  }
  add_product_tn(pass.hidden.data(), d_logits.data(), g + layout_.g_w2, U, Q, G);
  add_column_sums(d_logits.data(), g + layout_.g_b2, U, G);
  std::vector<double> d_hidden(U * Q, 0.0);
  add_product(d_logits.data(), dense::transposed(theta + layout_.g_w2, Q, G).data(),
              d_hidden.data(), U, G, Q);
  for (size_t i = 0; i < U * Q; ++i)
    if (pass.pre[i] <= 0) d_hidden[i] = 0;
  add_product_tn(features.data(), d_hidden.data(), g + layout_.g_w1, U, F, Q);
  add_column_sums(d_hidden.data(), g + layout_.g_b1, U, Q);
  return loss;
}

void Network::placer_forward(std::span<const double> uniforms, std::span<const uint32_t> forced,
                             PlacerPass& pass) const {
  const size_t G = static_cast<size_t>(config_.num_groups);
  const size_t D = static_cast<size_t>(config_.num_devices);
  const size_t H = static_cast<size_t>(config_.hidden);
  const size_t n = H / 2;
  DPLACE_CHECK(pass.x.size() == G && pass.allowed.size() == G * D);
  DPLACE_CHECK(forced.empty() || forced.size() == G);
  DPLACE_CHECK(uniforms.empty() || uniforms.size() == G);
  const double* theta = theta_.data();
  const std::vector<double> zeros(4 * H, 0.0);

  // Encoder: both directions.
  pass.enc.assign(G * H, 0.0);
  std::vector<double> z(4 * H);
  for (int r = 0; r < 2; ++r) {
    pass.enc_gates[r].assign(G * 4 * n, 0.0);
    pass.enc_c[r].assign(G * n, 0.0);
    pass.enc_h[r].assign(G * n, 0.0);
    for (size_t i = 0; i < G; ++i) {
      const size_t group = r == 0 ? i : G - 1 - i;
      const double* h_prev = i > 0 ? pass.enc_h[r].data() + (i - 1) * n : zeros.data();
      const double* c_prev = i > 0 ? pass.enc_c[r].data() + (i - 1) * n : zeros.data();
      std::copy_n(theta + layout_.enc_b[r], 4 * n, z.begin());
      add_sparse_product(pass.x[group], theta + layout_.enc_wx[r], z.data(), 4 * n);
      add_product(h_prev, theta + layout_.enc_wh[r], z.data(), 1, n, 4 * n);
      double* h = pass.enc_h[r].data() + i * n;
      lstm_forward(z.data(), c_prev, pass.enc_gates[r].data() + i * 4 * n,
                   pass.enc_c[r].data() + i * n, h, n);
      std::copy_n(h, n, pass.enc.begin() + static_cast<ptrdiff_t>(group * H + r * n));
    }
  }
  pass.mem.assign(G * H, 0.0);
  add_product(pass.enc.data(), theta + layout_.w_a1, pass.mem.data(), G, H, H);

  // Decoder.
  std::vector<double> s0(H), c0(H);
  for (int r = 0; r < 2; ++r) {
    std::copy_n(pass.enc_h[r].begin() + static_cast<ptrdiff_t>((G - 1) * n), n,
                s0.begin() + r * static_cast<ptrdiff_t>(n));
    std::copy_n(pass.enc_c[r].begin() + static_cast<ptrdiff_t>((G - 1) * n), n,
                c0.begin() + r * static_cast<ptrdiff_t>(n));
  }
  pass.dec_gates.assign(G * 4 * H, 0.0);
  pass.dec_c.assign(G * H, 0.0);
  pass.dec_s.assign(G * H, 0.0);
  pass.query.assign(G * H, 0.0);
  pass.alpha.assign(G * G, 0.0);
  std::vector<double> e(G * H);  // tanh(q_t + mem_g); placer_backward computes it again
  pass.context.assign(G * H, 0.0);
  pass.probs.assign(G * D, 0.0);
  pass.log_probs.assign(G * D, 0.0);
  pass.devices.assign(G, 0);
  pass.log_prob = 0;
  double entropy_sum = 0;
  const double* v = theta + layout_.v;
  std::vector<double> joined(2 * H), logits(D);
  for (size_t t = 0; t < G; ++t) {
    const double* y =
        t == 0 ? theta + layout_.start : theta + layout_.device_embedding + pass.devices[t - 1] * H;
    const double* s_prev = t == 0 ? s0.data() : pass.dec_s.data() + (t - 1) * H;
    const double* c_prev = t == 0 ? c0.data() : pass.dec_c.data() + (t - 1) * H;
    std::copy_n(theta + layout_.dec_b, 4 * H, z.begin());
    add_product(y, theta + layout_.dec_wy, z.data(), 1, H, 4 * H);
    add_product(s_prev, theta + layout_.dec_ws, z.data(), 1, H, 4 * H);
    double* s = pass.dec_s.data() + t * H;
    lstm_forward(z.data(), c_prev, pass.dec_gates.data() + t * 4 * H, pass.dec_c.data() + t * H, s,
                 H);
    double* q = pass.query.data() + t * H;
    add_product(s, theta + layout_.w_a2, q, 1, H, H);
    double* alpha = pass.alpha.data() + t * G;
    double top = -INFINITY;
    for (size_t g = 0; g < G; ++g) {
      const double* mem = pass.mem.data() + g * H;
      for (size_t j = 0; j < H; ++j) e[g * H + j] = q[j] + mem[j];
    }
    dense::tanh_of(e.data(), e.data(), G * H);
    for (size_t g = 0; g < G; ++g) {
      const double* e_g = e.data() + g * H;
      double score = 0;
      for (size_t j = 0; j < H; ++j) score += v[j] * e_g[j];
      alpha[g] = score;
      top = std::max(top, score);
    }
    double sum = 0;
    for (size_t g = 0; g < G; ++g) sum += alpha[g] = std::exp(alpha[g] - top);
    for (size_t g = 0; g < G; ++g) alpha[g] /= sum;
    double* context = pass.context.data() + t * H;
    add_product(alpha, pass.mem.data(), context, 1, G, H);
    std::copy_n(s, H, joined.begin());
    std::copy_n(context, H, joined.begin() + static_cast<ptrdiff_t>(H));
    std::copy_n(theta + layout_.b_o, D, logits.begin());
    add_product(joined.data(), theta + layout_.w_o, logits.data(), 1, 2 * H, D);
    const std::span<const uint8_t> allowed = std::span(pass.allowed).subspan(t * D, D);
    const std::span<double> probs = std::span(pass.probs).subspan(t * D, D);
    entropy_sum +=
        dense::masked_softmax(logits, allowed, probs, std::span(pass.log_probs).subspan(t * D, D));
    size_t device = D;
    if (!forced.empty()) {
      device = forced[t];
      DPLACE_CHECK(device < D && allowed[device]) << "forced device not allowed";
    } else if (!uniforms.empty()) {
      device = dense::sample_index(probs, allowed, uniforms[t]);
    } else {
      for (size_t d = 0; d < D; ++d)
        if (allowed[d] && (device == D || probs[d] > probs[device])) device = d;
    }
    pass.devices[t] = static_cast<uint32_t>(device);
    pass.log_prob += pass.log_probs[t * D + device];
  }
  pass.mean_entropy = entropy_sum / static_cast<double>(G);
}

double Network::placer_backward(const PlacerPass& pass, double advantage, double scale,
                                double entropy_weight, std::span<double> grad) const {
  const size_t G = static_cast<size_t>(config_.num_groups);
  const size_t D = static_cast<size_t>(config_.num_devices);
  const size_t H = static_cast<size_t>(config_.hidden);
  const size_t n = H / 2;
  DPLACE_CHECK(grad.size() == theta_.size() && pass.devices.size() == G);
  const double* theta = theta_.data();
  double* gr = grad.data();
  const double* v = theta + layout_.v;
  const double a = advantage * scale;
  const double beta = entropy_weight * scale / static_cast<double>(G);
  const double loss = -a * pass.log_prob - entropy_weight * scale * pass.mean_entropy;

  std::vector<double> d_mem(G * H, 0.0);
  std::vector<double> d_s_next(H, 0.0), d_c(H, 0.0);  // from step t + 1
  std::vector<double> d_logits(D), d_joined(2 * H), d_s(H), d_alpha(G), d_q(H), d_z(4 * H),
      e(G * H);
  std::vector<double> s0(H), c0(H);
  for (int r = 0; r < 2; ++r) {
    std::copy_n(pass.enc_h[r].begin() + static_cast<ptrdiff_t>((G - 1) * n), n,
                s0.begin() + r * static_cast<ptrdiff_t>(n));
    std::copy_n(pass.enc_c[r].begin() + static_cast<ptrdiff_t>((G - 1) * n), n,
                c0.begin() + r * static_cast<ptrdiff_t>(n));
  }
  // Transposed weights for the products that carry gradients back through them (dense.h).
  const std::vector<double> w_a2_t = dense::transposed(theta + layout_.w_a2, H, H);
  const std::vector<double> dec_wy_t = dense::transposed(theta + layout_.dec_wy, H, 4 * H);
  const std::vector<double> dec_ws_t = dense::transposed(theta + layout_.dec_ws, H, 4 * H);
  std::vector<double> joined(2 * H);
  for (size_t t = G; t-- > 0;) {
    // Output layer.
    const double* probs = pass.probs.data() + t * D;
    const double* log_probs = pass.log_probs.data() + t * D;
    double entropy = 0;
    for (size_t d = 0; d < D; ++d) entropy -= probs[d] * log_probs[d];
    for (size_t d = 0; d < D; ++d) {
      d_logits[d] =
          pass.allowed[t * D + d] ? a * probs[d] + beta * probs[d] * (log_probs[d] + entropy) : 0.0;
    }
    d_logits[pass.devices[t]] -= a;
    const double* s = pass.dec_s.data() + t * H;
    const double* context = pass.context.data() + t * H;
    std::copy_n(s, H, joined.begin());
    std::copy_n(context, H, joined.begin() + static_cast<ptrdiff_t>(H));
    add_product_tn(joined.data(), d_logits.data(), gr + layout_.w_o, 1, 2 * H, D);
    for (size_t d = 0; d < D; ++d) gr[layout_.b_o + d] += d_logits[d];
    std::fill(d_joined.begin(), d_joined.end(), 0.0);
    add_product_nt(d_logits.data(), theta + layout_.w_o, d_joined.data(), 1, D, 2 * H);
    for (size_t j = 0; j < H; ++j) d_s[j] = d_joined[j] + d_s_next[j];
    const double* d_context = d_joined.data() + H;

    // Attention.
    const double* alpha = pass.alpha.data() + t * G;
    double weighted = 0;
    for (size_t g = 0; g < G; ++g) {
      const double* mem = pass.mem.data() + g * H;
      double dot = 0;
      for (size_t j = 0; j < H; ++j) dot += d_context[j] * mem[j];
      d_alpha[g] = dot;
      weighted += alpha[g] * dot;
      double* dm = d_mem.data() + g * H;
      for (size_t j = 0; j < H; ++j) dm[j] += alpha[g] * d_context[j];
    }
    std::fill(d_q.begin(), d_q.end(), 0.0);
    const double* q = pass.query.data() + t * H;
    for (size_t g = 0; g < G; ++g) {
      const double* mem = pass.mem.data() + g * H;
      for (size_t j = 0; j < H; ++j) e[g * H + j] = q[j] + mem[j];
    }
    dense::tanh_of(e.data(), e.data(), G * H);  // as placer_forward computed it
    for (size_t g = 0; g < G; ++g) {
      const double d_score = alpha[g] * (d_alpha[g] - weighted);
      const double* e_g = e.data() + g * H;
      double* dm = d_mem.data() + g * H;
      for (size_t j = 0; j < H; ++j) {
        const double ej = e_g[j];
        gr[layout_.v + j] += d_score * ej;
        const double d_pre = d_score * v[j] * (1 - ej * ej);
        d_q[j] += d_pre;
        dm[j] += d_pre;
      }
    }
    add_product_tn(s, d_q.data(), gr + layout_.w_a2, 1, H, H);
    add_product(d_q.data(), w_a2_t.data(), d_s.data(), 1, H, H);

    // Decoder LSTM.
    const double* s_prev = t == 0 ? s0.data() : pass.dec_s.data() + (t - 1) * H;
    const double* c_prev = t == 0 ? c0.data() : pass.dec_c.data() + (t - 1) * H;
    lstm_backward(pass.dec_gates.data() + t * 4 * H, c_prev, pass.dec_c.data() + t * H, d_s.data(),
                  d_c.data(), d_z.data(), H);
    const double* y =
        t == 0 ? theta + layout_.start : theta + layout_.device_embedding + pass.devices[t - 1] * H;
    add_product_tn(y, d_z.data(), gr + layout_.dec_wy, 1, H, 4 * H);
    add_product_tn(s_prev, d_z.data(), gr + layout_.dec_ws, 1, H, 4 * H);
    for (size_t j = 0; j < 4 * H; ++j) gr[layout_.dec_b + j] += d_z[j];
    double* d_y_out =
        t == 0 ? gr + layout_.start : gr + layout_.device_embedding + pass.devices[t - 1] * H;
    add_product(d_z.data(), dec_wy_t.data(), d_y_out, 1, 4 * H, H);
    std::fill(d_s_next.begin(), d_s_next.end(), 0.0);
    add_product(d_z.data(), dec_ws_t.data(), d_s_next.data(), 1, 4 * H, H);
  }
  // d_s_next and d_c now hold the gradient of the decoder's initial state.

  // Attention memory.
  add_product_tn(pass.enc.data(), d_mem.data(), gr + layout_.w_a1, G, H, H);
  std::vector<double> d_enc(G * H, 0.0);
  add_product(d_mem.data(), dense::transposed(theta + layout_.w_a1, H, H).data(), d_enc.data(), G,
              H, H);

  // Encoder, each direction backwards through its steps.
  const std::vector<double> zeros(n, 0.0);
  std::vector<double> d_h(n), d_h_next(n), d_c_enc(n), d_z_enc(4 * n);
  for (int r = 0; r < 2; ++r) {
    const std::vector<double> wh_t = dense::transposed(theta + layout_.enc_wh[r], n, 4 * n);
    std::copy_n(d_s_next.begin() + r * static_cast<ptrdiff_t>(n), n, d_h_next.begin());
    std::copy_n(d_c.begin() + r * static_cast<ptrdiff_t>(n), n, d_c_enc.begin());
    for (size_t i = G; i-- > 0;) {
      const size_t group = r == 0 ? i : G - 1 - i;
      for (size_t j = 0; j < n; ++j) d_h[j] = d_enc[group * H + r * n + j] + d_h_next[j];
      const double* h_prev = i > 0 ? pass.enc_h[r].data() + (i - 1) * n : zeros.data();
      const double* c_prev = i > 0 ? pass.enc_c[r].data() + (i - 1) * n : zeros.data();
      lstm_backward(pass.enc_gates[r].data() + i * 4 * n, c_prev, pass.enc_c[r].data() + i * n,
                    d_h.data(), d_c_enc.data(), d_z_enc.data(), n);
      const SparseRow& x = pass.x[group];
      for (size_t e2 = 0; e2 < x.columns.size(); ++e2) {
        double* gw = gr + layout_.enc_wx[r] + static_cast<size_t>(x.columns[e2]) * 4 * n;
        for (size_t j = 0; j < 4 * n; ++j) gw[j] += x.values[e2] * d_z_enc[j];
      }
      add_product_tn(h_prev, d_z_enc.data(), gr + layout_.enc_wh[r], 1, n, 4 * n);
      for (size_t j = 0; j < 4 * n; ++j) gr[layout_.enc_b[r] + j] += d_z_enc[j];
      std::fill(d_h_next.begin(), d_h_next.end(), 0.0);
      add_product(d_z_enc.data(), wh_t.data(), d_h_next.data(), 1, 4 * n, n);
    }
  }
  return loss;
}

void Network::adam_step(std::span<double> grad, double learning_rate, double max_norm) {
  DPLACE_CHECK(grad.size() == theta_.size());
  double norm = 0;
  for (double g : grad) norm += g * g;
  norm = std::sqrt(norm);
  if (max_norm > 0 && norm > max_norm) {
    for (double& g : grad) g *= max_norm / norm;
  }
  adam_.step(theta_, grad, learning_rate);
}

}  // namespace dplace::hierarchical
