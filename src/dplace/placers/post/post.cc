#include "dplace/placers/post/post.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "dplace/core/clock.h"
#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/core/rng.h"
#include "dplace/core/thread_pool.h"
#include "dplace/placers/builtin.h"
#include "dplace/placers/common/learning_params.h"
#include "dplace/placers/learning/curve_file.h"
#include "dplace/placers/learning/evaluation.h"
#include "dplace/placers/search/anneal.h"

namespace dplace {
namespace {

// The policy over one grouping: logits for each group's allowed devices (group m's are
// entries [offsets[m], offsets[m + 1]) of `devices` and `logits`), with Adam's moments.
struct FactoredPolicy {
  std::vector<uint32_t> offsets;
  std::vector<int32_t> devices;  // device index of each entry
  std::vector<double> logits;
  std::vector<double> adam_m;
  std::vector<double> adam_v;
  int64_t adam_steps = 0;

  size_t num_groups() const { return offsets.size() - 1; }

  void reset_adam() {
    std::fill(adam_m.begin(), adam_m.end(), 0.0);
    std::fill(adam_v.begin(), adam_v.end(), 0.0);
    adam_steps = 0;
  }
  void reset() {
    std::fill(logits.begin(), logits.end(), 0.0);
    reset_adam();
  }
  // Each group's softmax into `probs` and its logarithm into `log_probs` (parallel to logits).
  void probabilities(std::vector<double>& probs, std::vector<double>& log_probs) const {
    probs.resize(logits.size());
    log_probs.resize(logits.size());
    for (size_t m = 0; m + 1 < offsets.size(); ++m) {
      const uint32_t b = offsets[m], e = offsets[m + 1];
      const double top = *std::max_element(logits.begin() + b, logits.begin() + e);
      double sum = 0;
      for (uint32_t j = b; j < e; ++j) sum += probs[j] = std::exp(logits[j] - top);
      const double log_sum = std::log(sum);
      for (uint32_t j = b; j < e; ++j) {
        probs[j] /= sum;
        log_probs[j] = logits[j] - top - log_sum;
      }
    }
  }
};

FactoredPolicy make_policy(const Graph& graph, const CostTable& costs, const Coarsening& c) {
  FactoredPolicy p;
  p.offsets.push_back(0);
  for (size_t m = 0; m < c.num_groups; ++m) {
    // Groups merge only ops allowed on the same devices (groupings.h): any op speaks for all.
    const OpId op = c.group_ops[m].front();
    const std::vector<DeviceId>& allowed = costs.group_devices(graph.group_of(op));
    DPLACE_CHECK(!allowed.empty()) << "group " << m << " may use no device";
    for (DeviceId d : allowed) p.devices.push_back(static_cast<int32_t>(d.value()));
    p.offsets.push_back(static_cast<uint32_t>(p.devices.size()));
  }
  p.logits.assign(p.devices.size(), 0.0);
  p.adam_m.assign(p.devices.size(), 0.0);
  p.adam_v.assign(p.devices.size(), 0.0);
  return p;
}

double mean_entropy(const FactoredPolicy& policy, const std::vector<double>& probs,
                    const std::vector<double>& log_probs) {
  double sum = 0;
  for (size_t j = 0; j < probs.size(); ++j)
    if (probs[j] > 0) sum -= probs[j] * log_probs[j];
  return sum / static_cast<double>(std::max<size_t>(1, policy.num_groups()));
}

// One sampled placement: the chosen entry of each group (an index into FactoredPolicy::devices).
struct Sample {
  std::vector<uint32_t> entries;
  std::vector<double> old_log_probs;  // per group, under the distribution it was sampled from
  double penalised_s = 0;
  double reward = 0;
};

// PPO's epochs for group m: Adam steps first_step + 1, ..., first_step + ppo_epochs ascending
// the clipped surrogate, mean over the batch of min(ratio * A, clip(ratio) * A), where ratio is
// the group's probability of its sampled device now over when it was sampled.
void ppo_update_group(FactoredPolicy& policy, size_t m, const std::vector<Sample>& batch,
                      const std::vector<double>& advantages, const PostOptions& options,
                      int64_t first_step, std::vector<double>& scratch) {
  constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;
  const uint32_t b = policy.offsets[m], e = policy.offsets[m + 1], n = e - b;
  scratch.resize(3 * static_cast<size_t>(n));
  double* probs = scratch.data();
  double* log_probs = probs + n;
  double* grad = log_probs + n;
  const double K = static_cast<double>(batch.size());
  for (int epoch = 0; epoch < options.ppo_epochs; ++epoch) {
    const double* logits = policy.logits.data() + b;
    const double top = *std::max_element(logits, logits + n);
    double sum = 0;
    for (uint32_t j = 0; j < n; ++j) sum += probs[j] = std::exp(logits[j] - top);
    const double log_sum = std::log(sum);
    for (uint32_t j = 0; j < n; ++j) {
      probs[j] /= sum;
      log_probs[j] = logits[j] - top - log_sum;
      grad[j] = 0;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      const double a = advantages[i];
      if (a == 0) continue;
      const uint32_t chosen = batch[i].entries[m] - b;
      const double ratio = std::exp(log_probs[chosen] - batch[i].old_log_probs[m]);
      // Clipped: the surrogate is flat in the logits.
      if ((a > 0 && ratio > 1 + options.clip) || (a < 0 && ratio < 1 - options.clip)) continue;
      const double coef = a * ratio / K;
      for (uint32_t j = 0; j < n; ++j) grad[j] -= coef * probs[j];
      grad[chosen] += coef;
    }
    const double step = static_cast<double>(first_step + epoch + 1);
    const double c1 = 1 - std::pow(kBeta1, step);
    const double c2 = 1 - std::pow(kBeta2, step);
    for (uint32_t j = 0; j < n; ++j) {
      double& am = policy.adam_m[b + j];
      double& av = policy.adam_v[b + j];
      am = kBeta1 * am + (1 - kBeta1) * grad[j];
      av = kBeta2 * av + (1 - kBeta2) * grad[j] * grad[j];
      policy.logits[b + j] += options.learning_rate * (am / c1) / (std::sqrt(av / c2) + kEpsilon);
    }
  }
}

// The best samples offered since it was last cleared, at most `size`: ordered by penalised step
// time, then by the order they were offered (so the first of equal ones stay), as a max-heap.
struct EliteSample {
  double penalised_s = 0;
  int64_t order = 0;
  std::vector<uint32_t> entries;
};
struct Elite {
  std::vector<EliteSample> samples;  // a heap, the worst first
  int64_t offered = 0;

  static bool better(const EliteSample& a, const EliteSample& b) {
    return a.penalised_s < b.penalised_s || (a.penalised_s == b.penalised_s && a.order < b.order);
  }
  void offer(const Sample& s, size_t size) {
    const int64_t order = offered++;
    if (samples.size() == size) {
      if (!(s.penalised_s < samples.front().penalised_s)) return;
      std::pop_heap(samples.begin(), samples.end(), better);
      samples.pop_back();
    }
    samples.push_back(EliteSample{s.penalised_s, order, s.entries});
    std::push_heap(samples.begin(), samples.end(), better);
  }
};

// The most samples between two cross-entropy steps (ce_every x batch).
constexpr int64_t kMaxWindowSamples = int64_t{1} << 20;
// The most memory the samples of a batch and the elite may hold.
constexpr double kMaxLearningBytes = 4e9;

constexpr const char* kCurveHeader =
    "update,samples,elapsed_s,mean_step_time_s,batch_best_step_time_s,best_step_time_s,"
    "oom_fraction,entropy,step,restarts,grouping";

std::string curve_row(const PostCurvePoint& p, const std::string& grouping) {
  return fmt::format("{},{},{:.6g},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g},{},{},{}", p.update,
                     p.samples, p.elapsed_s, p.mean_step_time_s, p.batch_best_step_time_s,
                     p.best_step_time_s, p.oom_fraction, p.entropy, p.ce_step ? "ce" : "ppo",
                     p.restarts, grouping);
}

}  // namespace

PostOptions post_options_from_params(const std::map<std::string, std::string>& params) {
  std::vector<std::string> keys = learning_grouping_keys();
  for (const std::string& key : polish_keys()) keys.push_back(key);
  for (const std::string& key : run_control_keys()) keys.push_back(key);
  for (const char* key : {"batch", "ce-every", "elite", "mix", "epochs", "clip", "lr",
                          "baseline-decay", "progress-seconds"}) {
    keys.push_back(key);
  }
  const PlacerParams p("post", params, keys);
  PostOptions o;
  o.grouping =
      learning_grouping_from_params(p, 1 << 20, {"merged", "apart", "alternate"}, "alternate");
  o.batch = static_cast<int>(p.get_int("batch", o.batch, 1, 4096));
  o.ce_every = static_cast<int>(p.get_int("ce-every", o.ce_every, 1, 1 << 20));
  o.elite = p.get_double("elite", o.elite, 1e-9, 1);
  o.mix = p.get_double("mix", o.mix, 0, 1);
  o.ppo_epochs = static_cast<int>(p.get_int("epochs", o.ppo_epochs, 0, 1000));
  o.clip = p.get_double("clip", o.clip, 0, 1);
  o.learning_rate = p.get_double("lr", o.learning_rate, 0, 100);
  o.baseline_decay = p.get_double("baseline-decay", o.baseline_decay, 0, 1);
  const LearningRunControls run = run_controls_from_params(p, o.restart_patience);
  o.max_samples = run.max_samples;
  o.restart_patience = run.restart_patience;
  o.threads = run.threads;
  o.curve = run.curve;
  if (static_cast<int64_t>(o.ce_every) * o.batch > kMaxWindowSamples) {
    throw ConfigError(fmt::format(
        "placer 'post': --param ce-every={} with batch {} makes a cross-entropy step every {} "
        "samples, more than {}",
        o.ce_every, o.batch, static_cast<int64_t>(o.ce_every) * o.batch, kMaxWindowSamples));
  }
  o.polish = polish_from_params(p);
  o.progress_seconds = p.get_double("progress-seconds", o.progress_seconds, 0, 1e6);
  return o;
}

PostRun run_post(const PlaceRequest& request, const PostOptions& options) {
  const auto start = Clock::now();
  const Graph& graph = *request.graph;
  const Cluster& cluster = *request.cluster;
  const CostTable& costs = *request.costs;
  const Simulator& simulator = *request.simulator;
  const int K = options.batch;
  DPLACE_CHECK(K > 0 && options.ce_every > 0 && options.grouping.levels == 1);
  if (!options.curve.empty()) write_curve_header(options.curve, kCurveHeader);

  const std::vector<NamedGrouping> groupings =
      make_learning_groupings(graph, cluster, costs, options.grouping);
  const int F = static_cast<int>(groupings.size());
  PostRun run;
  for (const NamedGrouping& g : groupings) run.groupings.push_back(g.name);

  ThreadPool pool(options.threads);
  SampleEvaluator evaluator(graph, cluster, costs, simulator, pool);
  Rng rng(request.seed);

  int grouping_index = 0;
  const Coarsening* grouping = &groupings[0].levels.back();
  FactoredPolicy policy = make_policy(graph, costs, *grouping);

  BestPlacement best;

  std::vector<Sample> batch(K);
  // The best samples since the last cross-entropy step (or restart): that step's elite.
  const size_t window = static_cast<size_t>(options.ce_every) * static_cast<size_t>(K);
  const size_t elite_size = std::clamp<size_t>(
      static_cast<size_t>(std::lround(options.elite * static_cast<double>(window))), 1, window);
  Elite elite;
  // A batch holds K samples of every group and K placements of every op; refuse sizes that
  // would take gigabytes rather than let the system run out of memory.
  for (const NamedGrouping& g : groupings) {
    const double groups = static_cast<double>(g.levels.back().num_groups);
    const double need_bytes = K * (groups * (sizeof(uint32_t) + sizeof(double)) +
                                   static_cast<double>(graph.num_ops()) * sizeof(DeviceId)) +
                              static_cast<double>(elite_size) * groups * sizeof(uint32_t);
    if (need_bytes > kMaxLearningBytes) {
      throw ConfigError(fmt::format(
          "placer 'post': a batch of {} samples and an elite of {} over {} groups and {} ops "
          "would hold {:.1f} GB, more than {:.0f} GB; lower --param batch, elite, ce-every or "
          "groups",
          K, elite_size, g.levels.back().num_groups, graph.num_ops(), need_bytes / 1e9,
          kMaxLearningBytes / 1e9));
    }
  }
  std::vector<SampleOutcome> outcomes(K);
  std::vector<std::string> keys(K);
  std::vector<double> probs, log_probs;
  std::vector<std::vector<double>> scratch(pool.size());
  double baseline = 0;
  bool have_baseline = false;
  int64_t updates_since_best = 0;
  int64_t batches_since_restart = 0;
  double policy_s = 0, evaluate_s = 0;
  double last_progress = -1e9;

  auto fill = [&](Placement& p, const std::vector<uint32_t>& entries) {
    p.device_of_op.resize(graph.num_ops());
    for (size_t i = 0; i < graph.num_ops(); ++i) {
      p.device_of_op[i] =
          DeviceId::from_index(policy.devices[entries[grouping->group_of_op[i].value()]]);
    }
  };

  while (true) {
    if (run.updates > 0 && seconds_since(start) >= request.budget_seconds) break;
    if (options.max_samples > 0 && run.samples >= options.max_samples) break;
    const auto policy_start = Clock::now();
    policy.probabilities(probs, log_probs);
    const double entropy = mean_entropy(policy, probs, log_probs);
    const size_t G = policy.num_groups();
    for (Sample& s : batch) {
      s.entries.resize(G);
      s.old_log_probs.resize(G);
      for (size_t m = 0; m < G; ++m) {
        const uint32_t b = policy.offsets[m], e = policy.offsets[m + 1];
        double u = rng.uniform01();
        uint32_t j = b;
        while (j + 1 < e && u >= probs[j]) u -= probs[j++];
        // Rounding can leave u past the last non-zero probability: take that one.
        while (probs[j] == 0 && j > b) --j;
        s.entries[m] = j;
        s.old_log_probs[m] = log_probs[j];
      }
    }
    policy_s += seconds_since(policy_start);

    // Evaluate the batch: placements not in the cache, each distinct one once, in parallel.
    const auto evaluate_start = Clock::now();
    for (int i = 0; i < K; ++i) keys[i] = sample_key(batch[i].entries);
    run.evaluations += evaluator.evaluate(
        keys, [&](size_t i, Placement& p) { fill(p, batch[i].entries); }, outcomes);
    evaluate_s += seconds_since(evaluate_start);

    const auto update_start = Clock::now();
    double mean_s = 0, batch_best_s = INFINITY, oom = 0;
    bool improved = false;
    for (int i = 0; i < K; ++i) {
      const SampleOutcome& o = outcomes[i];
      Sample& s = batch[i];
      s.penalised_s = evaluator.penalised_s(o);
      s.reward = evaluator.reward(o);
      mean_s += s.penalised_s / K;
      batch_best_s = std::min(batch_best_s, s.penalised_s);
      if (!o.feasible) oom += 1.0 / K;
      improved |= best.offer(o, s.penalised_s, [&](Placement& p) { fill(p, s.entries); });
    }
    run.samples += K;
    ++run.updates;
    ++batches_since_restart;
    updates_since_best = improved ? 0 : updates_since_best + 1;
    for (const Sample& sample : batch) elite.offer(sample, elite_size);

    const bool ce_step = batches_since_restart % options.ce_every == 0;
    if (ce_step) {
      // Cross-entropy minimisation: each group's device frequencies among the elite, mixed with
      // the uniform distribution over its devices.
      std::vector<double> counts(policy.logits.size(), 0.0);
      for (const EliteSample& e : elite.samples) {
        for (uint32_t j : e.entries) counts[j] += 1;
      }
      const double elite_count = static_cast<double>(elite.samples.size());
      for (size_t m = 0; m < G; ++m) {
        const uint32_t b = policy.offsets[m], e = policy.offsets[m + 1];
        const double uniform = 1.0 / (e - b);
        for (uint32_t j = b; j < e; ++j) {
          const double p = (1 - options.mix) * counts[j] / elite_count + options.mix * uniform;
          // A device no elite chose, with mix = 0, keeps a tiny probability rather than -inf.
          policy.logits[j] = std::log(std::max(p, 1e-12));
        }
      }
      policy.reset_adam();
      elite.samples.clear();
      ++run.ce_steps;
    } else if (options.ppo_epochs > 0) {
      // PPO: advantages from the baseline, in units of the batch's reward spread.
      double mean_r = 0;
      for (const Sample& s : batch) mean_r += s.reward / K;
      double var = 0;
      for (const Sample& s : batch) var += (s.reward - mean_r) * (s.reward - mean_r) / K;
      if (!have_baseline) baseline = mean_r;
      const double spread = std::sqrt(var);
      std::vector<double> advantages(K, 0.0);
      for (int i = 0; i < K && spread > 1e-12; ++i)
        advantages[i] = (batch[i].reward - baseline) / spread;
      baseline = have_baseline
                     ? options.baseline_decay * baseline + (1 - options.baseline_decay) * mean_r
                     : mean_r;
      have_baseline = true;
      // Every sample rewarded alike (a converged distribution): nothing to learn from the batch.
      // Otherwise, groups being independent under a factored policy, each task updates a range
      // of them through every epoch: the same arithmetic at any thread count.
      if (spread > 1e-12) {
        const int64_t first_step = policy.adam_steps;
        policy.adam_steps += options.ppo_epochs;
        constexpr size_t kGroupsPerTask = 16;
        pool.parallel_for((G + kGroupsPerTask - 1) / kGroupsPerTask, [&](size_t task,
                                                                         size_t worker) {
          for (size_t m = task * kGroupsPerTask; m < std::min(G, (task + 1) * kGroupsPerTask);
               ++m) {
            ppo_update_group(policy, m, batch, advantages, options, first_step, scratch[worker]);
          }
        });
      }
    }

    PostCurvePoint point{.update = run.updates,
                         .samples = run.samples,
                         .elapsed_s = seconds_since(start),
                         .mean_step_time_s = mean_s,
                         .batch_best_step_time_s = batch_best_s,
                         .best_step_time_s = best.best_s(),
                         .oom_fraction = oom,
                         .entropy = entropy,
                         .ce_step = ce_step,
                         .restarts = run.restarts,
                         .grouping = grouping_index};
    run.curve.push_back(point);
    if (!options.curve.empty()) {
      append_curve_row(options.curve, curve_row(point, groupings[grouping_index].name));
    }

    // A restart: the uniform distribution again, on the next grouping.
    if (options.restart_patience > 0 && updates_since_best >= options.restart_patience) {
      ++run.restarts;
      updates_since_best = 0;
      batches_since_restart = 0;
      have_baseline = false;
      elite.samples.clear();
      evaluator.clear_cache();
      grouping_index = static_cast<int>(run.restarts % F);
      grouping = &groupings[grouping_index].levels.back();
      policy = make_policy(graph, costs, *grouping);
    }
    policy_s += seconds_since(update_start);

    if (request.progress && point.elapsed_s - last_progress >= options.progress_seconds) {
      last_progress = point.elapsed_s;
      print_to_stderr(
          "post: update {} samples {} ({:.1f}/s) best {} mean {} oom {:.0f}% entropy {:.3f} "
          "cross-entropy steps {} restarts {} ({} groups, {})\n",
          point.update, point.samples,
          static_cast<double>(point.samples) / std::max(point.elapsed_s, 1e-9),
          format_seconds(point.best_step_time_s), format_seconds(point.mean_step_time_s),
          100 * point.oom_fraction, point.entropy, run.ce_steps, run.restarts, grouping->num_groups,
          groupings[grouping_index].name);
    }
  }

  // The most likely placement of the final distribution (the first device of equal ones).
  std::vector<uint32_t> mode(policy.num_groups());
  for (size_t m = 0; m < mode.size(); ++m) {
    mode[m] =
        static_cast<uint32_t>(std::max_element(policy.logits.begin() + policy.offsets[m],
                                               policy.logits.begin() + policy.offsets[m + 1]) -
                              policy.logits.begin());
  }
  fill(run.mode_placement, mode);
  run.seconds = seconds_since(start);
  run.policy_seconds = policy_s;
  run.evaluate_seconds = evaluate_s;
  run.best_step_time_s = best.best_s();
  run.best_feasible = best.best_feasible();
  run.result.placement = best.result();
  run.result.evaluations = run.evaluations;
  std::string grouping_text;
  for (size_t i = 0; i < groupings.size(); ++i) {
    grouping_text += fmt::format("{}{} {}", i == 0 ? "" : " and ", groupings[i].name,
                                 groupings[i].levels.back().num_groups);
  }
  const double learn_s = std::max(policy_s + evaluate_s, 1e-12);
  run.result.note = fmt::format(
      "post: {} samples ({:.0f}/s), {} simulated, {} updates ({} cross-entropy steps), {} "
      "restarts; groups: {}{}; policy {:.0f}% / evaluation {:.0f}% of the learning's time",
      run.samples, static_cast<double>(run.samples) / std::max(run.seconds, 1e-9), run.evaluations,
      run.updates, run.ce_steps, run.restarts, grouping_text,
      F > 1 ? " (one per restart in turn)" : "", 100 * policy_s / learn_s,
      100 * evaluate_s / learn_s);
  if (!run.best_feasible) run.result.note += "; no sampled placement fits in memory";
  return run;
}

namespace {

class PostPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    const PostOptions options = post_options_from_params(request.params);
    return learn_then_polish(request, "post", options.polish, options.threads,
                             [&](const PlaceRequest& r) { return run_post(r, options).result; });
  }
};

}  // namespace

void register_post_placers() {
  register_placer({"post",
                   "Post (Gao et al. 2018): per-group softmax distributions learned by "
                   "cross-entropy minimisation and PPO, then polished by annealing; --param "
                   "groups=N, batch=K, ce-every=N, elite=F, samples=N, polish=N, curve=FILE.csv",
                   true, false, [] { return std::make_unique<PostPlacer>(); }});
}

}  // namespace dplace
