#include "dplace/placers/pipeline/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_map>

#include "dplace/core/error.h"
#include "dplace/placers/pipeline/latency.h"
#include "dplace/placers/pipeline/refine.h"
#include "dplace/placers/pipeline/throughput_dp.h"
#include "dplace/placers/pipeline/throughput_ilp.h"
#include "dplace/placers/pipeline/units.h"

namespace dplace {

namespace {

using Clock = std::chrono::steady_clock;

// The least safety cap of the local search without contiguity, whatever --time-limit.
constexpr double kMinSearchCapS = 30;
// The start temperature of the second, cold local search without contiguity.
constexpr double kColdStartTemperature = 0.003;

double relative_gap(double value, double bound) {
  if (!(value > 0)) return 0.0;
  return std::max(0.0, (value - bound) / value);
}

void solve_throughput(const PipelineProblem& p, const PipelineOptions& opt, PipelinePlan& plan) {
  const UnitDag dag = build_unit_dag(p);
  ThroughputDpOptions dp_options;
  dp_options.memory_budget_bytes = opt.memory_budget_bytes;
  dp_options.time_limit_s = opt.dp_time_limit_s;
  dp_options.refine_seed = opt.seed;
  const ThroughputDpResult dp = solve_contiguous_throughput(p, dag, dp_options);
  plan.ideals = dp.num_ideals;
  plan.ideal_pairs = dp.pairs_visited;
  plan.chain_upper_bound_s = dp.chain_upper_bound_s;
  plan.note = dp.note;
  if (!dp.feasible) {
    plan.feasible = false;
    plan.infeasible_reason = "no contiguous split fits the memory caps and allowed device types";
  }
  if (opt.contiguous) {
    plan.method = dp.num_ideals > 0 ? "ideal-dp" : "chain-dp";
    if (!dp.feasible) return;
    plan.device_of_node = device_of_nodes(dag, dp.device_of_unit);
    plan.optimal = dp.optimal;
    evaluate_plan(p, plan);
    plan.objective_s = plan.max_load_s;
    plan.lower_bound_s = dp.optimal ? plan.max_load_s : std::min(dp.lower_bound_s, plan.max_load_s);
    plan.gap = dp.optimal ? 0.0 : relative_gap(plan.objective_s, plan.lower_bound_s);
    return;
  }

  ThroughputIlpOptions ilp_options;
  ilp_options.time_limit_s = opt.time_limit_s;
  ilp_options.threads = opt.threads;
  std::string search_note;
  if (dp.feasible) {
    // A better warm start, and the answer when CBC stops early: the local search without the
    // contiguity constraint, from the contiguous split, twice at once: from the default start
    // temperature, which explores, and from a cold one, which mostly descends near the start.
    // Each does better on some graphs (docs/pipeline.md); the better result is kept (ties: the
    // hot one), so the result depends on the seed only.
    SplitRefineOptions search;
    search.contiguous = false;
    search.seed = opt.seed;
    // A safety cap only: the search is a fixed number of moves, so that its result does not
    // depend on the machine's speed; a quarter of the limit alone cut it on gnmt4 and gnmt8.
    search.time_limit_s = std::max(0.25 * opt.time_limit_s, kMinSearchCapS);
    const auto search_start = Clock::now();
    const HotAndColdRefineResult searched =
        refine_split_hot_and_cold(p, dag, dp.device_of_unit, search, kColdStartTemperature);
    const SplitRefineResult& r = searched.best;
    const bool cold_won = searched.cold_won;
    const double search_s = std::chrono::duration<double>(Clock::now() - search_start).count();
    const bool better = r.max_load_s < dp.max_load_s * (1 - 1e-9);
    ilp_options.warm_start = device_of_nodes(dag, better ? r.device_of_unit : dp.device_of_unit);
    if (better) {
      search_note = fmt::format(
          "local search without contiguity improved the contiguous split from {:.4f} to {:.4f} "
          "ms in {:.1f} s ({} start){}",
          1e3 * dp.max_load_s, 1e3 * r.max_load_s, search_s, cold_won ? "cold" : "hot",
          r.stopped_by_time_limit ? " (stopped by its time limit)" : "");
    } else if (r.stopped_by_time_limit) {
      search_note = fmt::format(
          "local search without contiguity found nothing better before its time limit ({:.1f} s)",
          search.time_limit_s);
    } else {
      search_note = fmt::format(
          "local search without contiguity found nothing better than the contiguous split in "
          "{:.1f} s",
          search_s);
    }
  }
  const ThroughputIlpResult ilp = solve_throughput_ilp(p, ilp_options);
  plan.method = "ilp-cbc";
  if (!ilp.feasible) {
    if (!dp.feasible) {
      plan.infeasible_reason = ilp.note.empty() ? plan.infeasible_reason : ilp.note;
      return;
    }
    plan.device_of_node = ilp_options.warm_start;
    plan.note = ilp.note + (!search_note.empty()            ? "; kept the local search's split"
                            : dp.optimal || dp.note.empty() ? "; kept the contiguous optimum"
                                                            : "; kept the contiguous split");
  } else {
    plan.device_of_node = ilp.device_of_node;
  }
  evaluate_plan(p, plan);
  if (dp.feasible) {
    // The warm start is a valid non-contiguous split: keep it if CBC did not beat it.
    PipelinePlan contiguous = plan;
    contiguous.device_of_node = ilp_options.warm_start;
    evaluate_plan(p, contiguous);
    if (contiguous.max_load_s < plan.max_load_s) {
      plan.device_of_node = contiguous.device_of_node;
      evaluate_plan(p, plan);
    }
  }
  plan.objective_s = plan.max_load_s;
  plan.lower_bound_s = std::min(plan.max_load_s, ilp.best_bound_s);
  plan.gap = relative_gap(plan.objective_s, plan.lower_bound_s);
  plan.optimal = ilp.optimal || plan.gap <= 1e-9;
  if (plan.optimal) plan.gap = 0;
  if (!ilp.optimal && plan.note.empty()) {
    plan.note =
        fmt::format("CBC stopped at its {} s limit; gap {:.2f}%", opt.time_limit_s, 100 * plan.gap);
  }
  for (const std::string& part : {dp.optimal ? std::string() : dp.note, search_note}) {
    if (!part.empty()) plan.note += (plan.note.empty() ? "" : "; ") + part;
  }
}

void solve_latency(const PipelineProblem& p, const PipelineOptions& opt, PipelinePlan& plan) {
  LatencyResult r;
  if (opt.latency_method == LatencyMethod::kGreedy) {
    r = latency_greedy(p);
    plan.method = "latency-greedy";
  } else {
    r = latency_ilp(p, LatencyIlpOptions{opt.time_limit_s, opt.threads});
    plan.method = "latency-ilp-cbc";
  }
  plan.note = r.note;
  if (!r.feasible) {
    plan.feasible = false;
    plan.infeasible_reason = r.note.empty() ? "no feasible split" : r.note;
    return;
  }
  plan.device_of_node = r.device_of_node;
  evaluate_plan(p, plan);
  // Accelerator subgraphs are contiguous; pool nodes run independently of any order.
  plan.contiguous = true;
  const LatencyEvaluation ev = evaluate_latency(p, plan.device_of_node);
  plan.latency_s = ev.latency_s;
  plan.objective_s = ev.latency_s;
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    if (p.types[p.type_of_device(static_cast<int>(d))].pays_communication &&
        !plan.devices[d].nodes.empty()) {
      plan.devices[d].start_s = ev.start_s[d];
      plan.devices[d].finish_s = ev.finish_s[d];
    }
  }
  plan.lower_bound_s = std::min(plan.latency_s, r.best_bound_s);
  plan.gap = relative_gap(plan.latency_s, plan.lower_bound_s);
  // A split at its lower bound is optimal, whichever method found it (the greedy one too).
  plan.optimal = r.optimal || plan.gap <= 1e-9;
  if (plan.optimal) plan.gap = 0;
  if (opt.latency_method == LatencyMethod::kIlp && !plan.optimal) {
    const std::string gap = fmt::format("gap {:.2f}%", 100 * plan.gap);
    plan.note = plan.note.empty()
                    ? fmt::format("CBC stopped at its {} s limit; {}", opt.time_limit_s, gap)
                    : plan.note + "; " + gap;
  }
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", bytes, units[u]);
}

}  // namespace

std::string_view pipeline_objective_name(PipelineObjective objective) {
  return objective == PipelineObjective::kThroughput ? "throughput" : "latency";
}

std::optional<PipelineObjective> parse_pipeline_objective(std::string_view word) {
  if (word == "throughput") return PipelineObjective::kThroughput;
  if (word == "latency") return PipelineObjective::kLatency;
  return std::nullopt;
}

void evaluate_plan(const PipelineProblem& p, PipelinePlan& plan) {
  const PipelineEvaluation ev = evaluate_pipeline(p, plan.device_of_node);
  plan.devices.clear();
  for (int d = 0; d < p.num_devices(); ++d) {
    const int t = p.type_of_device(d);
    PipelineDevicePlan dev;
    dev.name = p.device_name(d);
    dev.type = p.types[t].name;
    dev.load_s = ev.devices[d].load_s;
    dev.compute_s = ev.devices[d].compute_s;
    dev.comm_s = ev.devices[d].comm_s;
    dev.memory_bytes = ev.devices[d].memory_bytes;
    dev.memory_cap_bytes = p.types[t].memory_cap_bytes;
    dev.nodes = ev.devices[d].nodes;
    plan.devices.push_back(std::move(dev));
  }
  plan.max_load_s = ev.max_load_s;
  plan.feasible = ev.violation.empty();
  plan.infeasible_reason = ev.violation;
  plan.contiguous = ev.contiguous;
}

PipelinePlan solve_pipeline(const PipelineRequest& request) {
  DPLACE_CHECK(request.problem != nullptr) << "PipelineRequest without a problem";
  const PipelineProblem& p = *request.problem;
  validate_pipeline_problem(p);
  const auto start = Clock::now();
  PipelinePlan plan;
  plan.objective = request.options.objective;
  if (request.options.objective == PipelineObjective::kThroughput) {
    solve_throughput(p, request.options, plan);
  } else {
    solve_latency(p, request.options, plan);
  }
  plan.solve_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return plan;
}

std::vector<int> assignment_from_split(const PipelineProblem& p,
                                       const std::vector<std::vector<int64_t>>& cpu_sets,
                                       const std::vector<std::vector<int64_t>>& accel_sets) {
  int cpu_type = -1;
  int accel_type = -1;
  for (size_t t = 0; t < p.types.size(); ++t) {
    if (!p.types[t].pays_communication && cpu_type < 0) cpu_type = static_cast<int>(t);
    if (p.types[t].pays_communication && accel_type < 0) accel_type = static_cast<int>(t);
  }
  std::unordered_map<int64_t, uint32_t> node_of_id;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (p.nodes[i].external_id >= 0) node_of_id.emplace(p.nodes[i].external_id, i);
  }
  std::vector<int> device(p.nodes.size(), -1);
  auto place_sets = [&](const std::vector<std::vector<int64_t>>& sets, int type, const char* what) {
    const int available = type < 0 ? 0 : p.types[type].count;
    for (size_t s = 0; s < sets.size(); ++s) {
      if (sets[s].empty()) continue;
      if (static_cast<int>(s) >= available) {
        throw ConfigError(
            fmt::format("split of '{}': {} set {} but the problem has {} {} device(s)", p.name,
                        what, s, available, what));
      }
      const int d = p.first_device_of_type(type) + static_cast<int>(s);
      for (int64_t id : sets[s]) {
        auto it = node_of_id.find(id);
        if (it == node_of_id.end()) {
          throw ConfigError(fmt::format("split of '{}': no node with id {}", p.name, id));
        }
        if (device[it->second] != -1) {
          throw ConfigError(fmt::format("split of '{}': node {} is listed twice", p.name, id));
        }
        device[it->second] = d;
      }
    }
  };
  place_sets(cpu_sets, cpu_type, "cpu");
  place_sets(accel_sets, accel_type, "accelerator");
  // Unlisted nodes follow their colour class.
  const ColourClasses cc = colour_classes(p);
  std::vector<int> device_of_class(cc.num_classes, -1);
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (device[i] < 0) continue;
    int& d = device_of_class[cc.class_of_node[i]];
    if (d >= 0 && d != device[i]) {
      throw ConfigError(fmt::format("split of '{}': colour class of node '{}' is split", p.name,
                                    p.nodes[i].name));
    }
    d = device[i];
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (device[i] >= 0) continue;
    device[i] = device_of_class[cc.class_of_node[i]];
    if (device[i] < 0) {
      throw ConfigError(
          fmt::format("split of '{}': node '{}' is not listed and no node of its "
                      "colour class is",
                      p.name, p.nodes[i].name));
    }
  }
  return device;
}

Json pipeline_plan_to_json(const PipelineProblem& p, const PipelinePlan& plan) {
  Json j = Json::object();
  j["graph"] = p.name;
  j["objective"] = std::string(pipeline_objective_name(plan.objective));
  j["method"] = plan.method;
  j["time_unit"] = "s";
  j["feasible"] = plan.feasible;
  if (!plan.feasible) j["infeasible_reason"] = plan.infeasible_reason;
  j["contiguous"] = plan.contiguous;
  j["max_load"] = plan.max_load_s;
  if (plan.objective == PipelineObjective::kLatency) j["latency"] = plan.latency_s;
  j["objective_value"] = plan.objective_s;
  j["lower_bound"] = plan.lower_bound_s;
  j["gap"] = plan.gap;
  j["optimal"] = plan.optimal;
  j["solve_seconds"] = plan.solve_seconds;
  if (plan.objective == PipelineObjective::kThroughput) {
    j["ideals"] = plan.ideals;
    j["ideal_pairs"] = plan.ideal_pairs;
    if (std::isfinite(plan.chain_upper_bound_s)) j["chain_upper_bound"] = plan.chain_upper_bound_s;
  }
  if (!plan.note.empty()) j["note"] = plan.note;
  Json devices = Json::array();
  for (const PipelineDevicePlan& d : plan.devices) {
    Json dj = Json::object();
    dj["name"] = d.name;
    dj["type"] = d.type;
    dj["load"] = d.load_s;
    dj["compute"] = d.compute_s;
    dj["communication"] = d.comm_s;
    dj["memory_bytes"] = d.memory_bytes;
    dj["memory_cap_bytes"] =
        std::isfinite(d.memory_cap_bytes) ? Json(d.memory_cap_bytes) : Json(nullptr);
    if (d.start_s) dj["start"] = *d.start_s;
    if (d.finish_s) dj["finish"] = *d.finish_s;
    Json ops = Json::array();
    for (uint32_t n : d.nodes) ops.push_back(p.nodes[n].name);
    dj["ops"] = std::move(ops);
    devices.push_back(std::move(dj));
  }
  j["devices"] = std::move(devices);
  return j;
}

std::string pipeline_plan_table(const PipelineProblem& p, const PipelinePlan& plan) {
  std::string out;
  const std::string objective(pipeline_objective_name(plan.objective));
  // What was searched, then (where the search allowed both) what was found: "(contiguous
  // split)" alone used to read as the request on a run of the non-contiguous program.
  std::string scope;
  if (plan.objective == PipelineObjective::kThroughput) {
    if (plan.method != "ilp-cbc") {
      scope = " (contiguous splits only)";
    } else {
      scope = " (any split)";
      if (plan.feasible) {
        scope += plan.contiguous ? "; the split found is contiguous"
                                 : "; the split found is non-contiguous";
      }
    }
  }
  out += fmt::format("pipeline plan for '{}': objective {}, method {}{}\n", p.name, objective,
                     plan.method, scope);
  if (!plan.feasible) {
    out += fmt::format("no feasible split: {}\n", plan.infeasible_reason);
    return out;
  }
  if (plan.objective == PipelineObjective::kThroughput) {
    out += fmt::format("max load {:.4f} ms per sample ({:.1f} samples/s)", plan.max_load_s * 1e3,
                       plan.max_load_s > 0 ? 1.0 / plan.max_load_s : 0.0);
  } else {
    out += fmt::format("latency {:.4f} ms per sample (max load {:.4f} ms)", plan.latency_s * 1e3,
                       plan.max_load_s * 1e3);
  }
  out += plan.optimal ? ", optimal"
                      : fmt::format(", gap {:.2f}% to lower bound {:.4f} ms", 100 * plan.gap,
                                    plan.lower_bound_s * 1e3);
  out += fmt::format("; solved in {:.3f} s", plan.solve_seconds);
  if (plan.objective == PipelineObjective::kThroughput && plan.ideals > 0) {
    out += fmt::format(" ({} ideals)", plan.ideals);
  }
  out += "\n";
  if (!plan.note.empty()) out += "note: " + plan.note + "\n";
  const bool latency = plan.objective == PipelineObjective::kLatency;
  // Columns as wide as the longest name ("gpu@/gpu:2" types used to push the row out of line).
  size_t name_width = 14, type_width = 8;
  for (const PipelineDevicePlan& d : plan.devices) {
    name_width = std::max(name_width, d.name.size());
    type_width = std::max(type_width, d.type.size());
  }
  out += fmt::format("{:<{}} {:<{}} {:>11} {:>11} {:>10} {:>22} {:>6}{}\n", "device", name_width,
                     "type", type_width, "load ms", "compute ms", "comm ms", "memory", "ops",
                     latency ? "   start ms  finish ms" : "");
  for (const PipelineDevicePlan& d : plan.devices) {
    std::string memory = format_bytes(d.memory_bytes);
    if (std::isfinite(d.memory_cap_bytes) && d.memory_cap_bytes > 0) {
      memory += fmt::format(" ({:.0f}%)", 100 * d.memory_bytes / d.memory_cap_bytes);
    }
    out += fmt::format("{:<{}} {:<{}} {:>11.4f} {:>11.4f} {:>10.4f} {:>22} {:>6}", d.name,
                       name_width, d.type, type_width, d.load_s * 1e3, d.compute_s * 1e3,
                       d.comm_s * 1e3, memory, d.nodes.size());
    if (latency && d.start_s) {
      out += fmt::format(" {:>10.4f} {:>10.4f}", *d.start_s * 1e3, *d.finish_s * 1e3);
    }
    out += "\n";
  }
  return out;
}

Placement pipeline_placement(const PipelineProblem& p, const PipelinePlan& plan) {
  DPLACE_CHECK(plan.feasible) << "placement of an infeasible plan";
  Placement placement;
  placement.device_of_op.resize(plan.device_of_node.size());
  for (size_t i = 0; i < plan.device_of_node.size(); ++i) {
    const int d = plan.device_of_node[i];
    const int t = p.type_of_device(d);
    DPLACE_CHECK(!p.types[t].cluster_devices.empty()) << "problem has no cluster devices";
    placement.device_of_op[i] = p.types[t].cluster_devices[d - p.first_device_of_type(t)];
  }
  return placement;
}

}  // namespace dplace
