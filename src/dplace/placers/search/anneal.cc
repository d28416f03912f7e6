#include "dplace/placers/search/anneal.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/core/rng.h"
#include "dplace/core/thread_pool.h"
#include "dplace/placers/builtin.h"
#include "dplace/placers/common/group_graph.h"
#include "dplace/placers/common/params.h"

namespace dplace {
namespace {

struct Candidate {
  std::string name;
  Placement placement;
};

// Step time, plus for an OOM placement P * (1 + 10 * overflow / capacity of the overflowing
// devices) (see anneal.h).
double penalised_cost(const SimResult& r, double penalty_s) {
  if (r.feasible) return r.step_time_s;
  int64_t capacity = 0, overflow = 0;
  for (const OomDevice& o : r.oom_devices) {
    capacity += o.capacity_bytes;
    overflow += o.overflow_bytes;
  }
  return r.step_time_s + penalty_s * (1.0 + 10.0 * double(overflow) / double(capacity));
}

// A search's result, and whether --budget-seconds stopped it (or one of its rounds) before the
// moves it was given: then the result depends on the machine's speed.
struct SearchOutcome {
  PlaceResult result;
  bool cut_by_budget = false;
};

// The search itself, from `start` (already simulated: start_sim) with the OOM penalty scale
// penalty_s; `result` carries the evaluations spent before. The budget counts from clock_start.
SearchOutcome anneal_search(const PlaceRequest& request, const AnnealOptions& options,
                            const std::string& start_name, Placement start,
                            const SimResult& start_sim, double penalty_s, PlaceResult result,
                            std::chrono::steady_clock::time_point clock_start) {
  const Graph& graph = *request.graph;
  const Cluster& cluster = *request.cluster;
  const GroupGraph groups(graph, cluster, *request.costs);
  const size_t ng = groups.num_groups();
  const int64_t block_size =
      options.block_size > 0 ? options.block_size : std::max<int64_t>(8, int64_t(ng) / 8);
  auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start).count();
  };
  auto cost_of = [&](const SimResult& r) { return penalised_cost(r, penalty_s); };
  SimWorkspace workspace;
  SimResult sim;

  Placement current = std::move(start);
  std::vector<DeviceId> device_of_group = groups_from_placement(graph, current);
  std::vector<uint32_t> position(ng);  // of each group in groups.order()
  for (size_t i = 0; i < ng; ++i) position[groups.order()[i].value()] = uint32_t(i);
  std::vector<GroupId> movable;
  for (size_t g = 0; g < ng; ++g) {
    if (groups.allowed(GroupId::from_index(g)).size() > 1)
      movable.push_back(GroupId::from_index(g));
  }
  const bool all_linked = !cluster.first_unlinked_pair().has_value();

  double current_cost = cost_of(start_sim);
  const double start_cost = current_cost;
  Placement best = current;
  double best_cost = current_cost;
  bool best_feasible = start_sim.feasible;
  int64_t best_at = 0;
  int64_t accepted = 0;
  const double temp0 = options.t_start * start_cost;
  const double temp1 = std::max(options.t_end * start_cost, 1e-300);
  const double log_ratio = temp0 > 0 ? std::log(temp1 / temp0) : 0;

  Rng rng(request.seed);
  std::vector<GroupId> moved;
  std::vector<DeviceId> previous;
  std::vector<GroupId> frontier;
  std::vector<uint8_t> in_block(ng, 0);
  int64_t done = 0;
  bool capped = false;
  auto move_group = [&](GroupId g, DeviceId d) {
    moved.push_back(g);
    previous.push_back(device_of_group[g.value()]);
    device_of_group[g.value()] = d;
    for (OpId op : graph.group_ops(g)) current.device_of_op[op.value()] = d;
  };
  // Log-uniform integer in [1, max]: small blocks often, large ones sometimes.
  auto log_uniform = [&](size_t max) {
    return std::max<size_t>(
        1, std::min(max, size_t(std::exp(rng.uniform01() * std::log(double(max) + 1.0)))));
  };
  auto random_other_device = [&](GroupId g) {
    const std::vector<DeviceId>& allowed = groups.allowed(g);
    const DeviceId here = device_of_group[g.value()];
    DeviceId d = allowed[rng.uniform_int(allowed.size() - 1)];
    if (d == here) d = allowed.back();  // uniform over the allowed devices other than `here`
    return d;
  };

  for (; !movable.empty() && done < options.evaluations; ++done) {
    if (elapsed_s() > request.budget_seconds) {  // a clock read is ~25 ns, a move a simulation
      capped = true;
      break;
    }
    if (request.progress && options.evaluations >= 10 && done % (options.evaluations / 10) == 0 &&
        done > 0) {
      print_to_stderr("{}: {}/{} moves, best {}{}\n", options.progress_label, done,
                      options.evaluations, format_seconds(best_cost),
                      best_feasible ? "" : " (OOM)");
    }
    const double temperature =
        temp0 * std::exp(log_ratio * double(done) / double(options.evaluations));
    moved.clear();
    previous.clear();
    const GroupId g = movable[rng.uniform_int(movable.size())];
    const double kind = rng.uniform01();
    if (kind < 0.3) {
      move_group(g, random_other_device(g));
    } else if (kind < 0.5) {
      const auto nbs = groups.neighbors(g);
      DeviceId target = DeviceId::invalid();
      if (!nbs.empty()) {
        const DeviceId d = device_of_group[nbs[rng.uniform_int(nbs.size())].group.value()];
        if (d != device_of_group[g.value()] && groups.allows(g, d)) target = d;
      }
      move_group(g, target.valid() ? target : random_other_device(g));
    } else if (kind < 0.75) {
      const DeviceId here = device_of_group[g.value()];
      const DeviceId target = random_other_device(g);
      const size_t limit = log_uniform(size_t(block_size));
      frontier.assign(1, g);
      in_block[g.value()] = 1;
      std::vector<GroupId> block;
      for (size_t head = 0; head < frontier.size() && block.size() < limit; ++head) {
        const GroupId x = frontier[head];
        block.push_back(x);
        for (const GroupNeighbor& nb : groups.neighbors(x)) {
          const GroupId y = nb.group;
          if (in_block[y.value()] || device_of_group[y.value()] != here ||
              !groups.allows(y, target)) {
            continue;
          }
          in_block[y.value()] = 1;
          frontier.push_back(y);
        }
      }
      for (GroupId x : frontier) in_block[x.value()] = 0;
      for (GroupId x : block) move_group(x, target);
    } else {
      // A segment of the topological group order, from g on: a pipeline-stage boundary move.
      const DeviceId target = random_other_device(g);
      const size_t length = log_uniform(size_t(block_size));
      const auto order = groups.order();
      for (size_t i = position[g.value()]; i < order.size() && i < position[g.value()] + length;
           ++i) {
        const GroupId x = order[i];
        if (device_of_group[x.value()] != target && groups.allows(x, target)) move_group(x, target);
      }
    }

    bool valid = true;
    if (!all_linked) {
      valid = placement_problem(graph, cluster, *request.costs, current).empty();
    }
    double candidate_cost = kInfiniteTime;
    if (valid) {
      request.simulator->run(current, workspace, sim);
      ++result.evaluations;
      candidate_cost = cost_of(sim);
    }
    // The best is taken over every placement simulated, rejected ones included: while the current
    // placement is OOM, a fitting one may cost more than its penalised cost and be rejected.
    // (Between fitting placements a rejected one never beats the best: it costs more than the
    // current one, which costs no less than the best.)
    if (valid && ((sim.feasible && !best_feasible) ||
                  (sim.feasible == best_feasible && candidate_cost < best_cost))) {
      best = current;
      best_cost = candidate_cost;
      best_feasible = sim.feasible;
      best_at = done + 1;
    }
    const double delta = candidate_cost - current_cost;
    const bool accept =
        valid &&
        (delta <= 0 || (temperature > 0 && rng.uniform01() < std::exp(-delta / temperature)));
    if (!accept) {
      for (size_t i = moved.size(); i-- > 0;) {
        const GroupId x = moved[i];
        device_of_group[x.value()] = previous[i];
        for (OpId op : graph.group_ops(x)) current.device_of_op[op.value()] = previous[i];
      }
      continue;
    }
    current_cost = candidate_cost;
    ++accepted;
  }

  result.placement = std::move(best);
  if (!best_feasible) {
    result.infeasible_reason =
        "no placement found that fits in memory (started from " + start_name + ")";
  }
  result.note = fmt::format("started from {} ({:.6g} s{}); {} moves, {} accepted, best at move {}",
                            start_name, start_sim.step_time_s, start_sim.feasible ? "" : ", OOM",
                            done, accepted, best_at);
  if (capped) {
    result.note += fmt::format(
        "; stopped by --budget-seconds before {} evaluations: the result depends on machine "
        "speed",
        options.evaluations);
  }
  return {.result = std::move(result), .cut_by_budget = capped};
}

// Feasible before OOM; then the step time, or the penalised cost between two OOM placements.
bool better(const SimResult& a, const SimResult& b, double penalty_s) {
  if (a.feasible != b.feasible) return a.feasible;
  return penalised_cost(a, penalty_s) < penalised_cost(b, penalty_s);
}

// anneal_search, in AnnealOptions::rounds rounds (anneal.h): waves of two searches from the best
// placement so far, round 2w at the options' temperatures with seed + 2w, round 2w + 1 at ten
// times t_start with seed + 2w + 1. A wave's rounds run side by side when options.threads allows;
// each only reads the shared request, so the result does not depend on it.
SearchOutcome anneal_rounds(const PlaceRequest& request, const AnnealOptions& options,
                            const std::string& start_name, const Placement& start,
                            const SimResult& start_sim, double penalty_s, PlaceResult result,
                            std::chrono::steady_clock::time_point clock_start) {
  if (options.rounds <= 1) {
    return anneal_search(request, options, start_name, start, start_sim, penalty_s,
                         std::move(result), clock_start);
  }
  auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start).count();
  };
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  ThreadPool pool(std::min<size_t>(2, options.threads == 0 ? hardware : options.threads));
  Placement best = start;
  SimResult best_sim = start_sim;
  std::string best_note;
  int best_round = -1;  // the start itself
  int rounds = 0;
  bool cut = false;
  while (rounds < options.rounds && elapsed_s() < request.budget_seconds) {
    const int wave_size = std::min(2, options.rounds - rounds);
    std::vector<SearchOutcome> found(wave_size);
    const std::string wave_start = rounds == 0 ? start_name : "the best so far";
    pool.parallel_for(wave_size, [&](size_t i, size_t) {
      PlaceRequest round = request;
      round.seed = request.seed + uint64_t(rounds) + i;
      round.progress = request.progress && i == 0;
      AnnealOptions one = options;
      one.rounds = 1;
      one.progress_label = fmt::format("{} round {}", options.progress_label, rounds + i + 1);
      if (i == 1) one.t_start *= 10;
      found[i] = anneal_search(round, one, wave_start, best, best_sim, penalty_s, PlaceResult{},
                               clock_start);
    });
    bool improved = false;
    for (int i = 0; i < wave_size; ++i) {
      result.evaluations += found[i].result.evaluations;
      cut = cut || found[i].cut_by_budget;
      const SimResult sim = request.simulator->run(found[i].result.placement);
      if (better(sim, best_sim, penalty_s)) {
        best = std::move(found[i].result.placement);
        best_sim = sim;
        best_note = std::move(found[i].result.note);
        best_round = rounds + i;
        improved = true;
      }
    }
    rounds += wave_size;
    if (!improved) break;
  }
  result.placement = std::move(best);
  result.infeasible_reason =
      best_sim.feasible
          ? ""
          : "no placement found that fits in memory (started from " + start_name + ")";
  result.note = fmt::format(
      "{} round{} of {} moves in waves of two (t_start {:g} and {:g}), {}", rounds,
      rounds == 1 ? "" : "s", options.evaluations, options.t_start, 10 * options.t_start,
      best_round < 0 ? fmt::format("none faster than the start, {} ({:.6g} s)", start_name,
                                   start_sim.step_time_s)
                     : fmt::format("the best from round {}: {}", best_round + 1, best_note));
  cut = cut || (rounds < options.rounds && elapsed_s() >= request.budget_seconds);
  if (cut) result.note += "; rounds cut by --budget-seconds: the result depends on machine speed";
  return {.result = std::move(result), .cut_by_budget = cut};
}

// What relabel_search found: the best placement and its simulation, the whole-device moves that
// led there, in order ("/cpu:0 onto /gpu:0", "/gpu:0 with /gpu:1"), and the simulations spent.
struct Relabelled {
  Placement placement;
  SimResult sim;
  std::vector<std::string> steps;
  int64_t evaluations = 0;
};

// Least gain, relative to the current step time, for which a whole-device move is taken. Without
// it the swap of two GPUs on different boards of a multi-GPU machine can win by microseconds,
// which only reorders the devices and sends the annealing down another trajectory.
constexpr double kRelabelMinGain = 0.01;

// The whole-device moves of anneal_from (anneal.h), from `start` (simulated: start_sim): in each
// pass every merge (a -> b) and every swap (a <-> b) is simulated, and the best of them is taken
// when better() than the current placement and, between fitting placements, at least
// kRelabelMinGain faster. Stops at the first pass that finds nothing so, after as many passes as
// there are devices, or at the budget (counted from clock_start).
Relabelled relabel_search(const PlaceRequest& request, const Placement& start,
                          const SimResult& start_sim, double penalty_s,
                          std::chrono::steady_clock::time_point clock_start) {
  const Graph& graph = *request.graph;
  const Cluster& cluster = *request.cluster;
  const GroupGraph groups(graph, cluster, *request.costs);
  const size_t ng = groups.num_groups();
  const size_t nd = cluster.num_devices();
  const bool all_linked = !cluster.first_unlinked_pair().has_value();
  auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start).count();
  };
  Relabelled out{.placement = start, .sim = start_sim};
  std::vector<DeviceId> device_of_group = groups_from_placement(graph, start);
  SimWorkspace workspace;
  SimResult sim;
  // The groups on `from` that allow `to` go there, and with `swap` those on `to` that allow
  // `from` go to `from`. Empty when that moves nothing (or, for a swap, nothing one way).
  auto relabelled = [&](DeviceId from, DeviceId to, bool swap) {
    std::vector<DeviceId> moved = device_of_group;
    bool there = false, back = false;
    for (size_t g = 0; g < ng; ++g) {
      const GroupId group = GroupId::from_index(g);
      if (device_of_group[g] == from && groups.allows(group, to)) {
        moved[g] = to;
        there = true;
      } else if (swap && device_of_group[g] == to && groups.allows(group, from)) {
        moved[g] = from;
        back = true;
      }
    }
    if (!there || (swap && !back)) moved.clear();
    return moved;
  };
  for (size_t pass = 0; pass < nd; ++pass) {
    std::vector<DeviceId> best_groups;
    SimResult best_sim = out.sim;
    std::string best_step;
    for (size_t a = 0; a < nd; ++a) {
      for (size_t b = 0; b < nd; ++b) {
        if (a == b) continue;
        const DeviceId from = DeviceId::from_index(a), to = DeviceId::from_index(b);
        for (const bool swap : {false, true}) {
          if (swap && b < a) continue;  // a swap is the same both ways
          if (elapsed_s() > request.budget_seconds) return out;
          std::vector<DeviceId> moved = relabelled(from, to, swap);
          if (moved.empty()) continue;
          const Placement candidate = placement_from_groups(graph, moved);
          if (!all_linked &&
              !placement_problem(graph, cluster, *request.costs, candidate).empty()) {
            continue;
          }
          request.simulator->run(candidate, workspace, sim);
          ++out.evaluations;
          if (better(sim, best_sim, penalty_s)) {
            best_groups = std::move(moved);
            best_sim = sim;
            best_step = fmt::format("{} {} {}", cluster.device(from).name, swap ? "with" : "onto",
                                    cluster.device(to).name);
          }
        }
      }
    }
    const bool gain =
        !out.sim.feasible || best_sim.step_time_s <= (1 - kRelabelMinGain) * out.sim.step_time_s;
    if (best_groups.empty() || !gain) break;
    device_of_group = std::move(best_groups);
    out.placement = placement_from_groups(graph, device_of_group);
    out.sim = best_sim;
    out.steps.push_back(std::move(best_step));
  }
  return out;
}

// One anneal_rounds from each of starts[order[k]] (order: the least-cost first), keeping the
// best result. The search from order[0] uses request.seed, so it is the single-start search; the
// one from order[k] uses seed + kStartSeedStride * k, apart from the rounds' seeds. With one round
// the searches run side by side on options.threads (at most two at once); with more, one after
// another, each using the threads for its waves. The result does not depend on the threads.
constexpr uint64_t kStartSeedStride = 1000;  // above the most rounds (1,000)
PlaceResult anneal_from_starts(const PlaceRequest& request, const AnnealOptions& options,
                               const std::vector<Candidate>& starts,
                               const std::vector<SimResult>& start_sims,
                               const std::vector<size_t>& order, double penalty_s,
                               PlaceResult result,
                               std::chrono::steady_clock::time_point clock_start) {
  std::vector<SearchOutcome> found(order.size());
  auto search = [&](size_t k) {
    PlaceRequest one = request;
    one.seed = request.seed + kStartSeedStride * k;
    one.progress = request.progress && k == 0;
    AnnealOptions labelled = options;
    labelled.progress_label =
        fmt::format("{} from {}", options.progress_label, starts[order[k]].name);
    found[k] = anneal_rounds(one, labelled, starts[order[k]].name, starts[order[k]].placement,
                             start_sims[order[k]], penalty_s, PlaceResult{}, clock_start);
  };
  if (options.rounds <= 1) {
    const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
    ThreadPool pool(std::min<size_t>(2, options.threads == 0 ? hardware : options.threads));
    pool.parallel_for(order.size(), [&](size_t k, size_t) { search(k); });
  } else {
    for (size_t k = 0; k < order.size(); ++k) search(k);
  }
  size_t best = 0;
  std::vector<SimResult> sims(order.size());
  std::vector<std::string> others;
  for (size_t k = 0; k < order.size(); ++k) {
    result.evaluations += found[k].result.evaluations;
    sims[k] = request.simulator->run(found[k].result.placement);
    if (better(sims[k], sims[best], penalty_s)) best = k;
  }
  // A losing search that the budget stopped might have won with its moves: say so too.
  bool other_cut = false;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == best) continue;
    other_cut = other_cut || found[k].cut_by_budget;
    others.push_back(fmt::format("from {} {:.6g} s{}{}", starts[order[k]].name, sims[k].step_time_s,
                                 sims[k].feasible ? "" : " (OOM)",
                                 found[k].cut_by_budget ? " (cut short)" : ""));
  }
  result.placement = std::move(found[best].result.placement);
  result.infeasible_reason = std::move(found[best].result.infeasible_reason);
  result.note =
      fmt::format("{} searches, from the {} least-cost starts; the best: {}; the other{}: {}",
                  order.size(), order.size(), found[best].result.note,
                  others.size() == 1 ? "" : "s", fmt::join(others, ", "));
  if (other_cut && !found[best].cut_by_budget) {
    result.note +=
        "; a losing search was stopped by --budget-seconds: the result depends on machine speed";
  }
  return result;
}

class AnnealPlacer final : public Placer {
  // Moves that would need a missing link are rejected (anneal_search); starts that need one are
  // not used.
  bool handles_missing_links() const override { return true; }
  bool uses_expert_placement() const override { return true; }  // a start (--param start)

  PlaceResult place_impl(const PlaceRequest& request) override {
    const PlacerParams params(
        "anneal", request.params,
        {"evaluations", "t_start", "t_end", "block_size", "start", "starts", "rounds", "threads"});
    const Graph& graph = *request.graph;
    const Cluster& cluster = *request.cluster;
    const int64_t evaluations =
        params.get_int("evaluations", default_anneal_evaluations(graph), 0, int64_t{1} << 40);
    const double t_start = params.get_double("t_start", 1e-4, 0.0, 10.0);
    const double t_end = params.get_double("t_end", 1e-6, 0.0, 10.0);
    // 0: the default, max(8, groups / 8).
    const int64_t block_size = params.get_int("block_size", 0, 1, int64_t{1} << 40);
    const int rounds = int(params.get_int("rounds", 1, 1, 1000));
    const size_t threads = size_t(params.get_int("threads", 0, 1, 1024));
    const size_t start_count =
        size_t(params.get_int("starts", 2, 1, int64_t(anneal_start_candidates().size())));
    std::vector<std::string> start_choices = {"best"};
    start_choices.insert(start_choices.end(), anneal_start_candidates().begin(),
                         anneal_start_candidates().end());
    const std::string start_from = params.get_choice("start", "best", start_choices);
    if (start_from == "expert" && !request.expert) {
      throw ConfigError(fmt::format(
          "placer 'anneal': --param start=expert but graph '{}' has no expert placement",
          graph.name()));
    }
    const auto clock_start = std::chrono::steady_clock::now();
    PlaceResult result;
    SimWorkspace workspace;
    double penalty_s = 0;

    // Start from the best cheap placement. The starts may take half the budget: once one has
    // been built, each later candidate gets an equal share of what is left of that half, and one
    // still running at the end of its share (m-etf on a thousand devices: placers that honour
    // PlaceRequest::deadline) is dropped; after the half, once there are as many starts as the
    // searches use, the remaining candidates are not run.
    const auto starts_deadline = clock_start + steady_seconds(request.budget_seconds / 2);
    std::vector<Candidate> starts;
    std::vector<std::string> cut_starts;
    std::vector<std::string> overran_starts;
    size_t candidates_left = anneal_start_candidates().size();
    for (const std::string& name : anneal_start_candidates()) {
      const size_t share = candidates_left--;
      if (start_from != "best" && start_from != name) continue;
      if (name == "expert") {
        if (request.expert && missing_link_problem(graph, cluster, *request.expert).empty()) {
          starts.push_back({name, *request.expert});
        }
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (starts.size() >= start_count && now > starts_deadline) {
        cut_starts.push_back(name);
        continue;
      }
      try {
        PlaceRequest sub = request;
        sub.params.clear();
        sub.progress = false;
        if (!starts.empty()) {
          const auto left = std::max(starts_deadline - now, std::chrono::steady_clock::duration{0});
          sub.deadline = now + left / share;
        } else {
          // The first start may take the whole budget (a search needs one), not more.
          sub.deadline = clock_start + steady_seconds(request.budget_seconds);
        }
        PlaceResult r = make_placer(name)->place(sub);
        result.evaluations += r.evaluations;
        starts.push_back({name, std::move(r.placement)});
        // scotch, mincut and metis cannot be stopped, and the others check the clock only every
        // so many ops: a start may end past its share.
        const auto end = std::chrono::steady_clock::now();
        if (sub.deadline && end > *sub.deadline) {
          overran_starts.push_back(
              fmt::format("{} ({:.3g} s)", name, std::chrono::duration<double>(end - now).count()));
        }
      } catch (const ConfigError&) {
        // e.g. no GPU in the cluster: not a start candidate
      } catch (const DeadlinePassed&) {
        cut_starts.push_back(name);
      }
    }
    if (starts.empty() && !cut_starts.empty()) {
      throw ConfigError(fmt::format(
          "placer 'anneal': no start placement within --budget-seconds {} ({} did not finish in "
          "time; give more time or another --param start)",
          request.budget_seconds, fmt::join(cut_starts, ", ")));
    }
    if (starts.empty()) {
      throw ConfigError(
          fmt::format("placer 'anneal': no start placement ('{}' does not apply to "
                      "cluster '{}')",
                      start_from, cluster.name()));
    }
    std::vector<SimResult> start_sims(starts.size());
    for (size_t i = 0; i < starts.size(); ++i) {
      request.simulator->run(starts[i].placement, workspace, start_sims[i]);
      ++result.evaluations;
    }
    // Penalty scale from the fastest start, then pick the least-cost start.
    double fastest_start = start_sims[0].step_time_s;
    for (const SimResult& r : start_sims) fastest_start = std::min(fastest_start, r.step_time_s);
    penalty_s = 2.0 * std::max(fastest_start, request.simulator->lower_bound_s());
    // The least-cost starts first; equal ones in the candidates' order.
    std::vector<size_t> order(starts.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return better(start_sims[a], start_sims[b], penalty_s);
    });
    order.resize(std::min(start_count, order.size()));

    const AnnealOptions options{.evaluations = evaluations,
                                .t_start = t_start,
                                .t_end = t_end,
                                .block_size = block_size,
                                .rounds = rounds,
                                .threads = threads};
    PlaceResult searched =
        order.size() == 1
            ? anneal_rounds(request, options, starts[order[0]].name, starts[order[0]].placement,
                            start_sims[order[0]], penalty_s, std::move(result), clock_start)
                  .result
            : anneal_from_starts(request, options, starts, start_sims, order, penalty_s,
                                 std::move(result), clock_start);
    if (!cut_starts.empty()) {
      searched.note += fmt::format(
          "; start candidates dropped for time (starts may take half of --budget-seconds): {}",
          fmt::join(cut_starts, ", "));
    }
    if (!overran_starts.empty()) {
      searched.note +=
          fmt::format("; start candidates that ran past their share of --budget-seconds: {}",
                      fmt::join(overran_starts, ", "));
    }
    return searched;
  }
};

}  // namespace

PlaceResult anneal_from(const PlaceRequest& request, const std::string& start_name,
                        const Placement& start, const AnnealOptions& options) {
  const auto clock_start = std::chrono::steady_clock::now();
  const std::string problem =
      placement_problem(*request.graph, *request.cluster, *request.costs, start);
  DPLACE_CHECK(problem.empty()) << "anneal_from: invalid start placement: " << problem;
  PlaceResult result;
  SimResult start_sim;
  SimWorkspace workspace;
  request.simulator->run(start, workspace, start_sim);
  ++result.evaluations;
  const double penalty_s =
      2.0 * std::max(start_sim.step_time_s, request.simulator->lower_bound_s());
  Relabelled relabelled = relabel_search(request, start, start_sim, penalty_s, clock_start);
  result.evaluations += relabelled.evaluations;
  const bool moved = !relabelled.steps.empty();
  PlaceResult polished =
      anneal_rounds(request, options, moved ? start_name + " relabelled" : start_name,
                    relabelled.placement, relabelled.sim, penalty_s, std::move(result), clock_start)
          .result;
  polished.note = fmt::format(
      "whole-device moves: {}; {}",
      moved ? fmt::format("{} ({:.6g} s to {:.6g} s)", fmt::join(relabelled.steps, ", "),
                          start_sim.step_time_s, relabelled.sim.step_time_s)
            : "none 1% faster",
      polished.note);
  return polished;
}

// The expert placement (when there is one) and every classic placer but m-sct, whose LP takes
// seconds on the large graphs. The three candidates of before the others were added come first.
const std::vector<std::string>& anneal_start_candidates() {
  static const std::vector<std::string> names = {"single-gpu",  "m-etf",     "expert", "heft",
                                                 "m-topo",      "scotch",    "mincut", "metis",
                                                 "round-robin", "single-cpu"};
  return names;
}

int64_t default_anneal_evaluations(const Graph& graph) {
  const double size = double(graph.num_ops() + graph.num_edges());
  return std::clamp<int64_t>(int64_t(1e8 / std::max(size, 1.0)), 2000, 20000);
}

std::unique_ptr<Placer> make_anneal_placer() { return std::make_unique<AnnealPlacer>(); }

void register_search_placers() {
  register_placer({"anneal",
                   "simulated annealing over group moves, the simulator as objective (seeded)",
                   true, true, make_anneal_placer});
}

PlaceResult polish_learned(const PlaceRequest& request, const std::string& placer,
                           const PlaceResult& learned, std::chrono::steady_clock::time_point start,
                           const AnnealOptions& options) {
  const auto polish_start = std::chrono::steady_clock::now();
  PlaceRequest refine = request;
  refine.budget_seconds = std::max(
      0.0, request.budget_seconds - std::chrono::duration<double>(polish_start - start).count());
  PlaceResult polished = anneal_from(refine, placer, learned.placement, options);
  auto describe = [](const SimResult& r) {
    return fmt::format("{:.6g} s{}", r.step_time_s, r.feasible ? "" : " (OOM)");
  };
  polished.evaluations += learned.evaluations;
  polished.note = fmt::format(
      "{}; polished by anneal: learned {}, polished {} in {:.1f} s ({})", learned.note,
      describe(request.simulator->run(learned.placement)),
      describe(request.simulator->run(polished.placement)),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - polish_start).count(),
      polished.note);
  return polished;
}

PlaceResult learn_then_polish(const PlaceRequest& request, const std::string& placer,
                              const PolishOptions& polish, size_t threads,
                              const std::function<PlaceResult(const PlaceRequest&)>& learn) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t moves = polish.evaluations >= 0
                            ? polish.evaluations
                            : kPolishFactor * default_anneal_evaluations(*request.graph);
  if (moves == 0) return learn(request);
  PlaceRequest learn_request = request;
  learn_request.budget_seconds = request.budget_seconds * (1 - polish.share);
  const PlaceResult learned = learn(learn_request);
  return polish_learned(request, placer, learned, start,
                        AnnealOptions{.evaluations = moves,
                                      .rounds = polish.rounds,
                                      .threads = threads,
                                      .progress_label = placer + ": polishing"});
}

}  // namespace dplace
