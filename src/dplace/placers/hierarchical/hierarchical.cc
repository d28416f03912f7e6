#include "dplace/placers/hierarchical/hierarchical.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "dplace/core/clock.h"
#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/core/rng.h"
#include "dplace/core/thread_pool.h"
#include "dplace/ir/coarsening.h"
#include "dplace/placers/builtin.h"
#include "dplace/placers/common/learning_params.h"
#include "dplace/placers/hierarchical/network.h"
#include "dplace/placers/learning/curve_file.h"
#include "dplace/placers/learning/dense.h"
#include "dplace/placers/learning/evaluation.h"
#include "dplace/placers/learning/features.h"
#include "dplace/placers/learning/groupings.h"

namespace dplace {
namespace {

// A group's time on a device relative to its fastest allowed one: log(t_d / t_min) / this,
// capped at 1 (1 for a device the group may not use; see make_group_inputs).
constexpr double kLogRatioScale = 10;
// The placer's gradient is summed over the batch in this many chunks (at most), each a sum in
// sample order, then added in chunk order: the same arithmetic for every thread count.
constexpr size_t kGradientChunks = 8;
// The most multiply-adds one update may take and the most memory the networks and a batch may
// hold (as hsdag's limits), and the memory the evaluator's cache of sample keys may take.
constexpr double kMaxUpdateMultiplyAdds = 2e10;
constexpr double kMaxLearningBytes = 4e9;
constexpr double kCacheBytes = 64e6;

// What the group embeddings are built from: the units (the graph's colocation groups) and their
// edges, op types, compute, parameters and devices.
struct UnitTable {
  size_t units = 0;
  size_t devices = 0;
  size_t type_slots = 0;             // the unit features' vocabulary (features.h), plus "other"
  std::vector<uint32_t> unit_of_op;  // per op
  struct Edge {
    uint32_t from = 0, to = 0;
    double count = 0;  // op-to-op edges from unit `from` to unit `to` (from == to: inside)
  };
  std::vector<Edge> edges;
  double total_edges = 0;
  std::vector<std::vector<std::pair<uint32_t, double>>> types;  // per unit: (slot, ops)
  double num_ops = 0;
  std::vector<double> compute_s;  // per unit: the sum of its ops' fastest times
  double total_compute_s = 0;
  std::vector<double> param_bytes;  // per unit
  double total_param_bytes = 0;
  std::vector<double> time_s;     // units x devices: the sum of its ops' times
  std::vector<uint8_t> allowed;   // units x devices
  std::vector<uint32_t> fastest;  // per unit: its fastest allowed device
};

UnitTable make_unit_table(const Graph& graph, const CostTable& costs, const Coarsening& units,
                          const NodeFeatures& features) {
  UnitTable t;
  t.units = units.num_groups;
  t.devices = costs.num_devices();
  const size_t U = t.units, D = t.devices;
  t.unit_of_op.resize(graph.num_ops());
  for (size_t op = 0; op < graph.num_ops(); ++op) t.unit_of_op[op] = units.group_of_op[op].value();
  std::map<std::pair<uint32_t, uint32_t>, double> edges;
  for (size_t op = 0; op < graph.num_ops(); ++op) {
    for (OpId next : graph.successors(OpId::from_index(op))) {
      edges[{t.unit_of_op[op], t.unit_of_op[next.value()]}] += 1;
    }
  }
  for (const auto& [pair, count] : edges) {
    t.edges.push_back({pair.first, pair.second, count});
    t.total_edges += count;
  }
  // The vocabulary of the unit features (features.h), and "other".
  std::map<std::string, uint32_t> slot_of;
  for (const std::string& type : features.vocabulary)
    slot_of.emplace(type, static_cast<uint32_t>(slot_of.size()));
  const uint32_t other = static_cast<uint32_t>(slot_of.size());
  t.type_slots = slot_of.size() + 1;
  t.types.assign(U, {});
  t.compute_s.assign(U, 0.0);
  t.param_bytes.assign(U, 0.0);
  t.num_ops = static_cast<double>(graph.num_ops());
  for (size_t u = 0; u < U; ++u) {
    std::map<uint32_t, double> counts;
    for (OpId op : units.group_ops[u]) {
      const Op& o = graph.op(op);
      const auto it = slot_of.find(o.type);
      counts[it == slot_of.end() ? other : it->second] += 1;
      t.compute_s[u] += costs.fastest_time_s(op);
      t.param_bytes[u] += static_cast<double>(o.param_bytes);
    }
    t.types[u].assign(counts.begin(), counts.end());
    t.total_compute_s += t.compute_s[u];
    t.total_param_bytes += t.param_bytes[u];
  }
  t.time_s = features.time_s;
  t.allowed = features.allowed;
  t.fastest.resize(U);
  for (size_t u = 0; u < U; ++u) {
    size_t best = D;
    for (size_t d = 0; d < D; ++d) {
      if (t.allowed[u * D + d] && (best == D || t.time_s[u * D + d] < t.time_s[u * D + best]))
        best = d;
    }
    DPLACE_CHECK(best < D) << "unit " << u << " may use no device";
    t.fastest[u] = static_cast<uint32_t>(best);
  }
  return t;
}

size_t embedding_width(const UnitTable& t, size_t G) {
  return 2 * G + t.type_slots + 2 + t.devices;
}

// log1p(x) / log1p(scale), 0 when either is not positive.
double log_share(double x, double scale) {
  return x > 0 && scale > 0 ? std::log1p(x) / std::log1p(scale) : 0.0;
}

// The group embeddings and allowed devices of one sample's grouping (see hierarchical.h), into
// pass.x and pass.allowed.
void make_group_inputs(const UnitTable& t, std::span<const uint32_t> group_of_unit, size_t G,
                       hierarchical::PlacerPass& pass) {
  const size_t U = t.units, D = t.devices, V = t.type_slots;
  std::vector<double> counts(G * G, 0.0);  // from x to
  for (const UnitTable::Edge& e : t.edges)
    counts[group_of_unit[e.from] * G + group_of_unit[e.to]] += e.count;
  std::vector<double> types(G * V, 0.0), compute(G, 0.0), params(G, 0.0), time(G * D, 0.0);
  std::vector<size_t> members(G, 0);
  std::vector<uint8_t> every(G * D, 1), any(G * D, 0);
  for (size_t u = 0; u < U; ++u) {
    const size_t g = group_of_unit[u];
    ++members[g];
    for (const auto& [slot, count] : t.types[u]) types[g * V + slot] += count;
    compute[g] += t.compute_s[u];
    params[g] += t.param_bytes[u];
    for (size_t d = 0; d < D; ++d) {
      // Over the units that may use the device (a time on a device it may not use means nothing).
      if (t.allowed[u * D + d]) time[g * D + d] += t.time_s[u * D + d];
      every[g * D + d] &= t.allowed[u * D + d];
      any[g * D + d] |= t.allowed[u * D + d];
    }
  }
  pass.x.assign(G, {});
  pass.allowed.assign(G * D, 1);
  const double G_d = static_cast<double>(G);
  for (size_t g = 0; g < G; ++g) {
    hierarchical::SparseRow& row = pass.x[g];
    auto put = [&](size_t column, double value) {
      if (value == 0) return;
      row.columns.push_back(static_cast<uint32_t>(column));
      row.values.push_back(value);
    };
    for (size_t j = 0; j < G; ++j) put(j, log_share(counts[g * G + j], t.total_edges));
    for (size_t j = 0; j < G; ++j) put(G + j, log_share(counts[j * G + g], t.total_edges));
    if (members[g] == 0) continue;  // an empty group: no ops, every device
    for (size_t v = 0; v < V; ++v) put(2 * G + v, log_share(types[g * V + v], t.num_ops));
    put(2 * G + V, log_share(G_d * compute[g] / std::max(t.total_compute_s, 1e-300), G_d));
    put(2 * G + V + 1, log_share(G_d * params[g] / std::max(t.total_param_bytes, 1e-300), G_d));
    const bool common = std::count(every.begin() + static_cast<ptrdiff_t>(g * D),
                                   every.begin() + static_cast<ptrdiff_t>((g + 1) * D), 1) > 0;
    const uint8_t* mask = (common ? every : any).data() + g * D;
    double fastest = INFINITY;
    for (size_t d = 0; d < D; ++d)
      if (mask[d]) fastest = std::min(fastest, time[g * D + d]);
    for (size_t d = 0; d < D; ++d) {
      pass.allowed[g * D + d] = mask[d];
      double value = 1;
      if (mask[d] && fastest > 0)
        value = std::min(1.0, std::log(time[g * D + d] / fastest) / kLogRatioScale);
      if (mask[d] && fastest <= 0) value = 0;
      put(2 * G + V + 2 + d, value);
    }
  }
}

// The fixed term added to the grouper's logits (HierarchicalOptions::prior), U x G; empty for
// "none".
std::vector<double> make_prior(const Graph& graph, const Cluster& cluster, const CostTable& costs,
                               const Coarsening& units, const HierarchicalOptions& options,
                               size_t G) {
  const size_t U = units.num_groups;
  const double s = options.prior_strength;
  if (options.prior == "none" || s == 0) return {};
  std::vector<double> prior(U * G, 0.0);
  if (options.prior == "chunks") {
    const double U_d = static_cast<double>(U), G_d = static_cast<double>(G);
    for (size_t u = 0; u < U; ++u) {
      const double centre = G_d * (static_cast<double>(u) + 0.5) / U_d;
      for (size_t g = 0; g < G; ++g) {
        const double distance = centre - (static_cast<double>(g) + 0.5);
        prior[u * G + g] = -0.5 * s * distance * distance;
      }
    }
    return prior;
  }
  DPLACE_CHECK(options.prior == "coarsening");
  LearningGroupingOptions grouping;
  grouping.groups = G;
  grouping.shared_weights = "merged";
  const Coarsening coarse =
      make_learning_groupings(graph, cluster, costs, grouping).front().levels.back();
  const size_t C = coarse.num_groups;
  for (size_t u = 0; u < U; ++u) {
    // Every op of a unit (a colocation group) is in one coarse group. When the coarsening could
    // not merge down to G groups (ops on different devices never merge), spread its groups over
    // the G.
    const size_t c = coarse.group_of_op[units.group_ops[u].front().value()].value();
    const size_t g = C > G ? c * G / C : c;
    prior[u * G + g] = s;
  }
  return prior;
}

constexpr const char* kCurveHeader =
    "update,samples,elapsed_s,mean_step_time_s,batch_best_step_time_s,best_step_time_s,"
    "oom_fraction,grouper_entropy,placer_entropy,used_groups,restarts";

std::string curve_row(const HierarchicalCurvePoint& p) {
  return fmt::format("{},{},{:.6g},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g},{:.6g},{:.6g},{}", p.update,
                     p.samples, p.elapsed_s, p.mean_step_time_s, p.batch_best_step_time_s,
                     p.best_step_time_s, p.oom_fraction, p.grouper_entropy, p.placer_entropy,
                     p.used_groups, p.restarts);
}

// Refuses sizes that would take minutes per update or gigabytes of memory. The estimates count
// the dense products of a forward pass and about twice that backward (an attention tanh, computed
// in both passes, as ten multiply-adds), the sampling of the groupings, and the stored
// activations, gradients, Adam state and prior.
void check_update_size(const UnitTable& t, const hierarchical::NetworkConfig& c,
                       const HierarchicalOptions& options, size_t ops) {
  const double U = static_cast<double>(t.units), F = c.unit_feature_dim, Q = c.grouper_hidden;
  const double G = c.num_groups, E = c.group_embedding, D = c.num_devices, H = c.hidden;
  const double n = H / 2, K = options.batch;
  const double input_entries = 2 * static_cast<double>(t.edges.size()) + G * (E - 2 * G);
  const double placer = 2 * (input_entries * 4 * n + G * n * 4 * n) + G * H * H +
                        G * (8 * H * H + H * H + 3 * G * H + 2 * H * D) + 20 * G * G * H;
  const double multiply_adds = 3 * U * (F * Q + Q * G) + 3 * K * placer + K * U * G;
  const double parameters = F * Q + Q * G + 2 * (E * 4 * n + n * 4 * n) + 2 * H * H + (D + 1) * H +
                            8 * H * H + 2 * H * D + 8 * H;
  const double chunks = std::min<double>(K, kGradientChunks);
  const double threads = std::max<double>(1, static_cast<double>(options.threads));
  const double bytes =
      8 * (K * (G * (12 * n + 10 * H + G + 2 * D + 2 * G) + input_entries * 1.5) +
           threads * (G * H + 2 * G * G) + U * (2 * Q + 4 * G) + (chunks + 5) * parameters) +
      4 * (K * U * 3 + K * static_cast<double>(ops));
  if (multiply_adds > kMaxUpdateMultiplyAdds || bytes > kMaxLearningBytes) {
    throw ConfigError(fmt::format(
        "placer 'hierarchical': {} units in {} groups with hidden {} and batch {} would take "
        "about {:.2g} multiply-adds and {:.1f} GB per update (the most: {:.0g} and {:.0f} GB); "
        "lower --param hidden, groups or batch",
        t.units, c.num_groups, c.hidden, options.batch, multiply_adds, bytes / 1e9,
        kMaxUpdateMultiplyAdds, kMaxLearningBytes / 1e9));
  }
}

}  // namespace

HierarchicalOptions hierarchical_options_from_params(
    const std::map<std::string, std::string>& params) {
  std::vector<std::string> keys = polish_keys();
  for (const std::string& key : run_control_keys()) keys.push_back(key);
  for (const char* key :
       {"groups", "grouper-hidden", "hidden", "init-scale", "prior", "prior-strength", "batch",
        "lr", "entropy", "grad-clip", "baseline-decay", "progress-seconds"}) {
    keys.push_back(key);
  }
  const PlacerParams p("hierarchical", params, keys);
  HierarchicalOptions o;
  o.groups = static_cast<int>(p.get_int("groups", 0, 2, 4096));
  o.grouper_hidden = static_cast<int>(p.get_int("grouper-hidden", o.grouper_hidden, 1, 1024));
  o.hidden = static_cast<int>(p.get_int("hidden", o.hidden, 2, 1024));
  if (o.hidden % 2 != 0) {
    throw ConfigError(fmt::format(
        "placer 'hierarchical': --param hidden={} must be even (the encoder's two directions "
        "take half each)",
        o.hidden));
  }
  // At 0 every weight would be 0 and no gradient would reach the layers.
  o.init_scale = p.get_double("init-scale", o.init_scale, 1e-3, 100);
  o.prior = p.get_choice("prior", o.prior, {"chunks", "coarsening", "none"});
  o.prior_strength = p.get_double("prior-strength", o.prior_strength, 0, 1e3);
  o.batch = static_cast<int>(p.get_int("batch", o.batch, 2, 4096));  // one sample has no spread
  o.learning_rate = p.get_double("lr", o.learning_rate, 0, 1);
  o.entropy_weight = p.get_double("entropy", o.entropy_weight, 0, 100);
  o.grad_clip = p.get_double("grad-clip", o.grad_clip, 0, 1e12);
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

HierarchicalRun run_hierarchical(const PlaceRequest& request, const HierarchicalOptions& options) {
  const auto start = Clock::now();
  const Graph& graph = *request.graph;
  const CostTable& costs = *request.costs;
  const size_t K = static_cast<size_t>(options.batch);
  DPLACE_CHECK(K >= 1);
  if (!options.curve.empty()) write_curve_header(options.curve, kCurveHeader);

  // The units: the colocation groups, numbered in topological order.
  CoarseningOptions unit_options;
  unit_options.target_groups = 0;
  unit_options.merge_sole_consumer = false;
  const Coarsening units = coarsen_graph(graph, unit_options);
  const NodeFeatures features = make_node_features(graph, costs, units);
  const UnitTable table = make_unit_table(graph, costs, units, features);
  const size_t U = table.units, D = table.devices;
  const size_t G =
      options.groups > 0 ? static_cast<size_t>(options.groups) : std::min<size_t>(256, 20 * D);

  hierarchical::NetworkConfig config;
  config.num_units = static_cast<int>(U);
  config.unit_feature_dim = features.feature_dim;
  config.num_groups = static_cast<int>(G);
  config.group_embedding = static_cast<int>(embedding_width(table, G));
  config.num_devices = static_cast<int>(D);
  config.grouper_hidden = options.grouper_hidden;
  config.hidden = options.hidden;
  config.init_scale = options.init_scale;
  check_update_size(table, config, options, graph.num_ops());
  const std::vector<double> prior = make_prior(graph, *request.cluster, costs, units, options, G);
  // Every unit on a device of its own: there is one placement, and one batch finds it.
  bool one_placement = true;
  for (size_t u = 0; u < U; ++u) {
    one_placement &=
        std::count(table.allowed.begin() + static_cast<ptrdiff_t>(u * D),
                   table.allowed.begin() + static_cast<ptrdiff_t>((u + 1) * D), 1) == 1;
  }

  HierarchicalRun run;
  run.units = U;
  run.groups = static_cast<int>(G);
  ThreadPool pool(options.threads);
  const size_t cache_entries = std::clamp<size_t>(
      static_cast<size_t>(kCacheBytes / (4.0 * static_cast<double>(U))), 64, size_t{1} << 14);
  SampleEvaluator evaluator(graph, *request.cluster, costs, *request.simulator, pool,
                            cache_entries);
  BestPlacement best;
  Rng rng(request.seed);
  auto network = std::make_unique<hierarchical::Network>(config, rng);
  const size_t P = network->num_parameters();
  const size_t chunks = std::min(K, kGradientChunks);
  const std::vector<uint8_t> every_group(G, 1);

  hierarchical::GrouperPass grouper;
  std::vector<hierarchical::PlacerPass> passes(K);
  std::vector<uint32_t> groupings(K * U);
  std::vector<double> uniforms(K * G);
  std::vector<std::vector<uint32_t>> unit_devices(K, std::vector<uint32_t>(U));
  std::vector<std::string> keys(K);
  std::vector<SampleOutcome> outcomes(K);
  std::vector<double> advantages(K), grad(P);
  std::vector<std::vector<double>> partial(chunks + 1, std::vector<double>(P));
  RewardBaseline baseline(options.baseline_decay);
  int64_t updates_since_best = 0;
  double policy_s = 0, evaluate_s = 0;
  double last_progress = -1e9;
  bool restarted_for_nonfinite = false;

  // A sample's unit devices from its grouping and its groups' devices (soft placement for a unit
  // the group's device does not allow).
  auto to_units = [&](size_t k) {
    for (size_t u = 0; u < U; ++u) {
      const uint32_t d = passes[k].devices[groupings[k * U + u]];
      unit_devices[k][u] = table.allowed[u * D + d] ? d : table.fastest[u];
    }
  };
  auto fill = [&](Placement& p, const std::vector<uint32_t>& devices) {
    p.device_of_op.resize(graph.num_ops());
    for (size_t i = 0; i < graph.num_ops(); ++i)
      p.device_of_op[i] = DeviceId::from_index(devices[table.unit_of_op[i]]);
  };
  auto restart = [&] {
    ++run.restarts;
    updates_since_best = 0;
    baseline.reset();
    network = std::make_unique<hierarchical::Network>(config, rng);
  };

  while (true) {
    if (run.updates > 0 && (one_placement || seconds_since(start) >= request.budget_seconds)) break;
    if (options.max_samples > 0 && run.samples >= options.max_samples) break;
    const auto policy_start = Clock::now();
    network->grouper_forward(features.values, prior, grouper);
    if (!std::isfinite(grouper.mean_entropy)) {
      restart();  // the weights ran off (a learning rate far too high)
      network->grouper_forward(features.values, prior, grouper);
      // Fresh weights on finite features give finite outputs.
      DPLACE_CHECK(std::isfinite(grouper.mean_entropy)) << "fresh grouper not finite";
    }
    for (size_t k = 0; k < K; ++k) {
      for (size_t u = 0; u < U; ++u) {
        groupings[k * U + u] = static_cast<uint32_t>(dense::sample_index(
            std::span(grouper.probs).subspan(u * G, G), every_group, rng.uniform01()));
      }
      for (size_t t = 0; t < G; ++t) uniforms[k * G + t] = rng.uniform01();
    }
    pool.parallel_for(K, [&](size_t k, size_t) {
      make_group_inputs(table, std::span(groupings).subspan(k * U, U), G, passes[k]);
      network->placer_forward(std::span(uniforms).subspan(k * G, G), {}, passes[k]);
      to_units(k);
    });
    bool finite = true;
    for (size_t k = 0; k < K; ++k) finite &= std::isfinite(passes[k].mean_entropy);
    if (!finite) {
      // The placer's weights ran off: fresh networks, and the batch again (fresh weights on
      // finite inputs give finite outputs, so this does not repeat).
      DPLACE_CHECK(!restarted_for_nonfinite) << "fresh placer not finite";
      restarted_for_nonfinite = true;
      restart();
      continue;
    }
    restarted_for_nonfinite = false;
    for (size_t k = 0; k < K; ++k) keys[k] = sample_key(unit_devices[k]);
    policy_s += seconds_since(policy_start);

    const auto evaluate_start = Clock::now();
    run.evaluations += evaluator.evaluate(
        keys, [&](size_t k, Placement& p) { fill(p, unit_devices[k]); }, outcomes);
    evaluate_s += seconds_since(evaluate_start);

    const auto update_start = Clock::now();
    const BatchSummary batch = summarise_batch(
        evaluator, outcomes, best, [&](size_t k, Placement& p) { fill(p, unit_devices[k]); });
    const double K_d = static_cast<double>(K);
    double placer_entropy = 0, used = 0;
    for (size_t k = 0; k < K; ++k) {
      placer_entropy += passes[k].mean_entropy / K_d;
      std::vector<uint8_t> seen(G, 0);
      for (size_t u = 0; u < U; ++u) seen[groupings[k * U + u]] = 1;
      used += static_cast<double>(std::count(seen.begin(), seen.end(), 1)) / K_d;
    }
    run.samples += static_cast<int64_t>(K);
    ++run.updates;
    updates_since_best = batch.improved ? 0 : updates_since_best + 1;

    // REINFORCE on both networks, advantages in units of the batch's reward spread; a batch whose
    // samples were all rewarded alike teaches nothing and leaves the networks as they are. A
    // batch that ends past the budget updates nothing either: the networks are not used again
    // (but for the mode placement).
    const bool in_time = seconds_since(start) < request.budget_seconds;
    if (baseline.advantages(batch, advantages) && in_time) {
      // Part 0, the grouper's gradient, is the largest on a large graph: it starts first.
      pool.parallel_for(chunks + 1, [&](size_t c, size_t) {
        std::fill(partial[c].begin(), partial[c].end(), 0.0);
        if (c == 0) {
          network->grouper_backward(features.values, grouper, groupings, advantages,
                                    options.entropy_weight, partial[c]);
          return;
        }
        for (size_t k = c - 1; k < K; k += chunks) {
          network->placer_backward(passes[k], advantages[k], 1 / K_d, options.entropy_weight,
                                   partial[c]);
        }
      });
      std::fill(grad.begin(), grad.end(), 0.0);
      for (const std::vector<double>& part : partial)
        for (size_t i = 0; i < P; ++i) grad[i] += part[i];
      network->adam_step(grad, options.learning_rate, options.grad_clip);
    }

    const HierarchicalCurvePoint point{.update = run.updates,
                                       .samples = run.samples,
                                       .elapsed_s = seconds_since(start),
                                       .mean_step_time_s = batch.mean_step_time_s,
                                       .batch_best_step_time_s = batch.batch_best_step_time_s,
                                       .best_step_time_s = best.best_s(),
                                       .oom_fraction = batch.oom_fraction,
                                       .grouper_entropy = grouper.mean_entropy,
                                       .placer_entropy = placer_entropy,
                                       .used_groups = used,
                                       .restarts = run.restarts};
    run.curve.push_back(point);
    if (!options.curve.empty()) append_curve_row(options.curve, curve_row(point));
    if (options.restart_patience > 0 && updates_since_best >= options.restart_patience) restart();
    policy_s += seconds_since(update_start);

    if (request.progress && point.elapsed_s - last_progress >= options.progress_seconds) {
      last_progress = point.elapsed_s;
      print_to_stderr(
          "hierarchical: update {} samples {} ({:.1f}/s) best {} mean {} oom {:.0f}% entropy "
          "{:.3f} (grouper) {:.3f} (placer) groups used {:.1f} restarts {}\n",
          point.update, point.samples,
          static_cast<double>(point.samples) / std::max(point.elapsed_s, 1e-9),
          format_seconds(point.best_step_time_s), format_seconds(point.mean_step_time_s),
          100 * point.oom_fraction, point.grouper_entropy, point.placer_entropy, point.used_groups,
          run.restarts);
    }
  }

  // The final networks' likeliest placement.
  network->grouper_forward(features.values, prior, grouper);
  for (size_t u = 0; u < U; ++u) {
    const double* p = grouper.probs.data() + u * G;
    groupings[u] = static_cast<uint32_t>(std::max_element(p, p + G) - p);
  }
  make_group_inputs(table, std::span(groupings).subspan(0, U), G, passes[0]);
  network->placer_forward({}, {}, passes[0]);
  to_units(0);
  fill(run.mode_placement, unit_devices[0]);

  run.seconds = seconds_since(start);
  run.policy_seconds = policy_s;
  run.evaluate_seconds = evaluate_s;
  run.best_step_time_s = best.best_s();
  run.best_feasible = best.best_feasible();
  run.result.placement = best.result();
  run.result.evaluations = run.evaluations;
  const double learn_s = std::max(policy_s + evaluate_s, 1e-12);
  const HierarchicalCurvePoint& last = run.curve.back();
  run.result.note = fmt::format(
      "hierarchical: {} samples ({:.0f}/s), {} simulated, {} updates, {} restarts; {} units "
      "(colocation groups) in {} groups, {:.1f} used at the end; entropy {:.3f} (grouper) {:.3f} "
      "(placer); policy {:.0f}% / evaluation {:.0f}% of the learning's time",
      run.samples, static_cast<double>(run.samples) / std::max(run.seconds, 1e-9), run.evaluations,
      run.updates, run.restarts, U, G, last.used_groups, last.grouper_entropy, last.placer_entropy,
      100 * policy_s / learn_s, 100 * evaluate_s / learn_s);
  if (!run.best_feasible) run.result.note += "; no sampled placement fits in memory";
  return run;
}

namespace {

class HierarchicalPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    const HierarchicalOptions options = hierarchical_options_from_params(request.params);
    return learn_then_polish(
        request, "hierarchical", options.polish, options.threads,
        [&](const PlaceRequest& r) { return run_hierarchical(r, options).result; });
  }
};

}  // namespace

void register_hierarchical_placers() {
  register_placer({"hierarchical",
                   "the hierarchical planner (Mirhoseini et al. 2018): a learned grouper and a "
                   "seq2seq placer trained jointly by REINFORCE, then polished by annealing; "
                   "--param groups=N, hidden=N, batch=K, samples=N, polish=N, curve=FILE.csv",
                   true, false, [] { return std::make_unique<HierarchicalPlacer>(); }});
}

}  // namespace dplace
