// How the simulator-driven learning placers (post, hsdag) evaluate the placements they sample.
//
//  * SampleEvaluator simulates a batch of sampled placements concurrently, each distinct one once:
//    a sample is identified by a key (equal keys mean equal placements), and the outcomes of
//    recent keys are kept (a cache of `cache_entries`, cleared when a batch would overfill it; a
//    batch of more distinct keys than that is kept whole), because a converging
//    policy samples the same placements again and again and each simulation gives the same answer.
//  * An OOM placement is charged oom_charge_s(), twice an upper bound on any placement's step time
//    (groupings.h, step_time_upper_bound_s), so that every fitting placement beats it. The reward
//    of a sample is -sqrt(penalised step time / the simulator's lower bound) (the 2017 paper's
//    -sqrt(step time), in units of the lower bound so that its scale does not depend on the graph).
//  * BestPlacement keeps the best placement offered (lowest penalised step time, the first of
//    equal ones) and, while none fits, the OOM one with the least memory over capacity (then the
//    shortest step), which is the result when no offered placement fits.
//
// Thread safety: SampleEvaluator::evaluate is called by one thread at a time and parallelises
// internally over the pool; BestPlacement is not shared between threads.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "dplace/core/thread_pool.h"
#include "dplace/cost/cost_model.h"
#include "dplace/sim/simulator.h"

namespace dplace {

struct SampleOutcome {
  double step_time_s = 0;
  bool feasible = true;
  int64_t overflow_bytes = 0;  // summed over the devices out of memory; 0 when it fits
};

// The key of a sample given by one index per group (a device or an entry of a device list).
std::string sample_key(std::span<const uint32_t> choices);

class SampleEvaluator {
 public:
  // REQUIRES: every argument outlives the evaluator; the simulator was built for graph, cluster
  // and costs.
  SampleEvaluator(const Graph& graph, const Cluster& cluster, const CostTable& costs,
                  const Simulator& simulator, ThreadPool& pool, size_t cache_entries = 1 << 14);

  double oom_charge_s() const { return oom_charge_s_; }
  double penalised_s(const SampleOutcome& o) const {
    return o.feasible ? o.step_time_s : oom_charge_s_;
  }
  double reward(const SampleOutcome& o) const;

  // Fills outcomes[i] for sample i; fill(i, placement) writes sample i's placement (called for the
  // samples simulated, in ascending order, on the calling thread). Returns the simulations run.
  // REQUIRES: keys.size() == outcomes.size().
  int64_t evaluate(std::span<const std::string> keys,
                   const std::function<void(size_t, Placement&)>& fill,
                   std::span<SampleOutcome> outcomes);

  void clear_cache() { cache_.clear(); }

 private:
  const Simulator& simulator_;
  ThreadPool& pool_;
  size_t cache_entries_;
  double oom_charge_s_ = 0;
  double reference_s_ = 1;
  std::vector<SimWorkspace> workspaces_;
  std::vector<SimResult> results_;
  std::vector<Placement> placements_;
  std::unordered_map<std::string, SampleOutcome> cache_;
};

class BestPlacement {
 public:
  // Offers one sample; fill(placement) writes its placement (called only when it is kept).
  // Returns whether it is a new best (penalised_s below every earlier one).
  bool offer(const SampleOutcome& outcome, double penalised_s,
             const std::function<void(Placement&)>& fill);

  double best_s() const { return best_s_; }  // INFINITY before the first offer
  bool best_feasible() const { return best_feasible_; }
  // The best placement when it fits or no OOM one overflowed, else the least-overflow one.
  const Placement& result() const;

 private:
  Placement best_;
  double best_s_ = std::numeric_limits<double>::infinity();
  bool best_feasible_ = false;
  Placement least_overflow_;
  SampleOutcome least_overflow_outcome_;
  bool have_least_overflow_ = false;
};

// One batch's outcomes as the REINFORCE placers (hsdag, hierarchical) use them.
struct BatchSummary {
  double mean_step_time_s = 0;  // OOM placements at their charge
  double batch_best_step_time_s = 0;
  double oom_fraction = 0;
  bool improved = false;        // some sample was a new best
  std::vector<double> rewards;  // per sample, SampleEvaluator::reward
  double mean_reward = 0;
  double reward_spread = 0;  // standard deviation of the rewards over the batch
};

// Rewards the outcomes and offers each, in order, to `best` (fill(i, placement) writes sample i's
// placement when it is kept). REQUIRES: outcomes not empty.
BatchSummary summarise_batch(const SampleEvaluator& evaluator,
                             std::span<const SampleOutcome> outcomes, BestPlacement& best,
                             const std::function<void(size_t, Placement&)>& fill);

// REINFORCE's baseline: an exponential moving average of the batch mean rewards, b <- decay * b +
// (1 - decay) * mean, started at the first batch's mean.
class RewardBaseline {
 public:
  explicit RewardBaseline(double decay) : decay_(decay) {}
  // Writes each sample's advantage, (reward - b) / spread, to `out` and returns true; when the
  // batch's rewards are all alike (spread below 1e-12: rounding, for rewards of -1 to -10) there
  // is nothing to learn: returns false and leaves `out` as is. Either way then moves b.
  bool advantages(const BatchSummary& batch, std::span<double> out);
  void reset() { have_value_ = false; }  // the next batch starts it again

 private:
  double decay_;
  double value_ = 0;
  bool have_value_ = false;
};

}  // namespace dplace
