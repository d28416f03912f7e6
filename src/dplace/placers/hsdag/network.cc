#include "dplace/placers/hsdag/network.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

#include "dplace/core/error.h"
#include "dplace/placers/learning/dense.h"

namespace dplace::hsdag {
namespace {

using dense::add_bias;
using dense::add_column_sums;
using dense::add_product;
using dense::add_product_nt;
using dense::add_product_tn;
using dense::sigmoid;

uint32_t find_root(std::vector<uint32_t>& parent, uint32_t u) {
  while (parent[u] != u) u = parent[u] = parent[parent[u]];
  return u;
}

}  // namespace

Network::Network(const CoarseGraph& graph, const NetworkConfig& config, Rng& rng)
    : graph_(graph), config_(config) {
  const size_t N = static_cast<size_t>(graph.num_nodes);
  const size_t F = static_cast<size_t>(graph.feature_dim);
  const size_t D = static_cast<size_t>(graph.num_devices);
  const size_t H = static_cast<size_t>(config.hidden);
  const size_t L = static_cast<size_t>(config.gnn_layers);
  DPLACE_CHECK(N > 0 && F > 0 && D > 0 && H > 0);
  DPLACE_CHECK(graph.features.size() == N * F && graph.allowed.size() == N * D &&
               graph.allowed_class.size() == N);
  // Parsing merges nodes by class and gives a cluster its first node's devices: a class must be
  // one set of devices, and one set of devices one class.
  std::map<std::string, uint32_t> class_of_row;  // a row's bytes as the key
  std::map<uint32_t, std::string> row_of_class;
  for (size_t u = 0; u < N; ++u) {
    const std::string row(reinterpret_cast<const char*>(graph.allowed.data() + u * D), D);
    DPLACE_CHECK(std::count(row.begin(), row.end(), 1) > 0) << "node " << u << " may use no device";
    const uint32_t c = graph.allowed_class[u];
    DPLACE_CHECK(class_of_row.try_emplace(row, c).first->second == c &&
                 row_of_class.try_emplace(c, row).first->second == row)
        << "node " << u << ": its allowed class and its devices disagree with an earlier node's";
  }

  size_t next = 0;
  auto take = [&](size_t n) {
    const size_t at = next;
    next += n;
    return at;
  };
  layout_.w_in = take(F * H);
  layout_.b_in = take(H);
  for (size_t l = 0; l < L; ++l) {
    layout_.w_gnn.push_back(take(H * H));
    layout_.b_gnn.push_back(take(H));
  }
  layout_.w_score = take(H);
  layout_.b_score = take(1);
  layout_.w1 = take(H * H);
  layout_.b1 = take(H);
  layout_.w2 = take(H * D);
  layout_.b2 = take(D);
  layout_.total = next;
  theta_.assign(next, 0.0);
  adam_ = dense::Adam(next);
  auto glorot = [&](size_t at, size_t fan_in, size_t fan_out) {
    dense::glorot_uniform(std::span(theta_).subspan(at, fan_in * fan_out), fan_in, fan_out,
                          config.init_scale, rng);
  };
  // Biases as PyTorch's linear layers start them: uniform in +-1/sqrt(fan_in). (At zero, a node
  // whose standardised features are all 0, e.g. the only node of a graph, reached the output
  // layer as zeros, and so did any input that closed every ReLU.)
  auto bias = [&](size_t at, size_t fan_in, size_t n) {
    dense::linear_bias(std::span(theta_).subspan(at, n), fan_in, config.init_scale, rng);
  };
  glorot(layout_.w_in, F, H);
  bias(layout_.b_in, F, H);
  for (size_t l = 0; l < L; ++l) {
    glorot(layout_.w_gnn[l], H, H);
    bias(layout_.b_gnn[l], H, H);
  }
  glorot(layout_.w_score, H, 1);
  bias(layout_.b_score, H, 1);
  glorot(layout_.w1, H, H);
  bias(layout_.b1, H, H);
  glorot(layout_.w2, H, D);
  bias(layout_.b2, H, D);

  std::vector<std::vector<uint32_t>> neighbours(N);
  parse_edges_.assign(N, {});
  for (size_t e = 0; e < graph.edges.size(); ++e) {
    const CoarseEdge& edge = graph.edges[e];
    DPLACE_CHECK(edge.u < edge.v && edge.v < N);
    neighbours[edge.u].push_back(edge.v);
    neighbours[edge.v].push_back(edge.u);
    if (graph.allowed_class[edge.u] == graph.allowed_class[edge.v]) {
      parse_edges_[edge.u].push_back(static_cast<uint32_t>(e));
      parse_edges_[edge.v].push_back(static_cast<uint32_t>(e));
    }
  }
  row_start_.push_back(0);
  for (size_t u = 0; u < N; ++u) {
    const double du = 1.0 + static_cast<double>(neighbours[u].size());
    column_.push_back(static_cast<uint32_t>(u));
    weight_.push_back(1.0 / du);
    for (uint32_t v : neighbours[u]) {
      const double dv = 1.0 + static_cast<double>(neighbours[v].size());
      column_.push_back(v);
      weight_.push_back(1.0 / std::sqrt(du * dv));
    }
    row_start_.push_back(static_cast<uint32_t>(column_.size()));
  }
}

void Network::parse(ForwardPass& pass) const {
  const size_t N = static_cast<size_t>(graph_.num_nodes);
  std::vector<uint32_t> parent(N);
  std::iota(parent.begin(), parent.end(), 0u);
  std::vector<uint8_t> dominant(graph_.edges.size(), 0);
  if (config_.parse) {
    for (size_t u = 0; u < N; ++u) {
      int64_t best = -1;
      for (uint32_t e : parse_edges_[u]) {
        if (best < 0 || pass.edge_scores[e] > pass.edge_scores[static_cast<size_t>(best)]) {
          best = e;
        }
      }
      if (best < 0) continue;
      const CoarseEdge& edge = graph_.edges[static_cast<size_t>(best)];
      dominant[static_cast<size_t>(best)] = 1;
      const uint32_t a = find_root(parent, edge.u), b = find_root(parent, edge.v);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  }
  constexpr uint32_t kNone = ~0u;
  std::vector<uint32_t> id_of_root(N, kNone);
  pass.cluster_of_node.assign(N, 0);
  pass.members.clear();
  for (size_t u = 0; u < N; ++u) {
    const uint32_t r = find_root(parent, static_cast<uint32_t>(u));
    if (id_of_root[r] == kNone) {
      id_of_root[r] = static_cast<uint32_t>(pass.members.size());
      pass.members.emplace_back();
    }
    pass.cluster_of_node[u] = id_of_root[r];
    pass.members[id_of_root[r]].push_back(static_cast<uint32_t>(u));
  }
  pass.num_clusters = static_cast<int>(pass.members.size());
  pass.cluster_edges.assign(pass.members.size(), {});
  for (size_t e = 0; e < graph_.edges.size(); ++e) {
    if (dominant[e]) {
      pass.cluster_edges[pass.cluster_of_node[graph_.edges[e].u]].push_back(
          static_cast<uint32_t>(e));
    }
  }
}

void Network::forward(ForwardPass& pass) const {
  const size_t N = static_cast<size_t>(graph_.num_nodes);
  const size_t F = static_cast<size_t>(graph_.feature_dim);
  const size_t D = static_cast<size_t>(graph_.num_devices);
  const size_t H = static_cast<size_t>(config_.hidden);
  const size_t L = static_cast<size_t>(config_.gnn_layers);
  const double* theta = theta_.data();

  pass.pre_in.assign(N * H, 0.0);
  add_product(graph_.features.data(), theta + layout_.w_in, pass.pre_in.data(), N, F, H);
  add_bias(theta + layout_.b_in, pass.pre_in.data(), N, H);
  pass.h.assign(L + 1, std::vector<double>(N * H, 0.0));
  for (size_t i = 0; i < N * H; ++i) pass.h[0][i] = std::max(0.0, pass.pre_in[i]);
  pass.aggregated.assign(L, std::vector<double>(N * H, 0.0));
  pass.pre.assign(L, std::vector<double>(N * H, 0.0));
  for (size_t l = 0; l < L; ++l) {
    const std::vector<double>& in = pass.h[l];
    std::vector<double>& agg = pass.aggregated[l];
    for (size_t u = 0; u < N; ++u) {
      for (uint32_t k = row_start_[u]; k < row_start_[u + 1]; ++k) {
        const double w = weight_[k];
        const double* hv = in.data() + static_cast<size_t>(column_[k]) * H;
        for (size_t j = 0; j < H; ++j) agg[u * H + j] += w * hv[j];
      }
    }
    add_product(agg.data(), theta + layout_.w_gnn[l], pass.pre[l].data(), N, H, H);
    add_bias(theta + layout_.b_gnn[l], pass.pre[l].data(), N, H);
    for (size_t i = 0; i < N * H; ++i) pass.h[l + 1][i] = in[i] + std::max(0.0, pass.pre[l][i]);
  }
  const std::vector<double>& out = pass.h[L];

  const double* w_score = theta + layout_.w_score;
  pass.edge_scores.resize(graph_.edges.size());
  for (size_t e = 0; e < graph_.edges.size(); ++e) {
    const double* hu = out.data() + static_cast<size_t>(graph_.edges[e].u) * H;
    const double* hv = out.data() + static_cast<size_t>(graph_.edges[e].v) * H;
    double t = theta[layout_.b_score];
    for (size_t j = 0; j < H; ++j) t += w_score[j] * hu[j] * hv[j];
    pass.edge_scores[e] = sigmoid(t);
  }
  parse(pass);

  const size_t C = static_cast<size_t>(pass.num_clusters);
  pass.sbar.assign(C, 1.0);
  pass.mean_h.assign(C * H, 0.0);
  pass.g.assign(C * H, 0.0);
  pass.allowed.assign(C * D, 0);
  for (size_t k = 0; k < C; ++k) {
    const std::vector<uint32_t>& members = pass.members[k];
    for (uint32_t u : members)
      for (size_t j = 0; j < H; ++j) pass.mean_h[k * H + j] += out[u * H + j];
    for (size_t j = 0; j < H; ++j) pass.mean_h[k * H + j] /= static_cast<double>(members.size());
    if (!pass.cluster_edges[k].empty()) {
      double sum = 0;
      for (uint32_t e : pass.cluster_edges[k]) sum += pass.edge_scores[e];
      pass.sbar[k] = sum / static_cast<double>(pass.cluster_edges[k].size());
    }
    const double scale = 1 + pass.sbar[k];
    for (size_t j = 0; j < H; ++j) pass.g[k * H + j] = scale * pass.mean_h[k * H + j];
    // Parsing merges only nodes of one allowed class: any member speaks for all.
    std::copy_n(graph_.allowed.begin() + static_cast<ptrdiff_t>(members.front() * D), D,
                pass.allowed.begin() + static_cast<ptrdiff_t>(k * D));
  }
  pass.pre_z.assign(C * H, 0.0);
  add_product(pass.g.data(), theta + layout_.w1, pass.pre_z.data(), C, H, H);
  add_bias(theta + layout_.b1, pass.pre_z.data(), C, H);
  pass.z.resize(C * H);
  for (size_t i = 0; i < C * H; ++i) pass.z[i] = std::max(0.0, pass.pre_z[i]);
  std::vector<double> logits(C * D, 0.0);
  add_product(pass.z.data(), theta + layout_.w2, logits.data(), C, H, D);
  add_bias(theta + layout_.b2, logits.data(), C, D);

  pass.probs.assign(C * D, 0.0);
  pass.log_probs.assign(C * D, 0.0);
  double entropy_sum = 0;
  for (size_t k = 0; k < C; ++k) {
    entropy_sum += dense::masked_softmax(
        std::span(logits).subspan(k * D, D), std::span(pass.allowed).subspan(k * D, D),
        std::span(pass.probs).subspan(k * D, D), std::span(pass.log_probs).subspan(k * D, D));
  }
  pass.mean_entropy = entropy_sum / static_cast<double>(std::max<size_t>(C, 1));
}

double Network::backward(const ForwardPass& pass, const std::vector<std::vector<uint32_t>>& actions,
                         const std::vector<double>& advantages, double entropy_weight,
                         std::vector<double>& grad) const {
  const size_t N = static_cast<size_t>(graph_.num_nodes);
  const size_t F = static_cast<size_t>(graph_.feature_dim);
  const size_t D = static_cast<size_t>(graph_.num_devices);
  const size_t H = static_cast<size_t>(config_.hidden);
  const size_t L = static_cast<size_t>(config_.gnn_layers);
  const size_t C = static_cast<size_t>(pass.num_clusters);
  const double K = static_cast<double>(actions.size());
  DPLACE_CHECK(actions.size() == advantages.size() && !actions.empty());
  const double* theta = theta_.data();
  grad.assign(theta_.size(), 0.0);

  // The loss and dL/dlogits.
  std::vector<double> d_logits(C * D, 0.0);
  double loss = 0, advantage_sum = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    DPLACE_CHECK(actions[i].size() == C);
    advantage_sum += advantages[i];
    for (size_t k = 0; k < C; ++k) {
      DPLACE_CHECK(actions[i][k] < D);
      const size_t at = k * D + actions[i][k];
      DPLACE_CHECK(pass.allowed[at]);
      loss -= advantages[i] * pass.log_probs[at] / K;
      d_logits[at] -= advantages[i] / K;
    }
  }
  for (size_t k = 0; k < C; ++k) {
    double entropy = 0;
    for (size_t d = 0; d < D; ++d) entropy -= pass.probs[k * D + d] * pass.log_probs[k * D + d];
    loss -= entropy_weight * entropy / static_cast<double>(C);
    for (size_t d = 0; d < D; ++d) {
      if (!pass.allowed[k * D + d]) continue;
      const double p = pass.probs[k * D + d];
      d_logits[k * D + d] += advantage_sum / K * p;
      d_logits[k * D + d] +=
          entropy_weight / static_cast<double>(C) * p * (pass.log_probs[k * D + d] + entropy);
    }
  }

  // Placer MLP.
  add_product_tn(pass.z.data(), d_logits.data(), grad.data() + layout_.w2, C, H, D);
  add_column_sums(d_logits.data(), grad.data() + layout_.b2, C, D);
  std::vector<double> d_pre_z(C * H, 0.0);
  add_product_nt(d_logits.data(), theta + layout_.w2, d_pre_z.data(), C, D, H);
  for (size_t i = 0; i < C * H; ++i)
    if (pass.pre_z[i] <= 0) d_pre_z[i] = 0;
  add_product_tn(pass.g.data(), d_pre_z.data(), grad.data() + layout_.w1, C, H, H);
  add_column_sums(d_pre_z.data(), grad.data() + layout_.b1, C, H);
  std::vector<double> d_g(C * H, 0.0);
  add_product_nt(d_pre_z.data(), theta + layout_.w1, d_g.data(), C, H, H);

  // Cluster embeddings and edge scores, back to the last layer's node embeddings.
  const std::vector<double>& out = pass.h[L];
  std::vector<double> d_h(N * H, 0.0);
  const double* w_score = theta + layout_.w_score;
  for (size_t k = 0; k < C; ++k) {
    const std::vector<uint32_t>& members = pass.members[k];
    double d_sbar = 0;
    for (size_t j = 0; j < H; ++j) d_sbar += d_g[k * H + j] * pass.mean_h[k * H + j];
    const double scale = (1 + pass.sbar[k]) / static_cast<double>(members.size());
    for (uint32_t u : members)
      for (size_t j = 0; j < H; ++j) d_h[u * H + j] += scale * d_g[k * H + j];
    const std::vector<uint32_t>& edges = pass.cluster_edges[k];
    for (uint32_t e : edges) {
      const double s = pass.edge_scores[e];
      const double d_t = d_sbar / static_cast<double>(edges.size()) * s * (1 - s);
      const size_t u = graph_.edges[e].u, v = graph_.edges[e].v;
      grad[layout_.b_score] += d_t;
      for (size_t j = 0; j < H; ++j) {
        grad[layout_.w_score + j] += d_t * out[u * H + j] * out[v * H + j];
        d_h[u * H + j] += d_t * w_score[j] * out[v * H + j];
        d_h[v * H + j] += d_t * w_score[j] * out[u * H + j];
      }
    }
  }

  // Graph convolutions, last first: h_l = h_{l-1} + relu(A h_{l-1} W_l + b_l).
  for (size_t l = L; l-- > 0;) {
    std::vector<double> d_pre = d_h;
    for (size_t i = 0; i < N * H; ++i)
      if (pass.pre[l][i] <= 0) d_pre[i] = 0;
    add_product_tn(pass.aggregated[l].data(), d_pre.data(), grad.data() + layout_.w_gnn[l], N, H,
                   H);
    add_column_sums(d_pre.data(), grad.data() + layout_.b_gnn[l], N, H);
    std::vector<double> d_agg(N * H, 0.0);
    add_product_nt(d_pre.data(), theta + layout_.w_gnn[l], d_agg.data(), N, H, H);
    // A is symmetric: d h_{l-1}[u] += sum over v of A[u][v] d_agg[v].
    for (size_t u = 0; u < N; ++u) {
      for (uint32_t k = row_start_[u]; k < row_start_[u + 1]; ++k) {
        const double w = weight_[k];
        const double* dv = d_agg.data() + static_cast<size_t>(column_[k]) * H;
        for (size_t j = 0; j < H; ++j) d_h[u * H + j] += w * dv[j];
      }
    }
  }

  // Input transform.
  for (size_t i = 0; i < N * H; ++i)
    if (pass.pre_in[i] <= 0) d_h[i] = 0;
  add_product_tn(graph_.features.data(), d_h.data(), grad.data() + layout_.w_in, N, F, H);
  add_column_sums(d_h.data(), grad.data() + layout_.b_in, N, H);
  return loss;
}

void Network::adam_step(const std::vector<double>& grad, double learning_rate) {
  adam_.step(theta_, grad, learning_rate);
}

}  // namespace dplace::hsdag
