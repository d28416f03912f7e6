// The policy of the hierarchical planner: Mirhoseini, Goldie, Pham, Steiner, Le and Dean, "A
// Hierarchical Model for Device Placement" (ICLR 2018). Two networks trained jointly: a grouper
// that assigns each unit of the graph (a colocation group of ops) to one of G groups, and a
// sequence-to-sequence placer that reads the G group embeddings and emits one device per group.
// Written out by hand (no LibTorch), forward and backward, in double precision. Sizes: U units, F
// unit features, Q grouper hidden units, G groups, E group-embedding width, H placer width (each
// encoder direction H/2), D devices.
//
// Grouper (once per update; its input does not change):
//   a = relu(X W_g1 + b_g1) (U x Q);  p_u = softmax(a_u W_g2 + b_g2 + prior_u) over the G groups,
//   where prior (U x G) is a fixed term given by the caller (not learned; beyond the paper: where
//   the grouping starts, see hierarchical.h), or none.
// A sample draws each unit's group from p_u. Its group embeddings x (G x E, sparse: most of E is
// the group adjacency) are computed from that grouping outside the network (hierarchical.h).
// Placer (per sample):
//   encoder: a bidirectional LSTM over the groups 0..G-1 (forward) and G-1..0 (backward), each
//     of width H/2, reading x_g directly (W_x x_g + W_h h + b, gates i, f, o, g; forget biases
//     start at 1); enc_g = [forward h_g; backward h_g] (H); the decoder starts from the two
//     directions' final (h, c), concatenated;
//   attention (Bahdanau, additive): mem_g = enc_g W_a1; at decoder step t, q_t = s_t W_a2,
//     score_tg = v . tanh(q_t + mem_g), alpha_t = softmax over g, ctx_t = sum_g alpha_tg mem_g;
//   decoder: an LSTM of width H whose input at step t is the embedding of the device chosen at
//     step t - 1 (a learned start embedding at t = 0); logits_t = [s_t; ctx_t] W_o + b_o, softmax
//     over the devices group t may use. Group t's device is drawn from it.
// Loss of one update, K samples k with groupings g_k, devices d_k, advantages A_k, entropy weight
// beta:
//   L = -(1/K) sum_k A_k (sum_u log p_u(g_ku) + sum_t log pi_kt(d_kt))
//       - beta (mean_u entropy(p_u) + (1/K) sum_k mean_t entropy(pi_kt)).
// grouper_backward() and placer_backward() give its gradient (network_test checks every parameter
// against finite differences).
//
// Thread safety: const member functions may run concurrently (one PlacerPass per thread);
// adam_step() and parameters() are used by one thread with no pass running.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dplace/core/rng.h"
#include "dplace/placers/learning/dense.h"

namespace dplace::hierarchical {

struct NetworkConfig {
  int num_units = 0;         // U. REQUIRES: > 0.
  int unit_feature_dim = 0;  // F. REQUIRES: > 0.
  int num_groups = 0;        // G. REQUIRES: > 0.
  int group_embedding = 0;   // E. REQUIRES: > 0.
  int num_devices = 0;       // D. REQUIRES: > 0.
  int grouper_hidden = 64;   // Q. Default: 64 (the paper's).
  int hidden = 64;           // H, even. Default: 64 (the paper: 512).
  double init_scale = 1;     // scale of the Glorot-uniform weights. Default: 1.
};

// One group embedding, sparse: (column, value) pairs, columns ascending and below E.
struct SparseRow {
  std::vector<uint32_t> columns;
  std::vector<double> values;
};

struct GrouperPass {
  std::vector<double> pre;        // U x Q
  std::vector<double> hidden;     // U x Q
  std::vector<double> probs;      // U x G
  std::vector<double> log_probs;  // U x G
  double mean_entropy = 0;        // over units
};

// One sample's placer pass: its inputs, its devices and what placer_backward() needs.
struct PlacerPass {
  std::vector<SparseRow> x;       // G group embeddings
  std::vector<uint8_t> allowed;   // G x D, at least one per group
  std::vector<uint32_t> devices;  // G: the device of each group
  double log_prob = 0;            // sum over t of log pi_t(devices[t])
  double mean_entropy = 0;        // mean over t
  // Encoder, per direction r (0 forward, 1 backward), step i (group i for r = 0, G-1-i for r =
  // 1): gates (G x 2H: i, f, o, g of width H/2, activated), cell and hidden state (G x H/2).
  std::vector<double> enc_gates[2], enc_c[2], enc_h[2];
  std::vector<double> enc;  // G x H
  std::vector<double> mem;  // G x H
  // Decoder, per step t: gates (G x 4H), cell, state, query (G x H), attention (G x G),
  // context (G x H), probabilities and their logs (G x D).
  std::vector<double> dec_gates, dec_c, dec_s, query, alpha, context, probs, log_probs;
};

class Network {
 public:
  // Glorot-uniform weights scaled by init_scale, drawn from rng; the grouper's and the output
  // layer's biases as PyTorch's linear layers start them (learning/dense.h); LSTM biases 0 but the
  // forget gates' 1 (as the paper's code starts them).
  Network(const NetworkConfig& config, Rng& rng);

  const NetworkConfig& config() const { return config_; }
  size_t num_parameters() const { return theta_.size(); }
  // Every weight in one vector, each matrix row-major (input index by output index): W_g1 (F x
  // Q), b_g1 (Q), W_g2 (Q x G), b_g2 (G); per encoder direction W_x (E x 2H), W_h (H/2 x 2H), b
  // (2H); W_a1 (H x H), W_a2 (H x H), v (H); start embedding (H), device embeddings (D x H),
  // decoder W_y (H x 4H), W_s (H x 4H), b (4H); W_o (2H x D), b_o (D).
  std::span<double> parameters() { return theta_; }

  // features: U x F, row-major; prior: U x G, row-major, or empty (none).
  void grouper_forward(std::span<const double> features, std::span<const double> prior,
                       GrouperPass& pass) const;
  // Adds the gradient of the loss's grouper terms to grad (num_parameters()): groupings holds K
  // rows of U groups, advantages K values. Returns those terms' value.
  double grouper_backward(std::span<const double> features, const GrouperPass& pass,
                          std::span<const uint32_t> groupings, std::span<const double> advantages,
                          double entropy_weight, std::span<double> grad) const;

  // Runs the placer on pass.x and pass.allowed (set by the caller). Group t's device is forced[t]
  // when `forced` is given (REQUIRES: allowed); else drawn by inverse-CDF sampling with
  // uniforms[t] when `uniforms` is given (G values in [0, 1)); else the likeliest (greedy
  // decoding; the first of equal ones).
  void placer_forward(std::span<const double> uniforms, std::span<const uint32_t> forced,
                      PlacerPass& pass) const;
  // Adds to grad the gradient of sample k's placer terms, -(advantage / K) log pi(devices) -
  // (beta / K) mean_t entropy(pi_t); `scale` is 1 / K. Returns their value.
  double placer_backward(const PlacerPass& pass, double advantage, double scale,
                         double entropy_weight, std::span<double> grad) const;

  // Scales grad to global norm max_norm when above it (0: never); then one Adam step.
  void adam_step(std::span<double> grad, double learning_rate, double max_norm);

 private:
  struct Layout {
    size_t g_w1, g_b1, g_w2, g_b2;
    size_t enc_wx[2], enc_wh[2], enc_b[2];
    size_t w_a1, w_a2, v;
    size_t start, device_embedding, dec_wy, dec_ws, dec_b;
    size_t w_o, b_o;
  };

  NetworkConfig config_;
  Layout layout_{};
  std::vector<double> theta_;
  dense::Adam adam_{0};
};

}  // namespace dplace::hierarchical
