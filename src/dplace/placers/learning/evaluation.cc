#include "dplace/placers/learning/evaluation.h"

#include <algorithm>
#include <cmath>

#include "dplace/core/error.h"
#include "dplace/placers/learning/groupings.h"

namespace dplace {

std::string sample_key(std::span<const uint32_t> choices) {
  return std::string(reinterpret_cast<const char*>(choices.data()),
                     choices.size() * sizeof(uint32_t));
}

SampleEvaluator::SampleEvaluator(const Graph& graph, const Cluster& cluster, const CostTable& costs,
                                 const Simulator& simulator, ThreadPool& pool, size_t cache_entries)
    : simulator_(simulator),
      pool_(pool),
      cache_entries_(cache_entries),
      oom_charge_s_(2 * step_time_upper_bound_s(graph, cluster, costs)),
      reference_s_(simulator.lower_bound_s() > 0 ? simulator.lower_bound_s() : 1.0),
      workspaces_(pool.size()),
      results_(pool.size()) {}

double SampleEvaluator::reward(const SampleOutcome& o) const {
  return -std::sqrt(penalised_s(o) / reference_s_);
}

int64_t SampleEvaluator::evaluate(std::span<const std::string> keys,
                                  const std::function<void(size_t, Placement&)>& fill,
                                  std::span<SampleOutcome> outcomes) {
  DPLACE_CHECK(keys.size() == outcomes.size());
  const size_t n = keys.size();
  if (placements_.size() < n) placements_.resize(n);
  std::vector<size_t> to_run;     // samples whose placement is simulated
  std::vector<size_t> source(n);  // per sample: the sample it takes its outcome from
  std::unordered_map<std::string_view, size_t> first_of;
  for (size_t i = 0; i < n; ++i) {
    source[i] = i;
    if (auto hit = cache_.find(keys[i]); hit != cache_.end()) {
      outcomes[i] = hit->second;
      continue;
    }
    const auto [first, inserted] = first_of.try_emplace(keys[i], i);
    if (inserted) to_run.push_back(i);
    source[i] = first->second;
  }
  for (size_t i : to_run) fill(i, placements_[i]);
  pool_.parallel_for(to_run.size(), [&](size_t k, size_t worker) {
    const size_t i = to_run[k];
    SimResult& r = results_[worker];
    simulator_.run(placements_[i], workspaces_[worker], r);
    outcomes[i] = SampleOutcome{r.step_time_s, r.feasible, r.total_overflow_bytes()};
  });
  for (size_t i = 0; i < n; ++i) outcomes[i] = outcomes[source[i]];
  if (cache_.size() + to_run.size() > cache_entries_) cache_.clear();
  for (size_t i : to_run) cache_.emplace(keys[i], outcomes[i]);
  return static_cast<int64_t>(to_run.size());
}

bool BestPlacement::offer(const SampleOutcome& o, double penalised_s,
                          const std::function<void(Placement&)>& fill) {
  bool improved = false;
  if (penalised_s < best_s_) {
    best_s_ = penalised_s;
    fill(best_);
    best_feasible_ = o.feasible;
    improved = true;
  }
  const SampleOutcome& l = least_overflow_outcome_;
  if (!o.feasible && o.overflow_bytes > 0 &&
      (!have_least_overflow_ || o.overflow_bytes < l.overflow_bytes ||
       (o.overflow_bytes == l.overflow_bytes && o.step_time_s < l.step_time_s))) {
    fill(least_overflow_);
    least_overflow_outcome_ = o;
    have_least_overflow_ = true;
  }
  return improved;
}

const Placement& BestPlacement::result() const {
  return best_feasible_ || !have_least_overflow_ ? best_ : least_overflow_;
}

BatchSummary summarise_batch(const SampleEvaluator& evaluator,
                             std::span<const SampleOutcome> outcomes, BestPlacement& best,
                             const std::function<void(size_t, Placement&)>& fill) {
  DPLACE_CHECK(!outcomes.empty());
  const double n = static_cast<double>(outcomes.size());
  BatchSummary b;
  b.batch_best_step_time_s = INFINITY;
  b.rewards.resize(outcomes.size());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const SampleOutcome& o = outcomes[i];
    const double penalised_s = evaluator.penalised_s(o);
    b.rewards[i] = evaluator.reward(o);
    b.mean_reward += b.rewards[i] / n;
    b.mean_step_time_s += penalised_s / n;
    b.batch_best_step_time_s = std::min(b.batch_best_step_time_s, penalised_s);
    if (!o.feasible) b.oom_fraction += 1.0 / n;
    b.improved |= best.offer(o, penalised_s, [&](Placement& p) { fill(i, p); });
  }
  double var = 0;
  for (double r : b.rewards) var += (r - b.mean_reward) * (r - b.mean_reward) / n;
  b.reward_spread = std::sqrt(var);
  return b;
}

bool RewardBaseline::advantages(const BatchSummary& batch, std::span<double> out) {
  DPLACE_CHECK(out.size() == batch.rewards.size());
  if (!have_value_) value_ = batch.mean_reward;
  const bool learn = batch.reward_spread > 1e-12;
  if (learn) {
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = (batch.rewards[i] - value_) / batch.reward_spread;
  }
  value_ = have_value_ ? decay_ * value_ + (1 - decay_) * batch.mean_reward : batch.mean_reward;
  have_value_ = true;
  return learn;
}

}  // namespace dplace
