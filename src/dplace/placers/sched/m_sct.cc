// m-sct: ETF with the favourite children of the SCT linear program (Baechi, Jeon et al., SoCC
// 2020, after Hanen and Munier 2001).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "dplace/placers/common/list_schedule.h"
#include "dplace/placers/common/memory.h"
#include "dplace/placers/common/params.h"
#include "dplace/placers/sched/etf.h"
#include "dplace/placers/sched/sched_placers.h"
#include "dplace/placers/sched/sct_lp.h"

namespace dplace {
namespace {

// Tasks are ops with their fastest allowed time; an edge per (producer, consumer) op pair carries
// the bytes the consumer reads from the producer at the mean link's latency and bandwidth. Edges
// out of free sources (is_free_source: weights, inputs) are left out: the list schedule places
// such an op with its first consumer anyway (ListSchedule's deferral), so no favourite is needed.
SctLpProblem build_problem(const PlaceRequest& request, const GroupGraph& groups) {
  const Graph& graph = *request.graph;
  const Cluster& cluster = *request.cluster;
  const MeanLinkCost link_cost = cluster.mean_link_cost();
  SctLpProblem problem;
  problem.duration_s.resize(graph.num_ops());
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    const OpId op = OpId::from_index(i);
    problem.duration_s[i] = request.costs->fastest_time_s(op);
    if (is_free_source(graph, groups, *request.costs, op)) continue;
    for (OpId s : graph.successors(op)) {
      problem.edges.push_back(
          {uint32_t(i), s.value(), link_cost.transfer_s(graph.bytes_between(op, s))});
    }
  }
  return problem;
}

class MSctPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    const PlacerParams params(
        "m-sct", request.params,
        {"memory_fraction", "memory_retries", "lp_max_edges", "devices", "reserve"});
    const double fraction = params.get_double("memory_fraction", 1.0, 1e-6, 1.0);
    const int retries = static_cast<int>(params.get_int("memory_retries", 4, 0, 100));
    const int64_t max_edges = params.get_int("lp_max_edges", 200000, 0, int64_t{1} << 40);
    const GroupGraph groups(*request.graph, *request.cluster, *request.costs);

    EtfOptions options;
    const std::string reserve =
        params.get_choice("reserve", "urgent", {"urgent", "finish", "none"});
    options.reservation = reserve == "urgent"   ? FavouriteReservation::kUrgent
                          : reserve == "finish" ? FavouriteReservation::kFinishBefore
                                                : FavouriteReservation::kNone;
    options.accelerators_only =
        params.get_choice("devices", "accelerators", {"accelerators", "all"}) == "accelerators";
    std::string note;
    const auto start = std::chrono::steady_clock::now();
    if (request.graph->num_edges() > size_t(max_edges)) {
      note =
          fmt::format("graph has {} edges > lp_max_edges={}: no favourite children (plain m-etf)",
                      request.graph->num_edges(), max_edges);
    } else {
      const SctLpProblem problem = build_problem(request, groups);
      // The LP is the slow part (tens of seconds at 10^5 edges); it gets the budget, less a tenth
      // for the list scheduling after it.
      const double built_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double lp_limit_s = std::max(0.9 * request.budget_seconds - built_s, 1e-3);
      const SctLpSolution solution = solve_sct_lp(problem, lp_limit_s);
      if (solution.optimal) {
        options.favourite_child = favourite_children(problem, solution);
        size_t count = 0;
        for (int64_t c : options.favourite_child) count += c >= 0;
        note = fmt::format("LP relaxation makespan {:.6g} s; {} favourite children",
                           solution.makespan_s, count);
      } else {
        note = fmt::format(
            "LP not solved ({}{}): no favourite children (plain m-etf)", solution.status,
            solution.time_limit_reached ? fmt::format(" after {:.3g} s", lp_limit_s) : "");
      }
    }
    const auto schedule_start = std::chrono::steady_clock::now();
    PlaceResult result = to_place_result(schedule_with_memory_retries(
        request, fraction, retries, [&](const std::vector<int64_t>& limits) {
          return run_etf(request, groups, limits, options);
        }));
    result.note = result.note.empty() ? note : note + "; " + result.note;
    // The budget bounds the LP; the list scheduling after it is m-etf's, which takes what it
    // takes. When that ran past the budget, say by how much.
    const auto end = std::chrono::steady_clock::now();
    const double total_s = std::chrono::duration<double>(end - start).count();
    if (total_s > request.budget_seconds) {
      result.note += fmt::format(
          "; the list scheduling took {:.3g} s, which --budget-seconds does not bound (m-sct took "
          "{:.3g} s in all)",
          std::chrono::duration<double>(end - schedule_start).count(), total_s);
    }
    return result;
  }
};

}  // namespace

std::unique_ptr<Placer> make_m_sct_placer() { return std::make_unique<MSctPlacer>(); }

}  // namespace dplace
