// Runs placers on the benchmark workloads and writes a CSV file and a markdown table
// (bench/RESULTS.md, section "Classic placers").
//
//   placer_harness [--out DIR] [--placers a,b,...] [--workloads w1,w2,...] [--seed N]
//                  [--budget-seconds S] [--param placer:key=value ...]
//
// Workloads are "MODEL[:key=value...]@CLUSTER" (a built-in model, training graph, with its expert
// placement; keys batch, layers, hidden, seq, vocab override its default size, e.g.
// "nmt:batch=256@paper-k80x2"), "FILE@CLUSTER" (a graph file relative to the workloads directory),
// or "FILE" for a dnn-partitioning file with its implied cluster. Default: rnnlm, nmt and
// inception_v3 on paper-k80x2 and paper-k80x4, nmt at batch 256 on both (where one GPU is out of
// memory), the three PipeDream profiles on dgx1-v100x8, and three dnn-partitioning throughput
// inputs with their implied clusters.
//
// Per (workload, placer): simulated step time, OOM flag, speed-up over the best of the 2017
// paper's baselines (single-cpu, single-gpu, scotch, mincut, expert) that fits, peak memory,
// ratio to the lower bound, wall time of place(), simulations the placer ran, its note and why it
// was infeasible or could not run.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dplace/cluster/presets.h"
#include "dplace/core/error.h"
#include "dplace/io/importers.h"
#include "dplace/models/registry.h"
#include "dplace/placers/placer.h"

#ifndef DPLACE_WORKLOADS_DIR
#define DPLACE_WORKLOADS_DIR "tests/data/workloads"
#endif

namespace dplace {
namespace {

const std::vector<std::string> kDefaultWorkloads = {
    "rnnlm@paper-k80x2",
    "rnnlm@paper-k80x4",
    "nmt@paper-k80x2",
    "nmt@paper-k80x4",
    "nmt:batch=256@paper-k80x2",
    "nmt:batch=256@paper-k80x4",
    "inception_v3@paper-k80x2",
    "inception_v3@paper-k80x4",
    "pipedream-profiles/gnmt.graph.txt@dgx1-v100x8",
    "pipedream-profiles/resnet50.graph.txt@dgx1-v100x8",
    "pipedream-profiles/vgg16.graph.txt@dgx1-v100x8",
    "msr-dnn-partitioning/throughput-inputs/LayerGraphs/bert24_training.json",
    "msr-dnn-partitioning/throughput-inputs/LayerGraphs/resnet50_training.json",
    "msr-dnn-partitioning/throughput-inputs/OperatorGraphs/bert_l-3_training.json",
};

// The 2017 paper's Table 2 baselines; the speed-up column is relative to the best that fits.
bool is_paper_baseline(const std::string& placer) {
  return placer == "single-cpu" || placer == "single-gpu" || placer == "scotch" ||
         placer == "mincut" || placer == "expert";
}

// Graph, cluster, cost table and simulator of one workload; never moved.
struct Workload {
  std::string label;
  Graph graph;
  std::optional<Cluster> cluster;
  std::optional<Placement> expert;
  std::unique_ptr<CostTable> costs;
  std::unique_ptr<Simulator> simulator;
};

std::unique_ptr<Workload> load_workload(const std::string& spec) {
  auto w = std::make_unique<Workload>();
  const size_t at = spec.rfind('@');
  const std::string source = at == std::string::npos ? spec : spec.substr(0, at);
  const std::string cluster_name = at == std::string::npos ? "" : spec.substr(at + 1);
  const std::string model_name = source.substr(0, source.find(':'));
  const ModelEntry* model = find_model(model_name);
  if (model) {
    ModelOptions options;
    std::string rest = source.substr(model_name.size());
    while (!rest.empty()) {  // ":key=value" pieces
      const size_t next = rest.find(':', 1);
      const std::string piece = rest.substr(1, next == std::string::npos ? next : next - 1);
      rest = next == std::string::npos ? "" : rest.substr(next);
      const size_t eq = piece.find('=');
      if (eq == std::string::npos)
        throw ConfigError(fmt::format("workload '{}': expected key=value", spec));
      const std::string key = piece.substr(0, eq);
      int value = 0;
      const std::string text = piece.substr(eq + 1);
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
        throw ConfigError(fmt::format("workload '{}': '{}' is not a positive integer", spec, text));
      }
      if (key == "batch")
        options.batch = value;
      else if (key == "layers")
        options.layers = value;
      else if (key == "hidden")
        options.hidden = value;
      else if (key == "seq")
        options.seq = value;
      else if (key == "vocab")
        options.vocab = value;
      else
        throw ConfigError(fmt::format("workload '{}': unknown model option '{}'", spec, key));
    }
    w->graph = model->build(options);
    w->label = source;
  } else {
    const std::string path = (std::filesystem::path(DPLACE_WORKLOADS_DIR) / source).string();
    LoadedGraph loaded = load_graph_file(path, ImportOptions{});
    w->graph = std::move(loaded.graph);
    w->cluster = std::move(loaded.implied_cluster);
    w->label = std::filesystem::path(source).filename().string();
  }
  if (!cluster_name.empty()) w->cluster = load_cluster(cluster_name);
  if (!w->cluster)
    throw ConfigError(fmt::format("workload '{}': no cluster (use FILE@CLUSTER)", spec));
  if (model && model->expert) w->expert = model->expert(w->graph, *w->cluster);
  w->costs = std::make_unique<CostTable>(w->graph, *w->cluster);
  w->simulator = std::make_unique<Simulator>(w->graph, *w->cluster, *w->costs);
  return w;
}

struct Row {
  std::string workload;
  std::string cluster;
  std::string placer;
  bool ran = false;
  std::string error;  // why the placer could not run (e.g. no expert placement)
  double step_time_s = 0;
  bool feasible = false;
  int64_t max_peak_memory_bytes = 0;
  double lower_bound_s = 0;
  double placement_seconds = 0;
  int64_t evaluations = 0;
  std::string note;
  std::string infeasible_reason;
  double speedup = 0;  // filled after all placers of the workload ran
};

std::string csv_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string seconds_text(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

// What one placer's table cell says: step time, ratio to the lower bound, OOM.
std::string step_cell(const Row& r) {
  if (!r.ran) return "n/a";
  std::string cell = fmt::format("{} ({:.2f}x)", seconds_text(r.step_time_s),
                                 r.lower_bound_s > 0 ? r.step_time_s / r.lower_bound_s : 0.0);
  if (!r.feasible) cell += " OOM";
  return cell;
}

}  // namespace
}  // namespace dplace

int main(int argc, char** argv) {
  using namespace dplace;
  CLI::App app("Runs placers on the benchmark workloads (bench/RESULTS.md, Classic placers)");
  std::string out_dir = "bench/out";
  std::vector<std::string> placers = {"single-cpu", "single-gpu", "expert", "round-robin",
                                      "scotch",     "mincut",     "metis",  "heft",
                                      "m-topo",     "m-etf",      "m-sct",  "anneal"};
  std::vector<std::string> workloads = kDefaultWorkloads;
  uint64_t seed = 1;
  double budget_seconds = 60;
  std::vector<std::string> params;
  app.add_option("--out", out_dir, "directory for placers.csv and placers.md (default bench/out)");
  app.add_option("--placers", placers, "comma-separated placer names")->delimiter(',');
  app.add_option("--workloads", workloads, "comma-separated MODEL@CLUSTER or FILE[@CLUSTER]")
      ->delimiter(',');
  app.add_option("--seed", seed, "seed of randomised placers (default 1)");
  app.add_option("--budget-seconds", budget_seconds, "cap per search placer (default 60)");
  app.add_option("--param", params, "placer:key=value, passed to that placer (repeatable)");
  CLI11_PARSE(app, argc, argv);

  std::map<std::string, std::map<std::string, std::string>> placer_params;
  for (const std::string& p : params) {
    const size_t colon = p.find(':'), eq = p.find('=');
    if (colon == std::string::npos || eq == std::string::npos || eq < colon) {
      fmt::print(stderr, "placer_harness: --param '{}': expected placer:key=value\n", p);
      return 2;
    }
    placer_params[p.substr(0, colon)][p.substr(colon + 1, eq - colon - 1)] = p.substr(eq + 1);
  }

  std::vector<Row> rows;
  std::vector<std::pair<std::string, std::string>> columns;  // (workload, cluster) in order
  try {
    for (const std::string& name : placers) make_placer(name);  // unknown names fail early
    for (const std::string& spec : workloads) {
      std::unique_ptr<Workload> w = load_workload(spec);
      const std::string cluster = w->cluster->name();
      columns.push_back({w->label, cluster});
      fmt::print(stderr, "{} on {}: {} ops, {} groups, lower bound {}\n", w->label, cluster,
                 w->graph.num_ops(), w->graph.num_groups(),
                 seconds_text(w->simulator->lower_bound_s()));
      const size_t first = rows.size();
      for (const std::string& name : placers) {
        Row row{.workload = w->label, .cluster = cluster, .placer = name};
        row.lower_bound_s = w->simulator->lower_bound_s();
        PlaceRequest request;
        request.graph = &w->graph;
        request.cluster = &*w->cluster;
        request.costs = w->costs.get();
        request.simulator = w->simulator.get();
        request.seed = seed;
        request.budget_seconds = budget_seconds;
        request.expert = w->expert;
        if (auto it = placer_params.find(name); it != placer_params.end())
          request.params = it->second;
        try {
          std::unique_ptr<Placer> placer = make_placer(name);
          const auto start = std::chrono::steady_clock::now();
          PlaceResult result = placer->place(request);
          row.placement_seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          const SimResult sim = w->simulator->run(result.placement);
          row.ran = true;
          row.step_time_s = sim.step_time_s;
          row.feasible = sim.feasible;
          for (const DeviceStats& d : sim.devices) {
            row.max_peak_memory_bytes = std::max(row.max_peak_memory_bytes, d.peak_memory_bytes);
          }
          row.evaluations = result.evaluations;
          row.note = result.note;
          row.infeasible_reason = result.infeasible_reason;
        } catch (const ConfigError& e) {
          row.error = e.what();
        }
        fmt::print(stderr, "  {:<12} {}  placed in {}\n", name,
                   row.ran ? step_cell(row) : "n/a: " + row.error,
                   seconds_text(row.placement_seconds));
        rows.push_back(std::move(row));
      }
      double best_baseline = 0;
      for (size_t i = first; i < rows.size(); ++i) {
        const Row& r = rows[i];
        if (!r.ran || !r.feasible || !is_paper_baseline(r.placer)) continue;
        if (best_baseline == 0 || r.step_time_s < best_baseline) best_baseline = r.step_time_s;
      }
      for (size_t i = first; i < rows.size(); ++i) {
        if (rows[i].ran && best_baseline > 0) rows[i].speedup = best_baseline / rows[i].step_time_s;
      }
    }
  } catch (const Error& e) {
    fmt::print(stderr, "placer_harness: {}\n", e.what());
    return 2;
  }

  std::filesystem::create_directories(out_dir);
  {
    std::ofstream csv(std::filesystem::path(out_dir) / "placers.csv");
    csv << "workload,cluster,placer,step_time_s,feasible,speedup_vs_best_baseline,"
           "max_peak_memory_bytes,lower_bound_s,ratio_to_lower_bound,placement_seconds,"
           "evaluations,note,infeasible_reason,error\n";
    for (const Row& r : rows) {
      csv << fmt::format(
          "{},{},{},{:.9g},{},{:.4f},{},{:.9g},{:.4f},{:.4f},{},{},{},{}\n", r.workload, r.cluster,
          r.placer, r.step_time_s, r.ran && r.feasible ? 1 : 0, r.speedup, r.max_peak_memory_bytes,
          r.lower_bound_s, r.lower_bound_s > 0 ? r.step_time_s / r.lower_bound_s : 0.0,
          r.placement_seconds, r.evaluations, csv_quote(r.note), csv_quote(r.infeasible_reason),
          csv_quote(r.error));
    }
  }
  std::string md;
  auto find = [&](const std::string& placer, const std::pair<std::string, std::string>& col) {
    for (const Row& r : rows) {
      if (r.placer == placer && r.workload == col.first && r.cluster == col.second) return &r;
    }
    return static_cast<const Row*>(nullptr);
  };
  auto header = [&](const std::string& first) {
    md += "| " + first + " |";
    for (const auto& col : columns) md += fmt::format(" {} @ {} |", col.first, col.second);
    md += "\n|---|";
    for (size_t i = 0; i < columns.size(); ++i) md += "---:|";
    md += "\n";
  };
  md += "Step time (ratio to the lower bound); OOM: the placement does not fit in memory.\n\n";
  header("placer");
  md += "| *lower bound* |";
  for (const auto& col : columns) {
    const Row* r = find(placers.front(), col);
    md += " " + (r ? seconds_text(r->lower_bound_s) : std::string("-")) + " |";
  }
  md += "\n";
  for (const std::string& p : placers) {
    md += "| " + p + " |";
    for (const auto& col : columns)
      md += " " + (find(p, col) ? step_cell(*find(p, col)) : "-") + " |";
    md += "\n";
  }
  md +=
      "\nSpeed-up over the best of the 2017 paper's baselines that fits (single-cpu, single-gpu, "
      "scotch, mincut, expert).\n\n";
  header("placer");
  for (const std::string& p : placers) {
    md += "| " + p + " |";
    for (const auto& col : columns) {
      const Row* r = find(p, col);
      md += " " + (r && r->ran && r->speedup > 0 ? fmt::format("{:.2f}x", r->speedup) : "-") + " |";
    }
    md += "\n";
  }
  md += "\nTime to place (wall clock of place(), this machine).\n\n";
  header("placer");
  for (const std::string& p : placers) {
    md += "| " + p + " |";
    for (const auto& col : columns) {
      const Row* r = find(p, col);
      md += " " + (r && r->ran ? seconds_text(r->placement_seconds) : "-") + " |";
    }
    md += "\n";
  }
  {
    std::ofstream out(std::filesystem::path(out_dir) / "placers.md");
    out << md;
  }
  fmt::print("{}", md);
  return 0;
}
