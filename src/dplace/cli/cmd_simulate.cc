// dplace simulate GRAPH --cluster C --placement P.json [--json] [--trace T.json] [--dot F]
#include <fmt/format.h>

#include "dplace/cli/commands.h"
#include "dplace/cli/report.h"
#include "dplace/cli/workload.h"
#include "dplace/core/error.h"
#include "dplace/io/placement_json.h"

namespace dplace::cli {
namespace {

struct SimulateArgs {
  GraphArgs graph;
  std::optional<std::string> cluster;
  std::string placement_path;
  OutputArgs out;
};

void run_simulate(const SimulateArgs& args) {
  check_output_paths(args.out);
  Session session(load_workload(args.graph), args.cluster);
  Placement placement;
  std::string placer = "file";
  if (args.placement_path == "expert") {
    std::optional<Placement> expert = session.expert_placement();
    if (!expert)
      throw ConfigError(fmt::format("graph '{}' has no expert placement", session.graph().name()));
    placement = *expert;
    placer = "expert";
  } else {
    placement =
        read_placement_deferring_warnings(args.placement_path, session.graph(), session.cluster());
  }
  const std::string problem =
      placement_problem(session.graph(), session.cluster(), session.costs(), placement);
  if (!problem.empty()) throw ConfigError(fmt::format("{}: {}", args.placement_path, problem));
  const Evaluation e = evaluate(session, placer, std::move(placement));
  if (args.out.json) {
    fmt::print("{}\n", evaluation_to_json(session, e).dump(2));
  } else {
    print_evaluation(session, e, stdout);
  }
  write_outputs(session, e, args.out);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand("simulate", "simulate one step of a graph under a placement");
  add_graph_options(cmd, args->graph);
  cmd->add_option("--cluster", args->cluster, "preset name or cluster JSON file")
      ->check(non_empty_value("a preset or a cluster file"));
  cmd->add_option("--placement", args->placement_path,
                  "dplace.placement/1 file, or 'expert' for the model's expert placement")
      ->required()
      ->check(non_empty_value("a placement file or 'expert'"));
  add_output_options(cmd, args->out, false);
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace dplace::cli
