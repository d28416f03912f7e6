#include "dplace/placers/hsdag/hsdag.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/core/rng.h"
#include "dplace/core/thread_pool.h"
#include "dplace/placers/builtin.h"
#include "dplace/placers/common/params.h"
#include "dplace/placers/learning/evaluation.h"
#include "dplace/placers/learning/features.h"
#include "dplace/placers/search/anneal.h"

namespace dplace {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Beyond any relative time a device allowed for a node gives (log 1e4): the feature of a device
// the node may not use.
constexpr double kNotAllowedLogRatio = 10;

// Sine and cosine of the topological position at this many frequencies (see make_coarse_graph).
constexpr int kPositionFrequencies = 6;

// The network's input for one grouping: features.h's group features; each device's time for the
// node relative to its fastest allowed one (log of the ratio); the node's position p = id / N in
// the topological order of the coarse nodes as sin(2^j pi p) and cos(2^j pi p), j < 6, so that
// nodes alike in every other feature (the branches of a block) look different to a linear layer;
// every column standardised. Also the allowed devices and their classes, and the undirected edges
// between distinct coarse nodes.
hsdag::CoarseGraph make_coarse_graph(const Graph& graph, const CostTable& costs,
                                     const Coarsening& coarsening) {
  const GroupFeatures base = make_group_features(graph, costs, coarsening);
  const size_t N = coarsening.num_groups;
  const size_t D = costs.num_devices();
  const size_t B = static_cast<size_t>(base.feature_dim);
  hsdag::CoarseGraph g;
  g.num_nodes = static_cast<int>(N);
  g.num_devices = static_cast<int>(D);
  const size_t F = B + D + 2 * kPositionFrequencies;
  g.feature_dim = static_cast<int>(F);
  g.features.assign(N * F, 0.0);
  g.allowed = base.allowed;
  std::vector<double> time_s(N * D, 0.0);
  for (size_t op = 0; op < graph.num_ops(); ++op) {
    const size_t node = coarsening.group_of_op[op].value();
    for (size_t d = 0; d < D; ++d) {
      time_s[node * D + d] += costs.time_s(OpId::from_index(op), DeviceId::from_index(d));
    }
  }
  for (size_t u = 0; u < N; ++u) {
    double fastest = INFINITY;
    for (size_t d = 0; d < D; ++d)
      if (g.allowed[u * D + d]) fastest = std::min(fastest, time_s[u * D + d]);
    double* row = g.features.data() + u * F;
    for (size_t j = 0; j < B; ++j) row[j] = base.values[u * B + j];
    for (size_t d = 0; d < D; ++d) {
      double value = kNotAllowedLogRatio;
      if (g.allowed[u * D + d]) {
        value = fastest > 0 ? std::min(kNotAllowedLogRatio, std::log(time_s[u * D + d] / fastest))
                            : 0.0;
      }
      row[B + d] = value;
    }
    const double position = static_cast<double>(u) / static_cast<double>(N);
    for (int j = 0; j < kPositionFrequencies; ++j) {
      const double angle = std::ldexp(M_PI * position, j);
      row[B + D + 2 * j] = std::sin(angle);
      row[B + D + 2 * j + 1] = std::cos(angle);
    }
  }
  for (size_t j = 0; j < F; ++j) {
    double mean = 0, var = 0;
    for (size_t u = 0; u < N; ++u) mean += g.features[u * F + j] / static_cast<double>(N);
    for (size_t u = 0; u < N; ++u) {
      const double x = g.features[u * F + j] - mean;
      var += x * x / static_cast<double>(N);
    }
    const double sd = std::sqrt(var);
    for (size_t u = 0; u < N; ++u) {
      double& x = g.features[u * F + j];
      x = sd > 1e-12 ? (x - mean) / sd : 0.0;
    }
  }
  std::map<std::vector<uint8_t>, uint32_t> classes;
  for (size_t u = 0; u < N; ++u) {
    std::vector<uint8_t> row(g.allowed.begin() + static_cast<ptrdiff_t>(u * D),
                             g.allowed.begin() + static_cast<ptrdiff_t>((u + 1) * D));
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

[[noreturn]] void cannot_write_curve(const std::string& path) {
  throw ConfigError(
      fmt::format("--param curve={}: cannot write the file: {}", path, std::strerror(errno)));
}

void write_curve_header(const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  out << "update,samples,elapsed_s,mean_step_time_s,batch_best_step_time_s,best_step_time_s,"
         "oom_fraction,entropy,clusters,restarts\n";
  out.close();
  if (!out) cannot_write_curve(path);
}

void append_curve(const std::string& path, const HsdagCurvePoint& p) {
  std::ofstream out(path, std::ios::app);
  if (!out) cannot_write_curve(path);
  out << fmt::format("{},{},{:.6g},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g},{},{}\n", p.update, p.samples,
                     p.elapsed_s, p.mean_step_time_s, p.batch_best_step_time_s, p.best_step_time_s,
                     p.oom_fraction, p.entropy, p.clusters, p.restarts);
  out.close();
  if (!out) cannot_write_curve(path);
}

}  // namespace

HsdagOptions hsdag_options_from_params(const std::map<std::string, std::string>& params) {
  const PlacerParams p("hsdag", params,
                       {"groups",
                        "sole-consumer",
                        "sole-consumer-limit",
                        "cap",
                        "cap-transfer-scale",
                        "shared-weights",
                        "hidden",
                        "layers",
                        "parse",
                        "init-scale",
                        "batch",
                        "lr",
                        "entropy",
                        "baseline-decay",
                        "samples",
                        "restart-patience",
                        "threads",
                        "curve",
                        "polish",
                        "polish-share",
                        "polish-rounds",
                        "progress-seconds"});
  HsdagOptions o;
  LearningGroupingOptions& g = o.grouping;
  g.groups = static_cast<size_t>(p.get_int("groups", 256, 2, 1 << 16));
  g.sole_consumer =
      p.get_choice("sole-consumer", g.sole_consumer, {"full", "chains", "limited", "off"});
  g.sole_consumer_limit = p.get_double("sole-consumer-limit", g.sole_consumer_limit, 1e-9, 1e12);
  g.cap = p.get_choice("cap", g.cap, {"lightest", "communication"});
  g.cap_transfer_scale = p.get_double("cap-transfer-scale", g.cap_transfer_scale, 0, 1e12);
  g.shared_weights = p.get_choice("shared-weights", "merged", {"merged", "apart"});
  g.levels = 1;
  hsdag::NetworkConfig& n = o.network;
  n.hidden = static_cast<int>(p.get_int("hidden", n.hidden, 1, 1024));
  n.gnn_layers = static_cast<int>(p.get_int("layers", n.gnn_layers, 0, 16));
  n.parse = p.get_choice("parse", "1", {"0", "1"}) == "1";
  n.init_scale = p.get_double("init-scale", n.init_scale, 0, 100);
  o.batch = static_cast<int>(p.get_int("batch", o.batch, 1, 4096));
  o.learning_rate = p.get_double("lr", o.learning_rate, 0, 100);
  o.entropy_weight = p.get_double("entropy", o.entropy_weight, 0, 100);
  o.baseline_decay = p.get_double("baseline-decay", o.baseline_decay, 0, 1);
  o.max_samples = p.get_int("samples", 0, 0, int64_t{1} << 50);
  o.restart_patience = p.get_int("restart-patience", o.restart_patience, 0, int64_t{1} << 40);
  o.threads = static_cast<size_t>(p.get_int("threads", 0, 0, 256));
  if (auto it = params.find("curve"); it != params.end()) {
    if (it->second.empty()) throw ConfigError("placer 'hsdag': --param curve= needs a file name");
    o.curve = it->second;
  }
  o.polish_evaluations = p.get_int("polish", o.polish_evaluations, -1, int64_t{1} << 40);
  o.polish_share = p.get_double("polish-share", o.polish_share, 0, 0.9);
  o.polish_rounds = static_cast<int>(p.get_int("polish-rounds", o.polish_rounds, 1, 1000));
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
  if (!options.curve.empty()) write_curve_header(options.curve);

  const std::vector<NamedGrouping> groupings =
      make_learning_groupings(graph, *request.cluster, costs, options.grouping);
  const Coarsening& coarsening = groupings.front().levels.back();
  const hsdag::CoarseGraph coarse = make_coarse_graph(graph, costs, coarsening);
  const size_t N = static_cast<size_t>(coarse.num_nodes);
  const size_t D = static_cast<size_t>(coarse.num_devices);

  HsdagRun run;
  run.coarse_nodes = N;
  run.coarse_edges = coarse.edges.size();
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
  std::vector<double> rewards(K), advantages(K), grad;
  double baseline = 0;
  bool have_baseline = false;
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
    if (run.updates > 0 && seconds_since(start) >= request.budget_seconds) break;
    if (options.max_samples > 0 && run.samples >= options.max_samples) break;
    const auto policy_start = Clock::now();
    network->forward(pass);
    const size_t C = static_cast<size_t>(pass.num_clusters);
    for (int i = 0; i < K; ++i) {
      actions[i].resize(C);
      for (size_t k = 0; k < C; ++k) {
        const double* probs = pass.probs.data() + k * D;
        double u = rng.uniform01();
        size_t d = 0;
        while (d + 1 < D && (!pass.allowed[k * D + d] || u >= probs[d])) {
          if (pass.allowed[k * D + d]) u -= probs[d];
          ++d;
        }
        // Rounding can leave u past the last allowed device: take the last allowed one.
        while (!pass.allowed[k * D + d]) --d;
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
    double mean_s = 0, batch_best_s = INFINITY, oom = 0, mean_r = 0;
    bool improved = false;
    for (int i = 0; i < K; ++i) {
      const SampleOutcome& o = outcomes[i];
      const double penalised_s = evaluator.penalised_s(o);
      rewards[i] = evaluator.reward(o);
      mean_r += rewards[i] / K;
      mean_s += penalised_s / K;
      batch_best_s = std::min(batch_best_s, penalised_s);
      if (!o.feasible) oom += 1.0 / K;
      improved |= best.offer(o, penalised_s, [&](Placement& p) { fill(p, node_devices[i]); });
    }
    run.samples += K;
    ++run.updates;
    updates_since_best = improved ? 0 : updates_since_best + 1;

    // REINFORCE: advantages from the baseline, in units of the batch's reward spread; a batch
    // whose samples were all rewarded alike teaches nothing and leaves the network as it is.
    double var = 0;
    for (int i = 0; i < K; ++i) var += (rewards[i] - mean_r) * (rewards[i] - mean_r) / K;
    const double spread = std::sqrt(var);
    if (!have_baseline) baseline = mean_r;
    if (spread > 1e-12) {
      for (int i = 0; i < K; ++i) advantages[i] = (rewards[i] - baseline) / spread;
      network->backward(pass, actions, advantages, options.entropy_weight, grad);
      network->adam_step(grad, options.learning_rate);
    }
    baseline = have_baseline
                   ? options.baseline_decay * baseline + (1 - options.baseline_decay) * mean_r
                   : mean_r;
    have_baseline = true;

    const HsdagCurvePoint point{.update = run.updates,
                                .samples = run.samples,
                                .elapsed_s = seconds_since(start),
                                .mean_step_time_s = mean_s,
                                .batch_best_step_time_s = batch_best_s,
                                .best_step_time_s = best.best_s(),
                                .oom_fraction = oom,
                                .entropy = pass.mean_entropy,
                                .clusters = pass.num_clusters,
                                .restarts = run.restarts};
    run.curve.push_back(point);
    if (!options.curve.empty()) append_curve(options.curve, point);

    if (options.restart_patience > 0 && updates_since_best >= options.restart_patience) {
      ++run.restarts;
      updates_since_best = 0;
      have_baseline = false;
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
    const auto start = Clock::now();
    const int64_t moves = options.polish_evaluations >= 0
                              ? options.polish_evaluations
                              : kPolishFactor * default_anneal_evaluations(*request.graph);
    if (moves == 0) return run_hsdag(request, options).result;
    PlaceRequest learn = request;
    learn.budget_seconds = request.budget_seconds * (1 - options.polish_share);
    const HsdagRun run = run_hsdag(learn, options);
    return polish_learned(request, "hsdag", run.result, start,
                          AnnealOptions{.evaluations = moves,
                                        .rounds = options.polish_rounds,
                                        .threads = options.threads,
                                        .progress_label = "hsdag: polishing"});
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
