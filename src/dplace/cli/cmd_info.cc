// dplace info GRAPH [model options] [--json] [-o FILE.json]: statistics of a graph, and the graph
// itself as dplace.graph/1 (an ONNX import, a built-in model at the sizes given) for other tools or
// for editing by hand.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "dplace/cli/commands.h"
#include "dplace/cli/report.h"
#include "dplace/cli/workload.h"
#include "dplace/core/format.h"
#include "dplace/io/graph_json.h"

namespace dplace::cli {
namespace {

struct InfoArgs {
  GraphArgs graph;
  bool json = false;
  std::string graph_out;  // -o: the graph as dplace.graph/1
};

// "<n> <key>, <n> <key>, ..." for the `limit` keys with the largest counts, ", ..." after them when
// there are more.
std::string top_counts(const std::map<std::string, int64_t>& counts, size_t limit) {
  std::vector<std::pair<int64_t, std::string>> by_count;
  for (const auto& [key, n] : counts) by_count.emplace_back(-n, key);
  std::sort(by_count.begin(), by_count.end());
  std::string line;
  for (size_t i = 0; i < std::min(limit, by_count.size()); ++i) {
    line +=
        fmt::format("{}{} {}", line.empty() ? "" : ", ", -by_count[i].first, by_count[i].second);
  }
  if (by_count.size() > limit) line += ", ...";
  return line;
}

void run_info(const InfoArgs& args) {
  OutputArgs out;
  out.placement_path = args.graph_out;
  check_output_paths(out);
  const Workload w = load_workload(args.graph);
  const Graph& g = w.graph;
  if (!args.graph_out.empty()) {
    if (!w.path.empty()) check_outputs_apart({{"GRAPH", w.path}, {"-o", args.graph_out}});
    write_graph_file(g, args.graph_out);
  }
  double forward_flops = 0;
  int64_t activation_bytes = 0;
  std::map<std::string, int64_t> phases;
  std::map<std::string, int64_t> types;
  std::map<std::string, int64_t> measured;   // device name or kind -> ops with a measured time
  std::map<std::string, int64_t> functions;  // ONNX function -> ops its calls' bodies made
  for (const Op& op : g.ops()) {
    for (const TimeOverride& t : op.time_s) ++measured[t.device];
    if (auto it = op.extra.find("onnx_function"); it != op.extra.end() && it->is_string()) {
      ++functions[it->get<std::string>()];
    }
    if (op.phase == Phase::kForward || op.phase == Phase::kUnspecified) forward_flops += op.flops;
    for (int64_t b : op.output_bytes) activation_bytes += b;
    std::string phase(phase_name(op.phase));
    ++phases[phase.empty() ? "unspecified" : phase];
    ++types[op.type.empty() ? "(none)" : op.type];
  }
  size_t largest_group = 0;
  for (size_t i = 0; i < g.num_groups(); ++i) {
    largest_group = std::max(largest_group, g.group_ops(GroupId::from_index(i)).size());
  }
  if (args.json) {
    Json j = {{"graph", g.name()},
              {"format", w.format},
              {"ops", g.num_ops()},
              {"edges", g.num_edges()},
              {"groups", g.num_groups()},
              {"largest_group", largest_group},
              {"forward_flops", forward_flops},
              {"total_flops", g.total_flops()},
              {"param_bytes", g.total_param_bytes()},
              {"activation_bytes", activation_bytes},
              {"phases", phases},
              {"op_types", types},
              {"measured_ops", measured},
              {"function_ops", functions},
              {"implied_cluster", w.implied_cluster ? w.implied_cluster->name() : ""}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("graph            {} ({})\n", g.name(), w.format);
  fmt::print("ops              {}\n", g.num_ops());
  fmt::print("edges            {}\n", g.num_edges());
  fmt::print("groups           {} (largest {} ops)\n", g.num_groups(), largest_group);
  fmt::print("forward flops    {:.4g}\n", forward_flops);
  fmt::print("total flops      {:.4g}\n", g.total_flops());
  fmt::print("param bytes      {} ({})\n", g.total_param_bytes(),
             format_bytes(double(g.total_param_bytes())));
  fmt::print("activation bytes {} ({})\n", activation_bytes,
             format_bytes(double(activation_bytes)));
  std::string phase_line;
  for (const auto& [phase, n] : phases)
    phase_line += fmt::format("{}{} {}", phase_line.empty() ? "" : ", ", n, phase);
  fmt::print("phases           {}\n", phase_line);
  fmt::print("top op types     {}\n", top_counts(types, 8));
  if (!functions.empty()) {
    int64_t inlined = 0;
    for (const auto& [function, n] : functions) inlined += n;
    fmt::print("inlined          {}\n",
               one_line(fmt::format("{} ops from {} ONNX function{}: {}", inlined, functions.size(),
                                    functions.size() == 1 ? "" : "s", top_counts(functions, 8))));
  }
  if (!measured.empty()) {
    std::string measured_line;
    for (const auto& [device, n] : measured) {
      measured_line += fmt::format("{}{} ops on {}", measured_line.empty() ? "" : ", ", n, device);
    }
    fmt::print("measured times   {}\n", measured_line);
  }
  if (w.implied_cluster) fmt::print("implied cluster  {}\n", w.implied_cluster->name());
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "print statistics of a model or graph file");
  add_graph_options(cmd, args->graph);
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->add_option("-o,--output", args->graph_out,
                  "write the graph (as imported or built, with --training's ops) as "
                  "dplace.graph/1 JSON")
      ->check(non_empty_value("a file name"));
  cmd->callback([args] { run_info(*args); });
}

}  // namespace dplace::cli
