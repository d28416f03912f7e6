#include "dplace/placers/hsdag/hsdag.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "dplace/core/clock.h"
#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/core/rng.h"
#include "dplace/core/thread_pool.h"
#include "dplace/placers/builtin.h"
#include "dplace/placers/common/learning_params.h"
#include "dplace/placers/learning/curve_file.h"
#include "dplace/placers/learning/dense.h"
#include "dplace/placers/learning/evaluation.h"
#include "dplace/placers/learning/features.h"
#include "dplace/placers/search/anneal.h"

namespace dplace {
namespace {

// The network's input for one grouping: learning/features.h's standardised node features, the
// allowed devices and their classes, and the undirected edges between distinct coarse nodes.
hsdag::CoarseGraph make_coarse_graph(const Graph& graph, const CostTable& costs,
                                     const Coarsening& coarsening) {
  NodeFeatures features = make_node_features(graph, costs, coarsening);
  const size_t N = coarsening.num_groups;
  const size_t D = costs.num_devices();
  hsdag::CoarseGraph g;
  g.num_nodes = static_cast<int>(N);
  g.num_devices = static_cast<int>(D);
  g.feature_dim = features.feature_dim;
  g.features = std::move(features.values);
  g.allowed = std::move(features.allowed);
  std::map<std::string, uint32_t> classes;  // a row of `allowed`, as bytes, and its class
  for (size_t u = 0; u < N; ++u) {
    std::string row(reinterpret_cast<const char*>(g.allowed.data() + u * D), D);
    g.allowed_class.push_back(
        classes.try_emplace(std::move(row), static_cast<uint32_t>(classes.size())).first->second);
  }
  std::set<std::pair<uint32_t, uint32_t>> edges;
  for (size_t op = 0; op < graph.num_ops(); ++op) {
    const uint32_t a = coarsening.group_of_op[op].value();
    for (OpId next : graph.successors(OpId::from_index(op))) {
      const uint32_t b = coarsening.group_of_op[next.value()].value();
      if (a != b) edges.emplace(std::min(a, b), std::max(a, b));
    }
  }
  for (const auto& [u, v] : edges) g.edges.push_back(hsdag::CoarseEdge{u, v});
  return g;
}

constexpr const char* kCurveHeader =
    "update,samples,elapsed_s,mean_step_time_s,batch_best_step_time_s,best_step_time_s,"
    "oom_fraction,entropy,clusters,restarts";

// The most multiply-adds one update may take (forward and backward passes; about ten seconds of
// one core here) and the most memory the network, a batch and the evaluator's cache may hold.
constexpr double kMaxUpdateMultiplyAdds = 2e10;
constexpr double kMaxLearningBytes = 4e9;

// Refuses network sizes that would take minutes per update or gigabytes of memory, rather than
// running past the budget or out of memory. The estimates count the dense products (about three
// passes' worth: forward, and two products per layer backward) and the stored activations.
void check_update_size(const hsdag::CoarseGraph& g, const HsdagOptions& options, size_t ops) {
  const double N = g.num_nodes, F = g.feature_dim, D = g.num_devices;
  const double H = options.network.hidden, L = options.network.gnn_layers;
  const double nnz = N + 2.0 * static_cast<double>(g.edges.size());
  const double multiply_adds =
      3 * (N * F * H + L * (N * H * H + nnz * H) + 2 * N * H * H + N * H * D);
  const double parameters = F * H + L * H * H + 2 * H * H + H * D + 4 * H + D;
  const double K = options.batch;
  const double bytes = 8 * ((3 * L + 10) * N * H + 4 * parameters) +
                       4 * (2 * K * N + K * static_cast<double>(ops) + (1 << 14) * N);
  if (multiply_adds > kMaxUpdateMultiplyAdds || bytes > kMaxLearningBytes) {
    throw ConfigError(fmt::format(
        "placer 'hsdag': {} coarse nodes with hidden {}, {} layers and batch {} would take about "
        "{:.2g} multiply-adds and {:.1f} GB per update (the most: {:.0g} and {:.0f} GB); lower "
        "--param hidden, layers, batch or groups",
        g.num_nodes, options.network.hidden, options.network.gnn_layers, options.batch,
        multiply_adds, bytes / 1e9, kMaxUpdateMultiplyAdds, kMaxLearningBytes / 1e9));
  }
}

std::string curve_row(const HsdagCurvePoint& p) {
  return fmt::format("{},{},{:.6g},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g},{},{}", p.update, p.samples,
                     p.elapsed_s, p.mean_step_time_s, p.batch_best_step_time_s, p.best_step_time_s,
                     p.oom_fraction, p.entropy, p.clusters, p.restarts);
}

}  // namespace

HsdagOptions hsdag_options_from_params(const std::map<std::string, std::string>& params) {
  std::vector<std::string> keys = learning_grouping_keys();
  for (const std::string& key : polish_keys()) keys.push_back(key);
  for (const std::string& key : run_control_keys()) keys.push_back(key);
  for (const char* key : {"hidden", "layers", "parse", "init-scale", "batch", "lr", "entropy",
                          "baseline-decay", "progress-seconds"}) {
    keys.push_back(key);
  }
  const PlacerParams p("hsdag", params, keys);
  HsdagOptions o;
  o.grouping = learning_grouping_from_params(p, 1 << 16, {"merged", "apart"}, "merged");
  hsdag::NetworkConfig& n = o.network;
  n.hidden = static_cast<int>(p.get_int("hidden", n.hidden, 1, 1024));
  n.gnn_layers = static_cast<int>(p.get_int("layers", n.gnn_layers, 0, 16));
  n.parse = p.get_choice("parse", "1", {"0", "1"}) == "1";
  // At 0 every weight would be 0 and every ReLU closed: no gradient would reach the layers.
  n.init_scale = p.get_double("init-scale", n.init_scale, 1e-3, 100);
  // One sample has no spread to learn from.
  o.batch = static_cast<int>(p.get_int("batch", o.batch, 2, 4096));
  o.learning_rate = p.get_double("lr", o.learning_rate, 0, 1);
  o.entropy_weight = p.get_double("entropy", o.entropy_weight, 0, 100);
  o.baseline_decay = p.get_double("baseline-decay", o.baseline_decay, 0, 1);
  const LearningRunControls run = run_controls_from_params(p, o.restart_patience);
  o.max_samples = run.max_samples;
  o.restart_patience = run.restart_patience;
  o.threads = run.threads;
  o.curve = run.curve;
  o.polish = polish_from_params(p);
  o.progress_seconds = p.get_double("progress-seconds", o.progress_seconds, 0, 1e6);
  return o;
}

HsdagRun run_hsdag(const PlaceRequest& request, const HsdagOptions& options) {
  const auto start = Clock::now();
  const Graph& graph = *request.graph;
  const CostTable& costs = *request.costs;
  const int K = options.batch;
  DPLACE_CHECK(K > 0 && options.grouping.levels == 1 &&
               options.grouping.shared_weights != "alternate");
  if (!options.curve.empty()) write_curve_header(options.curve, kCurveHeader);

  const std::vector<NamedGrouping> groupings =
      make_learning_groupings(graph, *request.cluster, costs, options.grouping);
  const Coarsening& coarsening = groupings.front().levels.back();
  const hsdag::CoarseGraph coarse = make_coarse_graph(graph, costs, coarsening);
  const size_t N = static_cast<size_t>(coarse.num_nodes);
  const size_t D = static_cast<size_t>(coarse.num_devices);
  check_update_size(coarse, options, graph.num_ops());
  // Every node on a device of its own: there is one placement, and one batch finds it.
  bool one_placement = true;
  for (size_t u = 0; u < N; ++u) {
    one_placement &=
        std::count(coarse.allowed.begin() + static_cast<ptrdiff_t>(u * D),
                   coarse.allowed.begin() + static_cast<ptrdiff_t>((u + 1) * D), 1) == 1;
  }

  HsdagRun run;
  run.coarse_nodes = N;
  ThreadPool pool(options.threads);
  SampleEvaluator evaluator(graph, *request.cluster, costs, *request.simulator, pool);
  BestPlacement best;
  Rng rng(request.seed);
  auto network = std::make_unique<hsdag::Network>(coarse, options.network, rng);

  hsdag::ForwardPass pass;
  std::vector<std::vector<uint32_t>> actions(K);       // per sample: a device per cluster
  std::vector<std::vector<uint32_t>> node_devices(K);  // per sample: a device per coarse node
  std::vector<std::string> keys(K);
  std::vector<SampleOutcome> outcomes(K);
  std::vector<double> advantages(K), grad;
  RewardBaseline baseline(options.baseline_decay);
  int64_t updates_since_best = 0;
  double policy_s = 0, evaluate_s = 0;
  double last_progress = -1e9;

  auto fill = [&](Placement& p, const std::vector<uint32_t>& devices) {
    p.device_of_op.resize(graph.num_ops());
    for (size_t i = 0; i < graph.num_ops(); ++i) {
      p.device_of_op[i] = DeviceId::from_index(devices[coarsening.group_of_op[i].value()]);
    }
  };

  while (true) {
    if (run.updates > 0 && (one_placement || seconds_since(start) >= request.budget_seconds)) break;
    if (options.max_samples > 0 && run.samples >= options.max_samples) break;
    const auto policy_start = Clock::now();
    network->forward(pass);
    if (!std::isfinite(pass.mean_entropy)) {
      // The weights have run off (a learning rate far too high): fresh ones.
      ++run.restarts;
      updates_since_best = 0;
      baseline.reset();
      network = std::make_unique<hsdag::Network>(coarse, options.network, rng);
      network->forward(pass);
    }
    const size_t C = static_cast<size_t>(pass.num_clusters);
    for (int i = 0; i < K; ++i) {
      actions[i].resize(C);
      for (size_t k = 0; k < C; ++k) {
        const size_t d =
            dense::sample_index(std::span(pass.probs).subspan(k * D, D),
                                std::span(pass.allowed).subspan(k * D, D), rng.uniform01());
        actions[i][k] = static_cast<uint32_t>(d);
      }
      node_devices[i].resize(N);
      for (size_t u = 0; u < N; ++u) node_devices[i][u] = actions[i][pass.cluster_of_node[u]];
      keys[i] = sample_key(node_devices[i]);
    }
    policy_s += seconds_since(policy_start);

    const auto evaluate_start = Clock::now();
    run.evaluations += evaluator.evaluate(
        keys, [&](size_t i, Placement& p) { fill(p, node_devices[i]); }, outcomes);
    evaluate_s += seconds_since(evaluate_start);

    const auto update_start = Clock::now();
    const BatchSummary batch = summarise_batch(
        evaluator, outcomes, best, [&](size_t i, Placement& p) { fill(p, node_devices[i]); });
    run.samples += K;
    ++run.updates;
    updates_since_best = batch.improved ? 0 : updates_since_best + 1;

    // REINFORCE: advantages from the baseline, in units of the batch's reward spread; a batch
    // whose samples were all rewarded alike teaches nothing and leaves the network as it is.
    if (baseline.advantages(batch, advantages)) {
      network->backward(pass, actions, advantages, options.entropy_weight, grad);
      network->adam_step(grad, options.learning_rate);
    }

    const HsdagCurvePoint point{.update = run.updates,
                                .samples = run.samples,
                                .elapsed_s = seconds_since(start),
                                .mean_step_time_s = batch.mean_step_time_s,
                                .batch_best_step_time_s = batch.batch_best_step_time_s,
                                .best_step_time_s = best.best_s(),
                                .oom_fraction = batch.oom_fraction,
                                .entropy = pass.mean_entropy,
                                .clusters = pass.num_clusters,
                                .restarts = run.restarts};
    run.curve.push_back(point);
    if (!options.curve.empty()) append_curve_row(options.curve, curve_row(point));

    if (options.restart_patience > 0 && updates_since_best >= options.restart_patience) {
      ++run.restarts;
      updates_since_best = 0;
      baseline.reset();
      network = std::make_unique<hsdag::Network>(coarse, options.network, rng);
    }
    policy_s += seconds_since(update_start);

    if (request.progress && point.elapsed_s - last_progress >= options.progress_seconds) {
      last_progress = point.elapsed_s;
      print_to_stderr(
          "hsdag: update {} samples {} ({:.1f}/s) best {} mean {} oom {:.0f}% entropy {:.3f} "
          "clusters {} restarts {}\n",
          point.update, point.samples,
          static_cast<double>(point.samples) / std::max(point.elapsed_s, 1e-9),
          format_seconds(point.best_step_time_s), format_seconds(point.mean_step_time_s),
          100 * point.oom_fraction, point.entropy, point.clusters, run.restarts);
    }
  }

  // The final network's likeliest placement.
  network->forward(pass);
  std::vector<uint32_t> mode(N);
  for (size_t u = 0; u < N; ++u) {
    const size_t k = pass.cluster_of_node[u];
    size_t pick = D;
    for (size_t d = 0; d < D; ++d) {
      if (pass.allowed[k * D + d] &&
          (pick == D || pass.probs[k * D + d] > pass.probs[k * D + pick]))
        pick = d;
    }
    mode[u] = static_cast<uint32_t>(pick);
  }
  fill(run.mode_placement, mode);
  run.mode_clusters = pass.num_clusters;

  run.seconds = seconds_since(start);
  run.policy_seconds = policy_s;
  run.evaluate_seconds = evaluate_s;
  run.best_step_time_s = best.best_s();
  run.best_feasible = best.best_feasible();
  run.result.placement = best.result();
  run.result.evaluations = run.evaluations;
  const double learn_s = std::max(policy_s + evaluate_s, 1e-12);
  int min_clusters = INT32_MAX, max_clusters = 0;
  for (const HsdagCurvePoint& p : run.curve) {
    min_clusters = std::min(min_clusters, p.clusters);
    max_clusters = std::max(max_clusters, p.clusters);
  }
  run.result.note = fmt::format(
      "hsdag: {} samples ({:.0f}/s), {} simulated, {} updates, {} restarts; {} coarse nodes ({}), "
      "{} edges; clusters {}-{}, {} at the end; policy {:.0f}% / evaluation {:.0f}% of the "
      "learning's time",
      run.samples, static_cast<double>(run.samples) / std::max(run.seconds, 1e-9), run.evaluations,
      run.updates, run.restarts, N, groupings.front().name, coarse.edges.size(), min_clusters,
      max_clusters, run.mode_clusters, 100 * policy_s / learn_s, 100 * evaluate_s / learn_s);
  if (!run.best_feasible) run.result.note += "; no sampled placement fits in memory";
  return run;
}

namespace {

class HsdagPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    const HsdagOptions options = hsdag_options_from_params(request.params);
    return learn_then_polish(request, "hsdag", options.polish, options.threads,
                             [&](const PlaceRequest& r) { return run_hsdag(r, options).result; });
  }
};

}  // namespace

void register_hsdag_placers() {
  register_placer({"hsdag",
                   "HSDAG (Duan et al. 2024): GCN node embeddings, graph-parsing clusters and an "
                   "MLP placer trained by REINFORCE, then polished by annealing; --param "
                   "groups=N, hidden=N, layers=N, parse=0|1, batch=K, samples=N, polish=N, "
                   "curve=FILE.csv",
                   true, false, [] { return std::make_unique<HsdagPlacer>(); }});
}

}  // namespace dplace
