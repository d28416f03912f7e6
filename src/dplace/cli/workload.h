// Resolving the GRAPH and --cluster arguments shared by every command.
//
// GRAPH is a built-in model name (see `dplace models`) or a file in any supported format (see
// io/importers.h). --cluster is a preset name or a dplace.cluster/1 file; when absent, a cluster
// implied by the graph file (dnn-partitioning) is used, else it is an error.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/cost/cost_model.h"
#include "dplace/io/importers.h"
#include "dplace/io/ort_profile.h"
#include "dplace/ir/graph.h"
#include "dplace/models/registry.h"
#include "dplace/sim/simulator.h"

namespace dplace::cli {

struct GraphArgs {
  std::string spec;  // model name or path
  std::optional<int> batch, layers, hidden, seq, vocab;
  bool training = false;
  bool inference = false;
  std::vector<std::string> dims;      // name=value
  std::vector<std::string> profiles;  // onnxruntime profiles: FILE or FILE=DEVICE
};

// Adds GRAPH (positional) and the model/import options to a subcommand.
void add_graph_options(CLI::App* cmd, GraphArgs& args);

// Check for every option that takes a value (GRAPH, --cluster, --placement, -o, --trace, --dot, the
// model sizes, --budget-seconds, --time-limit): an empty value, e.g. from an unset shell variable,
// is refused instead of reading as "not given" or as 0.
// `expected` completes the message "empty value: expected ...".
CLI::Validator non_empty_value(const std::string& expected);

// --seed, parsed here rather than by CLI11, which read "0x10" as 0 and took -1, 2^64 or an empty
// value without complaint: anything but a whole number in [0, 2^64) is a one-line error.
void add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& help);

// A wall-clock limit such as --budget-seconds or --time-limit, parsed here rather than by CLI11,
// which took hexadecimal ("0x10" as 16 s): a decimal number in (0, kMaxLimitSeconds], checked when
// the option is read, so that every command that takes it refuses a bad value before any work
// (compare used to run, giving each placer the error, and exit 0).
void add_seconds_option(CLI::App* cmd, const std::string& name, double& seconds,
                        const std::string& help);

struct Workload {
  Graph graph;
  std::optional<Cluster> implied_cluster;
  const ModelEntry* model = nullptr;  // set for built-in models
  std::string format;                 // "model", "dplace.graph/1", "onnx", ...
  std::string path;                   // the file read; empty for built-in models
  // What --profile timed, which Session checks against the cluster (io/ort_profile.h).
  ProfilesOnGraph profiles;
};

// Builds or reads the graph and sets the measured times of its --profile files (io/ort_profile.h);
// import warnings wait in the input-warning queue below.
Workload load_workload(const GraphArgs& args);

// Warnings about the inputs (an importer's notes on a file) wait until every input has been read
// and checked, so bad input still gives exactly one line on stderr. A command calls
// print_input_warnings() just before its work begins (a search or solve); main prints those still
// waiting when the command returns and drops them when it fails with a dplace::Error. Each is
// printed as "dplace: warning: LINE". Not thread-safe: the command line is single-threaded here.
void defer_input_warning(std::string line);
void print_input_warnings();
void drop_input_warnings();

// read_placement_file (io/placement_json.h), its warnings (a file made for another graph or
// cluster) deferred with defer_input_warning.
Placement read_placement_deferring_warnings(const std::string& path, const Graph& graph,
                                            const Cluster& cluster);

// Everything a command needs to evaluate placements of one graph on one cluster. Owns the graph
// and cluster; the cost table and simulator refer to them, so a Session is never moved.
class Session {
 public:
  Session(Workload workload, const std::optional<std::string>& cluster_arg);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Workload& workload() const { return workload_; }
  const Graph& graph() const { return workload_.graph; }
  const Cluster& cluster() const { return cluster_; }
  const CostTable& costs() const { return *costs_; }
  const Simulator& simulator() const { return *simulator_; }
  // The model's expert placement for this cluster, if the model has one.
  std::optional<Placement> expert_placement() const;

 private:
  // check_profiles_on_cluster (io/ort_profile.h), and a warning for ops whose measured times (from
  // profiles or the graph file) are all for devices or kinds the cluster lacks.
  void check_measured_devices() const;

  Workload workload_;
  Cluster cluster_;
  std::unique_ptr<CostTable> costs_;
  std::unique_ptr<Simulator> simulator_;
};

}  // namespace dplace::cli
