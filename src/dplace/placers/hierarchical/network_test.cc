#include "dplace/placers/hierarchical/network.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dplace::hierarchical {
namespace {

// Random sparse group embeddings and allowed devices (device 1 barred from every third group).
void random_inputs(const NetworkConfig& c, Rng& rng, PlacerPass& pass) {
  pass.x.assign(static_cast<size_t>(c.num_groups), {});
  pass.allowed.clear();
  for (int g = 0; g < c.num_groups; ++g) {
    for (int j = 0; j < c.group_embedding; ++j) {
      if (rng.uniform01() < 0.4) {
        pass.x[g].columns.push_back(static_cast<uint32_t>(j));
        pass.x[g].values.push_back(rng.normal());
      }
    }
    for (int d = 0; d < c.num_devices; ++d) {
      pass.allowed.push_back(d == 1 && g % 3 == 0 ? 0 : 1);
    }
  }
}

// One update's samples: their groupings and devices, held fixed while the weights move.
struct Batch {
  std::vector<double> features;
  std::vector<double> prior;  // U x G or empty
  std::vector<uint32_t> groupings;
  std::vector<PlacerPass> passes;  // inputs and devices
  std::vector<double> advantages;
};

// The loss of network.h, computed from the forward passes alone:
//   L = -(1/K) sum_k A_k (sum_u log p_u(g_ku) + log pi_k) - beta (mean_u H(p_u) + (1/K) sum_k
//   mean_t H(pi_kt)).
// With `grad` not empty, also adds the backward passes' gradient to it and checks that their
// returned values add up to L.
double batch_loss(const Network& net, const Batch& b, double beta, std::vector<double>& grad) {
  const size_t U = static_cast<size_t>(net.config().num_units);
  const size_t G = static_cast<size_t>(net.config().num_groups);
  const double K = static_cast<double>(b.passes.size());
  GrouperPass grouper;
  net.grouper_forward(b.features, b.prior, grouper);
  double loss = -beta * grouper.mean_entropy;
  std::vector<PlacerPass> passes = b.passes;
  for (size_t k = 0; k < passes.size(); ++k) {
    net.placer_forward({}, b.passes[k].devices, passes[k]);
    double log_p = passes[k].log_prob;
    for (size_t u = 0; u < U; ++u) log_p += grouper.log_probs[u * G + b.groupings[k * U + u]];
    loss -= b.advantages[k] * log_p / K + beta * passes[k].mean_entropy / K;
  }
  if (!grad.empty()) {
    double returned =
        net.grouper_backward(b.features, grouper, b.groupings, b.advantages, beta, grad);
    for (size_t k = 0; k < passes.size(); ++k)
      returned += net.placer_backward(passes[k], b.advantages[k], 1 / K, beta, grad);
    EXPECT_NEAR(returned, loss, 1e-12 * (1 + std::abs(loss)));
  }
  return loss;
}

// grouper_backward() and placer_backward() against central differences of the loss, for every
// parameter: with a prior; a placer width of 2 and at most one unit per group; the entropy terms
// alone (advantages 0); one device; one group.
TEST(HierarchicalNetworkTest, GradientMatchesFiniteDifferences) {
  struct Variant {
    NetworkConfig config;
    bool prior;
    bool entropy_only;
  };
  for (const Variant& variant : {Variant{{.num_units = 9,
                                .unit_feature_dim = 4,
                                .num_groups = 4,
                                .group_embedding = 7,
                                .num_devices = 3,
                                .grouper_hidden = 3,
                                .hidden = 4},
                                         true,
                                         false},
                                 Variant{{.num_units = 3,
                                 .unit_feature_dim = 2,
                                 .num_groups = 5,
                                 .group_embedding = 3,
                                 .num_devices = 2,
                                 .grouper_hidden = 2,
                                 .hidden = 2},
                                         false,
                                         false},
                                 Variant{{.num_units = 9,
                                 .unit_feature_dim = 4,
                                 .num_groups = 4,
                                 .group_embedding = 7,
                                 .num_devices = 3,
                                 .grouper_hidden = 3,
                                 .hidden = 4},
                                         false,
                                         true},
                                 Variant{{.num_units = 4,
                                 .unit_feature_dim = 3,
                                 .num_groups = 3,
                                 .group_embedding = 3,
                                 .num_devices = 1,
                                 .grouper_hidden = 2,
                                 .hidden = 2},
                                         false,
                                         false},
                                 Variant{{.num_units = 4,
                                 .unit_feature_dim = 3,
                                 .num_groups = 1,
                                 .group_embedding = 3,
                                 .num_devices = 3,
                                 .grouper_hidden = 2,
                                 .hidden = 2},
                                         false,
                                         false}}) {
    const NetworkConfig& config = variant.config;
    Rng rng(11);
    Network net(config, rng);
    for (double& w : net.parameters()) w += 0.3 * rng.normal();
    // The grouper's hidden biases (after W_g1) at 1: its units open.
    const size_t F = config.unit_feature_dim, Q = config.grouper_hidden;
    for (size_t j = 0; j < Q; ++j) net.parameters()[F * Q + j] = 1.0;
    Batch b;
    for (int i = 0; i < config.num_units * config.unit_feature_dim; ++i)
      b.features.push_back(rng.normal());
    if (variant.prior) {
      for (int i = 0; i < config.num_units * config.num_groups; ++i)
        b.prior.push_back(rng.normal());
    }
    constexpr int K = 3;
    for (int k = 0; k < K; ++k) {
      for (int u = 0; u < config.num_units; ++u)
        b.groupings.push_back(static_cast<uint32_t>(rng.uniform_int(config.num_groups)));
      PlacerPass pass;
      random_inputs(config, rng, pass);
      std::vector<double> uniforms;
      for (int t = 0; t < config.num_groups; ++t) uniforms.push_back(rng.uniform01());
      net.placer_forward(uniforms, {}, pass);
      b.passes.push_back(pass);
      b.advantages.push_back(variant.entropy_only ? 0.0 : rng.normal());
    }
    std::vector<double> grad(net.num_parameters(), 0.0);
    const double loss = batch_loss(net, b, 0.05, grad);
    EXPECT_TRUE(std::isfinite(loss));

    std::vector<double> none;
    constexpr double kDelta = 1e-6;
    size_t nonzero = 0;
    for (size_t i = 0; i < net.num_parameters(); ++i) {
      const double saved = net.parameters()[i];
      net.parameters()[i] = saved + kDelta;
      const double up = batch_loss(net, b, 0.05, none);
      net.parameters()[i] = saved - kDelta;
      const double down = batch_loss(net, b, 0.05, none);
      net.parameters()[i] = saved;
      const double numeric = (up - down) / (2 * kDelta);
      EXPECT_NEAR(grad[i], numeric, 1e-8 + 1e-6 * std::abs(numeric)) << "parameter " << i;
      nonzero += std::abs(grad[i]) > 1e-9;
    }
    if (config.num_groups == 1) {
      // One group: the grouper has nothing to learn (its softmax is 1), the placer has.
      for (size_t i = 0; i < F * Q + Q + Q + 1; ++i) EXPECT_EQ(grad[i], 0) << i;
      EXPECT_GT(nonzero, net.num_parameters() / 2);
    } else if (config.num_devices > 1) {
      // Device embeddings of devices never chosen before a step have no gradient; most others
      // do.
      EXPECT_GT(nonzero, net.num_parameters() * 3 / 4);
    } else {
      // One device: the placer's distribution is fixed, only the grouper learns.
      EXPECT_GT(nonzero, 0u);
      for (size_t i = F * Q + Q + Q * 3 + 3; i < net.num_parameters(); ++i) EXPECT_EQ(grad[i], 0);
    }
  }
}

// Sampling, forcing and greedy decoding agree with the distributions they report.
TEST(HierarchicalNetworkTest, SampledForcedAndGreedyDevicesFollowTheDistributions) {
  const NetworkConfig config{.num_units = 4,
                             .unit_feature_dim = 3,
                             .num_groups = 6,
                             .group_embedding = 5,
                             .num_devices = 3,
                             .hidden = 4};
  Rng rng(3);
  Network net(config, rng);
  PlacerPass pass;
  random_inputs(config, rng, pass);
  std::vector<double> uniforms;
  for (int t = 0; t < config.num_groups; ++t) uniforms.push_back(rng.uniform01());
  net.placer_forward(uniforms, {}, pass);
  double log_prob = 0;
  for (size_t t = 0; t < 6; ++t) {
    const double* p = pass.probs.data() + t * 3;
    double sum = 0, below = 0;
    for (size_t d = 0; d < 3; ++d) {
      sum += p[d];
      if (!pass.allowed[t * 3 + d]) {
        EXPECT_EQ(p[d], 0.0);
      }
      if (d < pass.devices[t]) below += p[d];
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
    EXPECT_TRUE(pass.allowed[t * 3 + pass.devices[t]]);
    // Inverse CDF: the cumulative probability below the pick is at most u, and u is below the
    // cumulative probability through it.
    EXPECT_LE(below, uniforms[t] + 1e-12);
    EXPECT_LT(uniforms[t], below + p[pass.devices[t]] + 1e-12);
    log_prob += std::log(p[pass.devices[t]]);
  }
  EXPECT_NEAR(pass.log_prob, log_prob, 1e-9);

  // Forcing the sampled devices reproduces the pass.
  PlacerPass forced = pass;
  net.placer_forward({}, pass.devices, forced);
  EXPECT_EQ(forced.probs, pass.probs);
  EXPECT_EQ(forced.log_prob, pass.log_prob);

  PlacerPass greedy = pass;
  net.placer_forward({}, {}, greedy);
  for (size_t t = 0; t < 6; ++t) {
    for (size_t d = 0; d < 3; ++d) {
      if (greedy.allowed[t * 3 + d]) {
        EXPECT_GE(greedy.probs[t * 3 + greedy.devices[t]], greedy.probs[t * 3 + d]);
      }
    }
  }
}

// The grouper's distributions are softmaxes over the groups; its entropy is their mean entropy.
TEST(HierarchicalNetworkTest, GrouperGivesEachUnitADistributionOverTheGroups) {
  const NetworkConfig config{.num_units = 5,
                             .unit_feature_dim = 2,
                             .num_groups = 4,
                             .group_embedding = 3,
                             .num_devices = 2,
                             .hidden = 2};
  Rng rng(9);
  Network net(config, rng);
  std::vector<double> features;
  for (int i = 0; i < 10; ++i) features.push_back(rng.normal());
  GrouperPass pass;
  net.grouper_forward(features, {}, pass);
  double entropy = 0;
  for (size_t u = 0; u < 5; ++u) {
    double sum = 0;
    for (size_t j = 0; j < 4; ++j) {
      sum += pass.probs[u * 4 + j];
      EXPECT_NEAR(pass.log_probs[u * 4 + j], std::log(pass.probs[u * 4 + j]), 1e-12);
      entropy -= pass.probs[u * 4 + j] * pass.log_probs[u * 4 + j] / 5;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  EXPECT_NEAR(pass.mean_entropy, entropy, 1e-12);
}

// Gradient clipping scales the step's gradient to the given global norm.
TEST(HierarchicalNetworkTest, AdamStepClipsTheGradient) {
  const NetworkConfig config{.num_units = 2,
                             .unit_feature_dim = 1,
                             .num_groups = 2,
                             .group_embedding = 1,
                             .num_devices = 2,
                             .hidden = 2};
  Rng rng(1);
  Network net(config, rng);
  std::vector<double> grad(net.num_parameters(), 3.0);
  net.adam_step(grad, 0.01, 1.0);
  double norm = 0;
  for (double g : grad) norm += g * g;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-12);
  std::vector<double> small(net.num_parameters(), 1e-3);
  const std::vector<double> kept = small;
  net.adam_step(small, 0.01, 1e6);
  EXPECT_EQ(small, kept);
}

}  // namespace
}  // namespace dplace::hierarchical
