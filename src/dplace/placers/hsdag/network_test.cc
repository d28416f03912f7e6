#include "dplace/placers/hsdag/network.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace dplace::hsdag {
namespace {

// A random coarse graph: a chain 0-1-...-(n-1) plus `extra` random edges, random features, three
// devices; nodes divisible by 5 may use devices 0 and 2 only (another allowed class).
CoarseGraph random_graph(int n, int extra, uint64_t seed) {
  Rng rng(seed);
  CoarseGraph g;
  g.num_nodes = n;
  g.feature_dim = 5;
  g.num_devices = 3;
  for (int i = 0; i < n * g.feature_dim; ++i) g.features.push_back(rng.normal());
  for (int u = 0; u < n; ++u) {
    const bool restricted = u % 5 == 0;
    g.allowed.insert(g.allowed.end(), {1, static_cast<uint8_t>(restricted ? 0 : 1), 1});
    g.allowed_class.push_back(restricted ? 1 : 0);
  }
  std::set<std::pair<uint32_t, uint32_t>> edges;
  for (int u = 0; u + 1 < n; ++u) edges.emplace(u, u + 1);
  for (int i = 0; i < extra; ++i) {
    const auto a = static_cast<uint32_t>(rng.uniform_int(n));
    const auto b = static_cast<uint32_t>(rng.uniform_int(n));
    if (a != b) edges.emplace(std::min(a, b), std::max(a, b));
  }
  for (const auto& [u, v] : edges) g.edges.push_back({u, v});
  return g;
}

// Samples K placements from a pass, with random advantages.
void random_batch(const ForwardPass& pass, int devices, int K, Rng& rng,
                  std::vector<std::vector<uint32_t>>& actions, std::vector<double>& advantages) {
  actions.assign(K, {});
  advantages.clear();
  for (int i = 0; i < K; ++i) {
    for (int k = 0; k < pass.num_clusters; ++k) {
      uint32_t d;
      do d = static_cast<uint32_t>(rng.uniform_int(devices));
      while (!pass.allowed[static_cast<size_t>(k * devices) + d]);
      actions[i].push_back(d);
    }
    advantages.push_back(rng.normal());
  }
}

// backward()'s gradient against central differences of the loss, for every parameter: with and
// without parsing, without graph convolutions, one hidden unit, a graph without edges. The
// clusters must not change under the perturbation (checked).
TEST(HsdagNetworkTest, GradientMatchesFiniteDifferences) {
  struct Variant {
    NetworkConfig config;
    int extra_edges;
    bool edges;
  };
  for (const Variant& variant :
       {Variant{{.hidden = 6, .gnn_layers = 2, .parse = true}, 8, true},
        Variant{{.hidden = 6, .gnn_layers = 2, .parse = false}, 8, true},
        Variant{{.hidden = 6, .gnn_layers = 0, .parse = true}, 8, true},
        Variant{{.hidden = 1, .gnn_layers = 1, .parse = true}, 8, true},
        Variant{{.hidden = 4, .gnn_layers = 2, .parse = true}, 0, false}}) {
    const bool parse = variant.config.parse && variant.edges;
    CoarseGraph g = random_graph(12, variant.extra_edges, 3);
    if (!variant.edges) g.edges.clear();
    Rng rng(5);
    Network net(g, variant.config, rng);
    for (double& w : net.parameters()) w += 0.3 * rng.normal();
    // The placer MLP's hidden biases (b_1, after W_in, b_in, the layers, w_s, b_s and W_1) at 1:
    // its units open, so that the gradient reaches every layer.
    const size_t F = g.feature_dim, H = variant.config.hidden, L = variant.config.gnn_layers;
    const size_t b1 = F * H + H + L * (H * H + H) + H + 1 + H * H;
    for (size_t j = 0; j < H; ++j) net.parameters()[b1 + j] = 1.0;
    ForwardPass pass;
    net.forward(pass);
    if (parse && variant.config.hidden > 1) {
      ASSERT_LT(pass.num_clusters, g.num_nodes);
      ASSERT_GT(pass.num_clusters, 1);
    } else if (!parse) {
      ASSERT_EQ(pass.num_clusters, g.num_nodes);
    }
    std::vector<std::vector<uint32_t>> actions;
    std::vector<double> advantages;
    random_batch(pass, g.num_devices, 4, rng, actions, advantages);
    std::vector<double> grad;
    const double loss = net.backward(pass, actions, advantages, 0.05, grad);
    ASSERT_EQ(grad.size(), net.num_parameters());
    EXPECT_TRUE(std::isfinite(loss));

    std::vector<double> unused;
    auto loss_at = [&](size_t i, double delta) {
      const double saved = net.parameters()[i];
      net.parameters()[i] = saved + delta;
      ForwardPass p;
      net.forward(p);
      EXPECT_EQ(p.cluster_of_node, pass.cluster_of_node) << "parameter " << i;
      const double l = net.backward(p, actions, advantages, 0.05, unused);
      net.parameters()[i] = saved;
      return l;
    };
    constexpr double kDelta = 1e-6;
    size_t nonzero = 0;
    for (size_t i = 0; i < net.num_parameters(); ++i) {
      const double numeric = (loss_at(i, kDelta) - loss_at(i, -kDelta)) / (2 * kDelta);
      EXPECT_NEAR(grad[i], numeric, 1e-6 + 1e-5 * std::abs(numeric))
          << "parameter " << i << (parse ? " (parse)" : "");
      nonzero += std::abs(grad[i]) > 1e-9;
    }
    EXPECT_GT(nonzero, net.num_parameters() / 3);
  }
}

// One forward pass worked by hand. Two nodes, one feature (1 and 2), one edge, one hidden unit,
// one layer, two devices; every weight 1 but W_2 = (1, -1):
//   h0 = (1, 2); A = [[1/2, 1/2], [1/2, 1/2]], so A h0 = (1.5, 1.5) and h1 = h0 + 1.5 = (2.5, 3.5);
//   s = sigmoid(2.5 x 3.5 + 1) = sigmoid(9.75); both nodes take the edge: one cluster;
//   g = (1 + s) x mean(2.5, 3.5) = 3 (1 + s); z = g + 1; logits (z + 1, -z + 1): p_0 =
//   sigmoid(2 z).
TEST(HsdagNetworkTest, ForwardPassByHand) {
  CoarseGraph g;
  g.num_nodes = 2;
  g.feature_dim = 1;
  g.num_devices = 2;
  g.features = {1, 2};
  g.allowed = {1, 1, 1, 1};
  g.allowed_class = {0, 0};
  g.edges = {{0, 1}};
  Rng rng(1);
  Network net(g, NetworkConfig{.hidden = 1, .gnn_layers = 1}, rng);
  ASSERT_EQ(net.num_parameters(), 12u);
  // W_in, b_in, W_1, b_1 (the layer), w_s, b_s, W_1, b_1 (the MLP), W_2 (2), b_2 (2).
  net.parameters() = {1, 0, 1, 0, 1, 1, 1, 1, 1, -1, 1, 1};
  ForwardPass pass;
  net.forward(pass);
  ASSERT_EQ(pass.num_clusters, 1);
  EXPECT_EQ(pass.members[0], (std::vector<uint32_t>{0, 1}));
  EXPECT_DOUBLE_EQ(pass.h[1][0], 2.5);
  EXPECT_DOUBLE_EQ(pass.h[1][1], 3.5);
  const double s = 1 / (1 + std::exp(-9.75));
  EXPECT_NEAR(pass.edge_scores[0], s, 1e-15);
  const double z = 3 * (1 + s) + 1;
  EXPECT_NEAR(pass.probs[0], 1 / (1 + std::exp(-2 * z)), 1e-15);
  EXPECT_NEAR(pass.probs[1], 1 - pass.probs[0], 1e-15);
}

// The parsing: every cluster is connected by its dominant edges, holds one allowed class, and
// every dominant edge lies inside its cluster; each cluster's distribution covers its devices.
TEST(HsdagNetworkTest, ParsingMakesConnectedSingleClassClusters) {
  const CoarseGraph g = random_graph(40, 30, 11);
  Rng rng(2);
  Network net(g, NetworkConfig{}, rng);
  ForwardPass pass;
  net.forward(pass);
  ASSERT_GT(pass.num_clusters, 1);
  ASSERT_LE(pass.num_clusters, g.num_nodes / 2);  // every node with an edge of its class merges
  size_t members = 0;
  for (int k = 0; k < pass.num_clusters; ++k) {
    const auto& m = pass.members[k];
    members += m.size();
    for (uint32_t u : m) {
      EXPECT_EQ(pass.cluster_of_node[u], static_cast<uint32_t>(k));
      EXPECT_EQ(g.allowed_class[u], g.allowed_class[m.front()]);
    }
    // Connected: a cluster of n nodes has at least n - 1 dominant edges, all inside it.
    EXPECT_GE(pass.cluster_edges[k].size() + 1, m.size());
    for (uint32_t e : pass.cluster_edges[k]) {
      EXPECT_EQ(pass.cluster_of_node[g.edges[e].u], static_cast<uint32_t>(k));
      EXPECT_EQ(pass.cluster_of_node[g.edges[e].v], static_cast<uint32_t>(k));
    }
    // Numbered by their lowest node.
    if (k > 0) {
      EXPECT_LT(pass.members[k - 1].front(), m.front());
    }
    // A distribution over the cluster's devices: device 1 is not allowed in class 1.
    double sum = 0;
    for (int d = 0; d < g.num_devices; ++d) {
      const size_t at = static_cast<size_t>(k * g.num_devices + d);
      EXPECT_EQ(pass.allowed[at], g.allowed[m.front() * g.num_devices + d]);
      if (!pass.allowed[at]) {
        EXPECT_EQ(pass.probs[at], 0.0);
      }
      sum += pass.probs[at];
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  EXPECT_EQ(members, static_cast<size_t>(g.num_nodes));
}

// Descending the loss with a positive advantage on one placement makes that placement likelier
// (without parsing, so that the clusters stay fixed).
TEST(HsdagNetworkTest, AdamStepsRaiseTheRewardedPlacement) {
  const CoarseGraph g = random_graph(10, 4, 7);
  Rng rng(1);
  Network net(g, NetworkConfig{.hidden = 16, .parse = false}, rng);
  ForwardPass pass;
  net.forward(pass);
  ASSERT_EQ(pass.num_clusters, g.num_nodes);
  const std::vector<std::vector<uint32_t>> actions(1, std::vector<uint32_t>(g.num_nodes, 0));
  auto log_likelihood = [&] {
    double sum = 0;
    for (int k = 0; k < pass.num_clusters; ++k) sum += pass.log_probs[k * g.num_devices];
    return sum;
  };
  const double before = log_likelihood();
  std::vector<double> grad;
  for (int step = 0; step < 20; ++step) {
    net.forward(pass);
    net.backward(pass, actions, {1.0}, 0.0, grad);
    net.adam_step(grad, 0.01);
  }
  net.forward(pass);
  EXPECT_GT(log_likelihood(), before + 1.0);
}

}  // namespace
}  // namespace dplace::hsdag
