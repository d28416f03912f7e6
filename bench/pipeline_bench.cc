// Pipeline-partitioning benchmark: solves the throughput workloads of Tarnawski et al. (NeurIPS
// 2020) with the exact DP over ideals and prints, per workload, the optimum, the number of ideals
// and the solve time; with --synthetic, also Inception-like layer graphs of growing width, to show
// how the solve time grows with the number of ideals.
//
//   pipeline_bench [--csv] [--synthetic] [--no-workloads] [--shape M,B,L,T] [--dp-time-limit S]
//                  [FILE.json ...]
//
// Without FILE arguments it reads every file under
// tests/data/workloads/msr-dnn-partitioning/throughput-inputs/. Times are wall-clock seconds of
// one run on the current machine; `max_load` is printed in the file's unit (ms).
//   --experts      also evaluate the expert splits of human-experts/
//   --ilp S        also solve the non-contiguous program (CBC, S seconds per workload)
//   --latency S    also solve latency-inputs/ with the greedy and the CBC program (S seconds)
//   --graph G      solve a graph file (ONNX, dplace.graph/1, PipeDream) or built-in model instead,
//                  on --cluster C (default paper-k80x4); --training for its training graph
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dplace/cluster/presets.h"
#include "dplace/core/error.h"
#include "dplace/cost/cost_model.h"
#include "dplace/io/dnn_partitioning.h"
#include "dplace/io/importers.h"
#include "dplace/models/registry.h"
#include "dplace/placers/pipeline/pipeline.h"
#include "dplace/placers/pipeline/throughput_dp.h"
#include "dplace/placers/pipeline/units.h"

#ifndef DPLACE_WORKLOADS_DIR
#define DPLACE_WORKLOADS_DIR "tests/data/workloads"
#endif

namespace {

using dplace::PipelineProblem;
using Clock = std::chrono::steady_clock;

// The optima the authors' reference DP computed (../shared/workloads/README.md), in ms.
const std::map<std::string, double> kReference = {
    {"LayerGraphs/bert24_inference.json", 17.7899},
    {"LayerGraphs/bert24_training.json", 41.7458},
    {"LayerGraphs/resnet50_training.json", 78.6318},
    {"OperatorGraphs/bert_l-3_inference.json", 27.9186},
    {"OperatorGraphs/bert_l-3_training.json", 65.3031},
    {"OperatorGraphs/resnet50_training.json", 255.194},
};

struct Row {
  std::string name;
  size_t nodes = 0;
  size_t units = 0;
  size_t ideals = 0;
  uint64_t pairs = 0;
  double chain_ms = 0;
  double coarse_ms = 0;  // 0: not run
  size_t coarse_ideals = 0;
  double max_load_ms = 0;
  double reference_ms = 0;  // 0: none
  double read_s = 0;
  double enumerate_s = 0;
  double solve_s = 0;
  bool optimal = false;
};

void print_header(bool csv) {
  if (csv) {
    std::cout
        << "workload,nodes,units,ideals,pairs,chain_ub_ms,coarse_ideals,coarse_ub_ms,max_load_ms,"
           "reference_ms,read_s,enumerate_s,solve_s,optimal"
        << std::endl;
    return;
  }
  std::cout << fmt::format(
                   "{:<40} {:>6} {:>6} {:>9} {:>12} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8}",
                   "workload", "nodes", "units", "ideals", "pairs", "chain ms", "coarse ms",
                   "optimum", "reference", "solve s", "optimal")
            << std::endl;
}

std::string coarse_text(double ms, const char* format) {
  if (ms == 0) return "-";
  if (!std::isfinite(ms)) return "none";
  return fmt::format(fmt::runtime(format), ms);
}

void print_row(const Row& r, bool csv) {
  if (csv) {
    std::cout << fmt::format("{},{},{},{},{},{:.6g},{},{},{:.6g},{},{:.4f},{:.4f},{:.4f},{}",
                             r.name, r.nodes, r.units, r.ideals, r.pairs, r.chain_ms,
                             r.coarse_ideals, coarse_text(r.coarse_ms, "{:.6g}"), r.max_load_ms,
                             r.reference_ms > 0 ? fmt::format("{:.6g}", r.reference_ms) : "",
                             r.read_s, r.enumerate_s, r.solve_s, r.optimal ? 1 : 0)
              << std::endl;
    return;
  }
  std::cout << fmt::format(
                   "{:<40} {:>6} {:>6} {:>9} {:>12} {:>10.4f} {:>10} {:>10.4f} {:>10} {:>9.3f} "
                   "{:>8}",
                   r.name, r.nodes, r.units, r.ideals, r.pairs, r.chain_ms,
                   coarse_text(r.coarse_ms, "{:.4f}"), r.max_load_ms,
                   r.reference_ms > 0 ? fmt::format("{:.4f}", r.reference_ms) : "-", r.solve_s,
                   r.optimal ? "yes" : "no")
            << std::endl;
}

Row solve(const std::string& name, const PipelineProblem& problem, double read_s,
          double time_limit_s) {
  const auto start = Clock::now();
  const dplace::UnitDag dag = dplace::build_unit_dag(problem);
  dplace::ThroughputDpOptions options;
  options.time_limit_s = time_limit_s;
  const dplace::ThroughputDpResult r = dplace::solve_contiguous_throughput(problem, dag, options);
  Row row;
  row.name = name;
  row.nodes = problem.nodes.size();
  row.units = dag.num_units;
  row.ideals = r.num_ideals;
  row.pairs = r.pairs_visited;
  row.chain_ms = r.chain_upper_bound_s * 1e3;
  row.coarse_ms = r.coarse_upper_bound_s * 1e3;
  row.coarse_ideals = r.coarse_ideals;
  row.max_load_ms = r.max_load_s * 1e3;
  row.read_s = read_s;
  row.enumerate_s = r.enumerate_seconds;
  row.solve_s = std::chrono::duration<double>(Clock::now() - start).count();
  row.optimal = r.optimal;
  return row;
}

// An Inception-like layer graph: a stem chain, then `modules` modules, each with `branches`
// parallel chains of lengths 1..branch_len (cycling) between a split and a concat layer;
// training adds the mirrored backward pass, each backward layer co-located with its forward one.
// Latencies and tensor costs are drawn from a seeded RNG (ms); CPU latency is 10x.
PipelineProblem inception_like(int modules, int branches, int branch_len, bool training,
                               uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> lat(0.2, 2.0);
  std::uniform_real_distribution<double> cost(0.01, 0.3);
  PipelineProblem p;
  p.name = fmt::format("inception-like m{} b{} l{}{}", modules, branches, branch_len,
                       training ? " train" : "");
  dplace::PipelineDeviceType accel{"accel", 6, 16e9, true, {}, {}};
  dplace::PipelineDeviceType cpu{"cpu", 1, dplace::kUncappedBytes, false, {}, {}};
  for (int i = 0; i < 6; ++i) accel.device_names.push_back(fmt::format("/accel:{}", i));
  cpu.device_names.push_back("/cpu:0");
  p.types = {accel, cpu};
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  auto add_node = [&]() {
    const double a = lat(rng) * 1e-3;
    dplace::PipelineNode n;
    n.name = fmt::format("n{}", p.nodes.size());
    n.time_s = {a, 10 * a};
    n.size_bytes = 1e8;
    n.colour = static_cast<int64_t>(p.nodes.size());
    p.nodes.push_back(n);
    return static_cast<uint32_t>(p.nodes.size() - 1);
  };
  uint32_t prev = add_node();
  for (int s = 0; s < 4; ++s) {
    const uint32_t v = add_node();
    edges.emplace_back(prev, v);
    prev = v;
  }
  for (int m = 0; m < modules; ++m) {
    const uint32_t concat_index = UINT32_MAX;
    (void)concat_index;
    std::vector<uint32_t> tails;
    for (int b = 0; b < branches; ++b) {
      const int len = 1 + (b % branch_len);
      uint32_t last = prev;
      for (int k = 0; k < len; ++k) {
        const uint32_t v = add_node();
        edges.emplace_back(last, v);
        last = v;
      }
      tails.push_back(last);
    }
    const uint32_t concat = add_node();
    for (uint32_t t : tails) edges.emplace_back(t, concat);
    prev = concat;
  }
  const size_t forward = p.nodes.size();
  if (training) {
    // Backward node of i, same colour; edges reversed, plus forward i -> backward i.
    for (size_t i = 0; i < forward; ++i) {
      dplace::PipelineNode b = p.nodes[i];
      b.name += "_grad";
      b.backward = true;
      b.time_s = {2 * p.nodes[i].time_s[0], 2 * p.nodes[i].time_s[1]};
      b.colour = p.nodes[i].colour;
      p.nodes.push_back(b);
    }
    const size_t forward_edges = edges.size();
    for (size_t e = 0; e < forward_edges; ++e) {
      edges.emplace_back(static_cast<uint32_t>(edges[e].second + forward),
                         static_cast<uint32_t>(edges[e].first + forward));
    }
    for (size_t i = 0; i < forward; ++i) {
      edges.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(i + forward));
    }
  }
  // One tensor per producer.
  std::map<uint32_t, std::vector<uint32_t>> consumers;
  for (const auto& [a, b] : edges) consumers[a].push_back(b);
  for (auto& [producer, cs] : consumers) {
    dplace::PipelineTensor t;
    t.producer = producer;
    t.consumers = cs;
    const double c = cost(rng) * 1e-3;
    t.comm_s = {c, 0.0};
    p.tensors.push_back(t);
  }
  return p;
}

PipelineProblem load_problem(const std::string& file) {
  const dplace::LoadedGraph loaded = dplace::read_dnn_partitioning_file(file, {});
  const dplace::CostTable costs(loaded.graph, *loaded.implied_cluster);
  return dplace::pipeline_problem_from_graph(loaded.graph, *loaded.implied_cluster, costs);
}

// The expert splits of human-experts/, evaluated with the same cost function.
void run_experts(const std::filesystem::path& dir) {
  struct Case {
    const char* workload;
    const char* expert;
  };
  std::cout << "\nexpert splits (max load in ms; backward nodes follow their colour class)\n";
  std::cout << fmt::format("{:<45} {:<40} {:>10} {:>10} {:>10}", "expert", "workload", "expert",
                           "optimum", "contiguous")
            << std::endl;
  for (const Case& c : {Case{"throughput-inputs/LayerGraphs/bert24_training.json",
                             "human-experts/bert24_training_expert.json"},
                        Case{"throughput-inputs/LayerGraphs/resnet50_training.json",
                             "human-experts/resnet50_inference_expert.json"}}) {
    const PipelineProblem p = load_problem((dir / c.workload).string());
    const dplace::DnnPartitioningSplit split =
        dplace::read_dnn_partitioning_split((dir / c.expert).string());
    const std::vector<int> a = dplace::assignment_from_split(p, split.cpus, split.accels);
    const dplace::PipelineEvaluation ev = dplace::evaluate_pipeline(p, a);
    dplace::PipelineRequest request;
    request.problem = &p;
    const dplace::PipelinePlan best = dplace::solve_pipeline(request);
    std::cout << fmt::format("{:<45} {:<40} {:>10.4f} {:>10.4f} {:>10}{}", c.expert, c.workload,
                             ev.max_load_s * 1e3, best.max_load_s * 1e3,
                             ev.contiguous ? "yes" : "no",
                             ev.violation.empty() ? "" : "  (" + ev.violation + ")")
              << std::endl;
  }
}

// Non-contiguous splits: the CBC program, warm-started with the contiguous optimum.
void run_ilp(const std::vector<std::string>& files, double seconds) {
  std::cout << fmt::format("\nnon-contiguous splits (CBC, {} s limit; ms)\n", seconds);
  std::cout << fmt::format("{:<40} {:>10} {:>12} {:>10} {:>8} {:>9} {:>8}", "workload",
                           "contiguous", "non-contig", "bound", "gap %", "solve s", "optimal")
            << std::endl;
  for (const std::string& file : files) {
    const PipelineProblem p = load_problem(file);
    dplace::PipelineRequest request;
    request.problem = &p;
    const dplace::PipelinePlan contiguous = dplace::solve_pipeline(request);
    request.options.contiguous = false;
    request.options.time_limit_s = seconds;
    const dplace::PipelinePlan plan = dplace::solve_pipeline(request);
    const std::filesystem::path path(file);
    std::cout << fmt::format(
                     "{:<40} {:>10.4f} {:>12.4f} {:>10.4f} {:>8.2f} {:>9.2f} {:>8}",
                     path.parent_path().filename().string() + "/" + path.filename().string(),
                     contiguous.max_load_s * 1e3, plan.max_load_s * 1e3, plan.lower_bound_s * 1e3,
                     100 * plan.gap, plan.solve_seconds, plan.optimal ? "yes" : "no")
              << std::endl;
  }
}

// Single-sample latency: the greedy baseline and the CBC program on latency-inputs/.
void run_latency(const std::filesystem::path& dir, double seconds) {
  std::cout << fmt::format("\nsingle-sample latency (ms; CBC {} s limit)\n", seconds);
  std::cout << fmt::format("{:<45} {:>10} {:>10} {:>10} {:>8} {:>9} {:>8}", "workload", "greedy",
                           "ilp", "bound", "gap %", "solve s", "optimal")
            << std::endl;
  for (const char* file : {"latency-inputs/LayerGraphs/bert24_inference.json",
                           "latency-inputs/OperatorGraphs/bert_l-3_inference.json"}) {
    const PipelineProblem p = load_problem((dir / file).string());
    dplace::PipelineRequest request;
    request.problem = &p;
    request.options.objective = dplace::PipelineObjective::kLatency;
    request.options.latency_method = dplace::LatencyMethod::kGreedy;
    const dplace::PipelinePlan greedy = dplace::solve_pipeline(request);
    request.options.latency_method = dplace::LatencyMethod::kIlp;
    request.options.time_limit_s = seconds;
    const dplace::PipelinePlan ilp = dplace::solve_pipeline(request);
    std::cout << fmt::format("{:<45} {:>10.4f} {:>10.4f} {:>10.4f} {:>8.2f} {:>9.2f} {:>8}", file,
                             greedy.latency_s * 1e3, ilp.latency_s * 1e3, ilp.lower_bound_s * 1e3,
                             100 * ilp.gap, ilp.solve_seconds, ilp.optimal ? "yes" : "no")
              << std::endl;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool csv = false;
  bool synthetic = false;
  bool workloads = true;
  double time_limit_s = 600;
  bool experts = false;
  double ilp_s = 0;
  double latency_s = 0;
  std::string shape;
  std::vector<std::string> graphs;  // --graph: any graph file or built-in model
  std::string cluster = "paper-k80x4";
  bool training = false;
  std::map<std::string, int64_t> dims;  // --dim NAME=VALUE for ONNX inputs
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv") {
      csv = true;
    } else if (arg == "--synthetic") {
      synthetic = true;
    } else if (arg == "--no-workloads") {
      workloads = false;
    } else if (arg == "--shape" && i + 1 < argc) {
      synthetic = true;
      workloads = false;
      shape = argv[++i];
    } else if (arg == "--graph" && i + 1 < argc) {
      graphs.push_back(argv[++i]);
      workloads = false;
    } else if (arg == "--cluster" && i + 1 < argc) {
      cluster = argv[++i];
    } else if (arg == "--dim" && i + 1 < argc) {
      const std::string d = argv[++i];
      const size_t eq = d.find('=');
      if (eq == std::string::npos) {
        std::cerr << "--dim wants NAME=VALUE\n";
        return 2;
      }
      dims[d.substr(0, eq)] = std::stoll(d.substr(eq + 1));
    } else if (arg == "--training") {
      training = true;
    } else if (arg == "--experts") {
      experts = true;
    } else if (arg == "--ilp" && i + 1 < argc) {
      ilp_s = std::stod(argv[++i]);
    } else if (arg == "--latency" && i + 1 < argc) {
      latency_s = std::stod(argv[++i]);
    } else if (arg == "--dp-time-limit" && i + 1 < argc) {
      time_limit_s = std::stod(argv[++i]);
    } else if (!arg.empty() && arg[0] == '-') {
      std::cerr << "usage: pipeline_bench [--csv] [--synthetic] [--no-workloads] "
                   "[--shape M,B,L,T] [--dp-time-limit S] [--experts] [--ilp S] [--latency S] "
                   "[--graph FILE|MODEL [--cluster C] [--training] [--dim N=V]] "
                   "[FILE.json ...]\n";
      return 2;
    } else {
      files.push_back(arg);
    }
  }
  const std::filesystem::path dir =
      std::filesystem::path(DPLACE_WORKLOADS_DIR) / "msr-dnn-partitioning";
  const std::filesystem::path root = dir / "throughput-inputs";
  if (files.empty() && workloads) {
    for (const char* dir : {"LayerGraphs", "OperatorGraphs"}) {
      std::vector<std::string> in_dir;
      for (const auto& entry : std::filesystem::directory_iterator(root / dir)) {
        if (entry.path().extension() == ".json") in_dir.push_back(entry.path().string());
      }
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    }
  }
  print_header(csv);
  try {
    for (const std::string& file : files) {
      const auto start = Clock::now();
      const PipelineProblem problem = load_problem(file);
      const double read_s = std::chrono::duration<double>(Clock::now() - start).count();
      const std::filesystem::path path(file);
      const std::string key =
          path.parent_path().filename().string() + "/" + path.filename().string();
      Row row = solve(key, problem, read_s, time_limit_s);
      if (auto it = kReference.find(key); it != kReference.end()) row.reference_ms = it->second;
      print_row(row, csv);
    }
    for (const std::string& spec : graphs) {
      const auto start = Clock::now();
      dplace::Graph graph;
      if (const dplace::ModelEntry* model = dplace::find_model(spec)) {
        dplace::ModelOptions mo;
        mo.inference = !training;
        graph = model->build(mo);
      } else {
        dplace::ImportOptions io;
        io.training = training;
        io.dims = dims;
        graph = dplace::load_graph_file(spec, io).graph;
      }
      const dplace::Cluster c = dplace::load_cluster(cluster);
      const dplace::CostTable costs(graph, c);
      const PipelineProblem problem = dplace::pipeline_problem_from_graph(graph, c, costs);
      const double read_s = std::chrono::duration<double>(Clock::now() - start).count();
      print_row(solve(fmt::format("{}{} on {}", std::filesystem::path(spec).filename().string(),
                                  training ? " (training)" : "", cluster),
                      problem, read_s, time_limit_s),
                csv);
    }
    if (synthetic) {
      struct Shape {
        int modules, branches, len;
        bool training;
      };
      std::vector<Shape> shapes = {{11, 3, 3, false}, {11, 4, 4, false}, {11, 5, 5, false},
                                   {11, 6, 6, false}, {11, 3, 3, true},  {11, 4, 4, true},
                                   {11, 5, 5, true},  {11, 6, 6, true}};
      if (!shape.empty()) {
        Shape one{};
        int training = 0;
        if (std::sscanf(shape.c_str(), "%d,%d,%d,%d", &one.modules, &one.branches, &one.len,
                        &training) != 4) {
          std::cerr << "--shape wants MODULES,BRANCHES,MAX_LEN,TRAINING(0/1)\n";
          return 2;
        }
        one.training = training != 0;
        shapes = {one};
      }
      for (const Shape& s : shapes) {
        const PipelineProblem p = inception_like(s.modules, s.branches, s.len, s.training, 7);
        print_row(solve(p.name, p, 0, time_limit_s), csv);
      }
    }
    if (experts) run_experts(dir);
    if (ilp_s > 0) run_ilp(files, ilp_s);
    if (latency_s > 0) run_latency(dir, latency_s);
  } catch (const dplace::Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  return 0;
}
