// dplace pipeline GRAPH [--cluster C] [--objective throughput|latency] [--contiguous]
//                       [--latency-method ilp|greedy] [--time-limit S] [--seed N] [--json]
//                       [-o P.json] [--trace T.json] [--dot F]
//
// Pipeline partitioning of Tarnawski et al. (NeurIPS 2020), docs/pipeline.md:
//  * --objective throughput --contiguous: the exact DP over ideals (minimum max-load);
//  * --objective throughput without --contiguous: the non-contiguous integer program (CBC, within
//    --time-limit, warm-started with the contiguous optimum or a local search's split; the gap is
//    reported). Where the DP cannot prove its split optimal, and before CBC, a seeded local search
//    improves the split (--seed);
//  * --objective latency: the single-sample-latency integer program (CBC) or its greedy baseline.
// Without --cluster, a dnn-partitioning file's implied cluster is used. The plan is also
// simulated as one ordinary step (docs/simulator.md) so that -o/--trace/--dot work as for
// `place`.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dplace/cli/commands.h"
#include "dplace/cli/report.h"
#include "dplace/cli/workload.h"
#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/placers/pipeline/pipeline.h"

namespace dplace::cli {
namespace {

struct PipelineArgs {
  GraphArgs graph;
  std::optional<std::string> cluster;
  std::string objective = "throughput";
  bool contiguous = false;
  std::optional<std::string> latency_method;  // default ilp; latency objective only
  double time_limit_s = 60;
  uint64_t seed = 1;
  OutputArgs out;
};

void run_pipeline(const PipelineArgs& args) {
  check_output_paths(args.out);
  PipelineOptions options;
  const auto objective = parse_pipeline_objective(args.objective);
  if (!objective) {
    throw ConfigError(
        fmt::format("--objective '{}': expected throughput or latency", args.objective));
  }
  options.objective = *objective;
  options.contiguous = args.contiguous;
  if (args.latency_method && options.objective != PipelineObjective::kLatency) {
    throw ConfigError("--latency-method applies to --objective latency only");
  }
  const std::string method = args.latency_method.value_or("ilp");
  if (method == "ilp") {
    options.latency_method = LatencyMethod::kIlp;
  } else if (method == "greedy") {
    options.latency_method = LatencyMethod::kGreedy;
  } else {
    throw ConfigError(fmt::format("--latency-method '{}': expected ilp or greedy", method));
  }
  check_limit_seconds("--time-limit", args.time_limit_s);
  options.time_limit_s = args.time_limit_s;
  options.seed = args.seed;

  Session session(load_workload(args.graph), args.cluster);
  const PipelineProblem problem =
      pipeline_problem_from_graph(session.graph(), session.cluster(), session.costs());
  PipelineRequest request;
  request.problem = &problem;
  request.options = options;
  const PipelinePlan plan = solve_pipeline(request);

  if (!plan.feasible && !args.out.placement_path.empty()) {
    throw ConfigError(fmt::format("{}: no feasible split to write ({})", args.out.placement_path,
                                  plan.infeasible_reason));
  }
  std::optional<Evaluation> step;
  std::string not_simulated;  // why a feasible plan has no simulated step
  if (plan.feasible) {
    Placement placement = pipeline_placement(problem, plan);
    not_simulated = missing_link_problem(session.graph(), session.cluster(), placement);
    if (not_simulated.empty()) {
      step = evaluate(session, "pipeline", std::move(placement));
      step->placement_seconds = plan.solve_seconds;
      step->note = plan.note;
    } else if (!args.out.placement_path.empty() || !args.out.trace_path.empty() ||
               !args.out.dot_path.empty()) {
      throw ConfigError(fmt::format("cluster '{}': the split cannot be written: {}",
                                    session.cluster().name(), not_simulated));
    }
  }
  // Warnings come after the last error this command can raise, so a failure stays one line.
  print_input_warnings();
  for (const std::string& w : problem.warnings)
    print_to_stderr("dplace: warning: {}\n", one_line(w));
  if (!not_simulated.empty()) {
    print_to_stderr("dplace: warning: cluster '{}': the split is not simulated: {}\n",
                    session.cluster().name(), not_simulated);
  }
  if (args.out.json) {
    Json j = pipeline_plan_to_json(problem, plan);
    j["cluster"] = session.cluster().name();
    j["placer"] = "pipeline";
    if (step) {
      // The keys every command's --json carries (docs/cli.md), from the simulated step;
      // the whole simulation object is kept under "simulation".
      const Json sim = evaluation_to_json(session, *step);
      for (const char* key : {"step_time_s", "oom_devices", "peak_memory_bytes", "lower_bound_s",
                              "placement_seconds", "evaluations"}) {
        if (sim.contains(key)) j[key] = sim[key];
      }
      j["simulation"] = sim;
    }
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}", pipeline_plan_table(problem, plan));
    if (step) {
      // The plan's memory counts node sizes (weights and temporaries, not the activations a
      // training step keeps for its backward pass), so a plan that fits may still run out of
      // memory as one ordinary step: say so on the line that reports that step.
      std::vector<std::string> oom;
      for (const OomDevice& d : step->sim.oom_devices)
        oom.push_back(session.cluster().device(d.device).name);
      fmt::print(
          "one step of this placement, simulated without pipelining: {}{}\n",
          format_seconds(step->sim.step_time_s),
          oom.empty() ? std::string() : fmt::format(", out of memory on {}", fmt::join(oom, ", ")));
    }
  }
  if (step) write_outputs(session, *step, args.out);
}

}  // namespace

void add_pipeline_command(CLI::App& app) {
  auto args = std::make_shared<PipelineArgs>();
  CLI::App* cmd = app.add_subcommand(
      "pipeline", "pipeline partitioning: minimum max-load (throughput) or single-sample latency");
  add_graph_options(cmd, args->graph);
  cmd->add_option("--cluster", args->cluster,
                  "preset name or cluster JSON file (default: the graph file's implied cluster)")
      ->check(non_empty_value("a preset or a cluster file"));
  cmd->add_option("--objective", args->objective, "throughput (default) or latency");
  cmd->add_flag("--contiguous", args->contiguous,
                "throughput: contiguous splits only, solved exactly by the DP over ideals; "
                "without it, the non-contiguous integer program (CBC)");
  cmd->add_option("--latency-method", args->latency_method,
                  "latency: ilp (default, CBC) or greedy (the paper's baseline)");
  add_seconds_option(
      cmd, "--time-limit", args->time_limit_s,
      "seconds for CBC (default 60); the DP and local searches before it have their own limits");
  add_seed_option(cmd, args->seed,
                  "throughput: seed of the local searches that improve splits the exact solvers "
                  "cannot finish (default 1)");
  add_output_options(cmd, args->out, true);
  cmd->callback([args] { run_pipeline(*args); });
}

}  // namespace dplace::cli
