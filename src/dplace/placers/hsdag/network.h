// The policy network of HSDAG: Duan et al., "A Structure-Aware Framework for Learning Device
// Placements on Computation Graphs" (NeurIPS 2024). It reads a coarse graph (nodes with feature
// vectors and undirected edges), learns node embeddings with a graph neural network, parses the
// graph into clusters whose number it does not fix in advance, and gives each cluster a softmax
// over the devices its nodes may use. Written out by hand (no LibTorch), forward and backward, in
// double precision; sizes: N nodes, F features, H hidden units, D devices, C clusters.
//
// Forward pass, for parameters theta:
//   h0 = relu(X W_in + b_in)                                         input transform (N x H)
//   h_l = h_{l-1} + relu(A h_{l-1} W_l + b_l), l = 1..L              graph convolutions (GCN,
//        A = Deg^-1/2 (adjacency + I) Deg^-1/2 over the undirected edges, Deg the degrees
//        with self-loops; with a residual)
//   s_e = sigmoid(w_s . (h_u * h_v) + b_s) for each edge e = {u, v}  edge scores (* elementwise)
//   parsing (graph parsing network, Song et al. 2024): every node takes its dominant edge, the
//        incident edge of highest score among those to nodes of its allowed-device class (ties:
//        the lower edge index); the clusters are the connected components of the dominant
//        edges (a node with no such edge is a cluster alone); clusters are numbered by their
//        lowest node. With parse off, every node is a cluster.
//   g_k = (1 + sbar_k) * mean over u in k of h_u, sbar_k the mean score of the cluster's
//        dominant edges (1 for a cluster of one node)                 cluster embeddings (C x H)
//   z_k = relu(g_k W_1 + b_1); logits_k = z_k W_2 + b_2               placer MLP
//   p_k = softmax of logits_k over the cluster's allowed devices (0 elsewhere).
// The parsing is piecewise constant in theta; gradients reach the edge scores through sbar_k,
// as the paper's pooling scales a cluster's embedding by its edges' scores. (The paper's factor
// is sbar_k alone; with it, REINFORCE drove every score to 0 on symmetric graphs, every cluster's
// embedding with it, and the distributions stayed uniform: 1 + sbar_k keeps the embedding.)
//
// The loss for K sampled placements a_i (a device per cluster) with advantages A_i and entropy
// weight beta: L = -(1/K) sum_i A_i sum_k log p_k(a_ik) - beta * mean_k entropy(p_k).
// backward() gives dL/dtheta exactly (network_test checks it against finite differences).
//
// Thread safety: a Network is not shared between threads; forward/backward are single-threaded.
#pragma once

#include <cstdint>
#include <vector>

#include "dplace/core/rng.h"
#include "dplace/placers/learning/dense.h"

namespace dplace::hsdag {

struct CoarseEdge {
  uint32_t u = 0;
  uint32_t v = 0;  // u < v
};

// The network's input. REQUIRES (checked by Network's constructor, but edge uniqueness):
// features.size() == num_nodes x feature_dim; allowed.size() == num_nodes x num_devices with at
// least one device per node; two nodes have equal allowed_class exactly when their rows of
// `allowed` are equal; edges unique, u < v < num_nodes.
struct CoarseGraph {
  int num_nodes = 0;
  int feature_dim = 0;
  int num_devices = 0;
  std::vector<double> features;  // row-major, num_nodes x feature_dim
  std::vector<uint8_t> allowed;  // row-major, num_nodes x num_devices
  std::vector<uint32_t> allowed_class;
  std::vector<CoarseEdge> edges;
};

struct NetworkConfig {
  int hidden = 64;        // H. Default: 64.
  int gnn_layers = 2;     // L. Default: 2.
  bool parse = true;      // graph parsing into clusters; off: one cluster per node. Default: on.
  double init_scale = 1;  // scale of the uniform Glorot initialisation. Default: 1.
};

// One forward pass: its clusters, distributions, and what backward() needs.
struct ForwardPass {
  int num_clusters = 0;
  std::vector<uint32_t> cluster_of_node;             // N
  std::vector<std::vector<uint32_t>> members;        // C, ascending
  std::vector<std::vector<uint32_t>> cluster_edges;  // C: indices of its dominant edges
  std::vector<double> probs;                         // C x D, 0 for devices not allowed
  std::vector<double> log_probs;                     // C x D, 0 for devices not allowed
  std::vector<uint8_t> allowed;                      // C x D
  double mean_entropy = 0;                           // mean over clusters
  // Intermediates.
  std::vector<double> pre_in;                   // N x H
  std::vector<std::vector<double>> h;           // L + 1 of N x H
  std::vector<std::vector<double>> aggregated;  // L of N x H: A h_{l-1}
  std::vector<std::vector<double>> pre;         // L of N x H
  std::vector<double> edge_scores;              // per edge
  std::vector<double> sbar;                     // C
  std::vector<double> mean_h;                   // C x H
  std::vector<double> g;                        // C x H
  std::vector<double> pre_z;                    // C x H
  std::vector<double> z;                        // C x H
};

class Network {
 public:
  // REQUIRES: `graph` outlives the network; it meets CoarseGraph's requirements.
  // Glorot-uniform weights and biases uniform in +-1/sqrt(fan_in), times config.init_scale. (A zero
  // output layer, every distribution uniform at first, learned far slower: clusters alike in their
  // features, e.g. two identical chains, had to break their symmetry by sampling noise alone.)
  Network(const CoarseGraph& graph, const NetworkConfig& config, Rng& rng);

  size_t num_parameters() const { return theta_.size(); }
  // Every weight in one vector, in this order, each matrix row-major (input index by output
  // index): W_in (F x H), b_in (H), then per layer W_l (H x H), b_l (H), then w_s (H), b_s (1),
  // W_1 (H x H), b_1 (H), W_2 (H x D), b_2 (D).
  std::vector<double>& parameters() { return theta_; }

  void forward(ForwardPass& pass) const;

  // The loss above and its gradient (overwriting `grad`, sized to num_parameters()).
  // actions[i] holds sample i's device per cluster. REQUIRES: pass from forward() with the
  // current parameters; actions[i][k] allowed for cluster k.
  double backward(const ForwardPass& pass, const std::vector<std::vector<uint32_t>>& actions,
                  const std::vector<double>& advantages, double entropy_weight,
                  std::vector<double>& grad) const;

  // One Adam step (learning/dense.h) descending `grad`.
  void adam_step(const std::vector<double>& grad, double learning_rate);

 private:
  struct Layout {
    size_t w_in, b_in;
    std::vector<size_t> w_gnn, b_gnn;
    size_t w_score, b_score;
    size_t w1, b1, w2, b2;
    size_t total;
  };
  void parse(ForwardPass& pass) const;

  const CoarseGraph& graph_;
  NetworkConfig config_;
  Layout layout_{};
  std::vector<double> theta_;
  dense::Adam adam_{0};
  // The normalised adjacency with self-loops, as CSR: row u's entries [row_start[u],
  // row_start[u + 1]) of (column, weight).
  std::vector<uint32_t> row_start_;
  std::vector<uint32_t> column_;
  std::vector<double> weight_;
  // Per node: its incident edges (indices into graph.edges) to nodes of its allowed class.
  std::vector<std::vector<uint32_t>> parse_edges_;
};

}  // namespace dplace::hsdag
