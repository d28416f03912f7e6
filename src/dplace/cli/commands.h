// The `dplace` command line (docs/cli.md). Each command lives in its own cmd_*.cc file and
// registers itself on the CLI11 app through one add_*_command function declared here; main.cc calls
// them all. Shared pieces (loading GRAPH, resolving --cluster, printing results) are in
// workload.h and report.h.
//
// Error convention: bad input throws a dplace::Error; main() prints "dplace: <message>" as one
// line on stderr and exits 2. Usage errors (unknown flag, missing argument) also exit 2.
#pragma once

#include <CLI/CLI.hpp>

namespace dplace::cli {

void add_list_commands(CLI::App& app);     // models, clusters, placers
void add_info_command(CLI::App& app);      // info
void add_simulate_command(CLI::App& app);  // simulate
void add_place_commands(CLI::App& app);    // place, compare
void add_pipeline_command(CLI::App& app);  // pipeline

}  // namespace dplace::cli
