// Printing and saving the outcome of evaluating one placement: the `--json` object of
// docs/cli.md, the human-readable summary, and the optional -o / --trace / --dot files.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "dplace/cli/workload.h"
#include "dplace/core/format.h"  // format_seconds
#include "dplace/core/json.h"
#include "dplace/io/dot.h"  // format_bytes
#include "dplace/sim/simulator.h"

namespace dplace::cli {

struct Evaluation {
  std::string placer;
  Placement placement;
  SimResult sim;
  double placement_seconds = 0;  // wall time of the placer
  int64_t evaluations = 0;       // simulations the placer ran
  std::string note;
  std::string infeasible_reason;
};

// step_time_s / lower_bound_s; 1 when both are 0; none when only the bound is 0 (a graph whose
// ops all take no time but whose transfers do), where a ratio of 0 would read as beating the bound.
std::optional<double> ratio_to_lower_bound(double step_time_s, double lower_bound_s);
// The ratio with three decimals, or "n/a".
std::string format_ratio(std::optional<double> ratio);
// `text` as one CSV field (RFC 4180): in double quotes, each inner quote doubled.
std::string csv_quoted(std::string_view text);

// Simulates `placement` (summary only) and fills an Evaluation.
Evaluation evaluate(const Session& session, std::string placer, Placement placement);

// The docs/cli.md object: graph, cluster, placer, step_time_s, feasible, oom_devices,
// peak_memory_bytes (device name -> bytes), lower_bound_s, placement_seconds, evaluations, plus
// per-device busy time and transfer totals.
Json evaluation_to_json(const Session& session, const Evaluation& e);
// A few aligned lines: step time vs lower bound, then one row per device.
void print_evaluation(const Session& session, const Evaluation& e, std::FILE* out);

struct OutputArgs {
  std::string placement_path;  // -o
  std::string trace_path;      // --trace
  std::string dot_path;        // --dot (.dot or .svg)
  bool json = false;           // --json
};
void add_output_options(CLI::App* cmd, OutputArgs& args, bool with_placement_out);
// A file a command writes, with the option that names it ("-o", "--param curve=", ...; shown
// followed by a space unless it ends with '=').
struct NamedPath {
  std::string option;
  std::string path;
};

// The files -o, --trace and --dot name (those given).
std::vector<NamedPath> output_files(const OutputArgs& args);

// Throws ConfigError naming both options when two of `outputs` are the same file (after resolving
// "." and "..", and symbolic links in the part that exists; or two hard links to one existing
// regular file): the later write would replace the earlier one without a word.
void check_outputs_apart(const std::vector<NamedPath>& outputs);

// Also refuses two of -o, --trace and --dot naming the same file (check_outputs_apart).
// Throws ConfigError "PATH: cannot open file for writing (...)" for an output path that is a
// directory or whose directory is missing or not writable, so that a long search is not run for
// a result that cannot be saved. Called before the work; write_outputs still reports later errors.
void check_output_paths(const OutputArgs& args);
// Writes -o, --trace (re-simulating with the timeline) and --dot for one evaluation.
void write_outputs(const Session& session, const Evaluation& e, const OutputArgs& args);

}  // namespace dplace::cli
