// dplace place   GRAPH --cluster C --placer NAME [--seed N] [--budget-seconds S] [-o P.json]
//                [--json] [--trace T.json] [--dot F.dot|F.svg]
//                [--groups N] [--samples N] [--checkpoint P] [--curve F.csv] [--measure-cmd C]
//                (the rl placer's run controls; each is the same as --param KEY=VALUE)
// dplace compare GRAPH --cluster C [--placers a,b,...] [--seed N] [--budget-seconds S]
//                [--json|--csv] [-o P.json] [--trace T.json] [--dot F]   (files for the best
//                placement)
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <new>
#include <optional>
#include <system_error>

#include "dplace/cli/commands.h"
#include "dplace/cli/report.h"
#include "dplace/cli/workload.h"
#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/io/placement_json.h"
#include "dplace/placers/placer.h"
#include "dplace/sim/placement.h"

namespace dplace::cli {
namespace {

struct SearchArgs {
  GraphArgs graph;
  std::optional<std::string> cluster;
  uint64_t seed = 1;
  double budget_seconds = 60;
  bool progress = false;
  std::string expert_path;          // --placement FILE: expert placer, anneal/rl warm starts
  std::vector<std::string> params;  // --param key=value
  // Options that stand for --param KEY=VALUE (place only): option name without "--" -> value.
  std::map<std::string, std::string> param_options;
};

void add_search_options(CLI::App* cmd, SearchArgs& args) {
  add_graph_options(cmd, args.graph);
  cmd->add_option("--cluster", args.cluster, "preset name or cluster JSON file")
      ->check(non_empty_value("a preset or a cluster file"));
  add_seed_option(cmd, args.seed, "seed of randomised placers (default 1)");
  add_seconds_option(cmd, "--budget-seconds", args.budget_seconds,
                     "wall-clock budget of search placers (default 60)");
  cmd->add_flag("--progress", args.progress, "progress lines on stderr even when not a terminal");
  cmd->add_option("--placement", args.expert_path,
                  "expert placement file replacing the model's own (expert placer; anneal's and "
                  "rl's warm starts)")
      ->check(non_empty_value("a placement file"));
  cmd->add_option("--param", args.params, "placer option key=value (repeatable)");
}

// The rl placer's run controls as options of their own (the names of the issue and the paper's
// description), post's, hsdag's and hierarchical's too where they have them; each is stored as
// --param NAME=VALUE, so the placer parses and checks it.
void add_param_options(CLI::App* cmd, SearchArgs& args) {
  struct ParamOption {
    const char* name;
    const char* help;
  };
  static const ParamOption kOptions[] = {
      {"groups",
       "rl, post, hsdag: placement groups at the finest level; hierarchical: its grouper's groups "
       "(same as --param groups=N)"},
      {"samples",
       "rl, post, hsdag, hierarchical: stop after this many samples (same as --param "
       "samples=N)"},
      {"checkpoint", "rl: save and resume the learning here (same as --param checkpoint=PATH)"},
      {"curve",
       "rl, post, hsdag, hierarchical: write the learning curve as CSV (same as --param "
       "curve=FILE.csv)"},
      {"measure-cmd",
       "rl: measure placements with 'CMD {placement}' (same as --param measure-cmd=CMD)"},
  };
  for (const ParamOption& o : kOptions) {
    const std::string name = o.name;
    cmd->add_option_function<std::string>(
        "--" + name, [&args, name](const std::string& v) { args.param_options[name] = v; }, o.help);
  }
}

PlaceRequest make_request(const Session& session, const SearchArgs& args) {
  PlaceRequest r;
  r.graph = &session.graph();
  r.cluster = &session.cluster();
  r.costs = &session.costs();
  r.simulator = &session.simulator();
  r.seed = args.seed;
  r.budget_seconds = args.budget_seconds;
  r.progress = args.progress || isatty(STDERR_FILENO);
  if (!args.expert_path.empty()) {
    r.expert =
        read_placement_deferring_warnings(args.expert_path, session.graph(), session.cluster());
    // As `simulate` checks it: an op on a device it may not use, or a colocation group split.
    // (A link the cluster lacks is left to the placers, which say what they do about it.)
    const std::string problem =
        placement_structure_problem(session.graph(), session.cluster(), session.costs(), *r.expert);
    if (!problem.empty()) throw ConfigError(fmt::format("{}: {}", args.expert_path, problem));
  } else {
    r.expert = session.expert_placement();
  }
  for (const std::string& p : args.params) {
    const size_t eq = p.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError(fmt::format("--param '{}': expected key=value", p));
    }
    r.params[p.substr(0, eq)] = p.substr(eq + 1);
  }
  for (const auto& [key, value] : args.param_options) {
    if (r.params.count(key)) {
      throw ConfigError(fmt::format("--{} and --param {}= both given; use one of them", key, key));
    }
    r.params[key] = value;
  }
  return r;
}

// Placer-scoped keys: "--param PLACER.KEY=V" goes to that placer only, as KEY=V; plain keys go
// to every placer. Throws ConfigError for a scope that names none of `placers`.
void check_param_scopes(const std::map<std::string, std::string>& params,
                        const std::vector<std::string>& placers) {
  for (const auto& [key, value] : params) {
    const size_t dot = key.find('.');
    if (dot == std::string::npos) continue;
    const std::string scope = key.substr(0, dot);
    if (std::find(placers.begin(), placers.end(), scope) == placers.end()) {
      throw ConfigError(
          fmt::format("--param {}={}: '{}' is not a placer of this run", key, value, scope));
    }
  }
}

// The keys placer `name` receives (see check_param_scopes).
std::map<std::string, std::string> params_for(const std::map<std::string, std::string>& params,
                                              const std::string& name) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : params) {
    const size_t dot = key.find('.');
    if (dot == std::string::npos) {
      out.emplace(key, value);
    } else if (key.substr(0, dot) == name) {
      out[key.substr(dot + 1)] = value;  // a scoped key wins over the plain one
    }
  }
  return out;
}

// Refuses a curve or checkpoint file (rl's, post's, hsdag's, hierarchical's) that names the same
// file as another output (-o, --trace, --dot, or each other) for any of `placers`: the later write
// replaced the earlier. A plain key that two of the run's placers would write (compare --placers
// rl,post --curve F) is refused too: both wrote F.
void check_param_files_apart(const std::map<std::string, std::string>& params,
                             const std::vector<std::string>& placers, const OutputArgs& out) {
  // The placers that write a file for each key (in the order the errors name them).
  struct FileParam {
    std::string key;
    std::vector<std::string> writers;
  };
  static const std::vector<FileParam> kWriters = {
      {"curve", {"rl", "post", "hsdag", "hierarchical"}}, {"checkpoint", {"rl"}}};
  std::vector<NamedPath> files = output_files(out);
  std::map<std::string, std::string> writer_of_option;  // a plain key's option -> its first writer
  for (const std::string& placer : placers) {
    const std::map<std::string, std::string> given = params_for(params, placer);
    for (const auto& [key, writers] : kWriters) {
      const auto it = given.find(key);
      if (it == given.end()) continue;
      const std::string scoped = placer + "." + key;
      const std::string option = "--param " + (params.count(scoped) ? scoped : key) + "=";
      const bool writes = std::find(writers.begin(), writers.end(), placer) != writers.end();
      if (writes && !params.count(scoped)) {
        const auto [first, inserted] = writer_of_option.try_emplace(option, placer);
        if (!inserted) {
          throw ConfigError(fmt::format(
              "{}{} goes to both {} and {}, which would write the same file; give each its own: "
              "--param {}.{}=FILE --param {}.{}=FILE",
              option, it->second, first->second, placer, first->second, key, placer, key));
        }
      }
      const bool listed = std::any_of(files.begin(), files.end(),
                                      [&](const NamedPath& f) { return f.option == option; });
      if (!listed) files.push_back({option, it->second});
    }
  }
  check_outputs_apart(files);
}

Evaluation run_placer(const Session& session, const PlaceRequest& shared, const std::string& name) {
  std::unique_ptr<Placer> placer = make_placer(name);
  PlaceRequest request = shared;
  request.params = params_for(shared.params, name);
  const auto start = std::chrono::steady_clock::now();
  PlaceResult result = placer->place(request);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Evaluation e = evaluate(session, name, std::move(result.placement));
  e.placement_seconds = seconds;
  e.evaluations = result.evaluations;
  e.note = result.note;
  e.infeasible_reason = result.infeasible_reason;
  return e;
}

struct PlaceArgs {
  SearchArgs search;
  std::string placer;
  OutputArgs out;
};

void run_place(const PlaceArgs& args) {
  if (!args.search.expert_path.empty() && !make_placer(args.placer)->uses_expert_placement()) {
    throw ConfigError(fmt::format(
        "--placement {}: placer '{}' does not read a placement (expert, anneal and rl do)",
        args.search.expert_path, args.placer));
  }
  check_output_paths(args.out);
  Session session(load_workload(args.search.graph), args.search.cluster);
  const PlaceRequest request = make_request(session, args.search);
  check_param_scopes(request.params, {args.placer});
  check_param_files_apart(request.params, {args.placer}, args.out);
  const Evaluation e = run_placer(session, request, args.placer);
  if (args.out.json) {
    fmt::print("{}\n", evaluation_to_json(session, e).dump(2));
  } else {
    print_evaluation(session, e, stdout);
  }
  write_outputs(session, e, args.out);
}

struct CompareArgs {
  SearchArgs search;
  std::vector<std::string> placers;
  bool csv = false;
  OutputArgs out;
};

// One row of the comparison; `error` is set when the placer could not run on this input.
struct CompareRow {
  std::optional<Evaluation> evaluation;
  std::string placer;
  std::string error;
};

void run_compare(const CompareArgs& args) {
  if (args.out.json && args.csv) throw ConfigError("--json and --csv are mutually exclusive");
  check_output_paths(args.out);
  Session session(load_workload(args.search.graph), args.search.cluster);
  const PlaceRequest request = make_request(session, args.search);
  std::vector<std::string> names = args.placers;
  if (names.empty()) {
    for (const PlacerInfo& p : list_placers()) {
      if (p.in_default_compare) names.push_back(p.name);
    }
  }
  std::vector<CompareRow> rows;
  std::vector<std::string> refused;  // placers the system refused a resource (memory, a thread)
  for (size_t i = 0; i < names.size(); ++i) {
    make_placer(names[i]);  // unknown names are an input error before any work starts
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i) {
      throw ConfigError(fmt::format("--placers: '{}' is named twice", names[i]));
    }
  }
  check_param_scopes(request.params, names);
  check_param_files_apart(request.params, names, args.out);
  for (const std::string& name : names) {
    CompareRow row;
    row.placer = name;
    try {
      row.evaluation = run_placer(session, request, name);
    } catch (const ConfigError& e) {
      row.error = e.what();
    } catch (const std::bad_alloc&) {
      // The other placers may still fit in memory: their rows are kept, and the run ends with
      // exit status 3 after the report (below).
      row.error = "placer '" + name + "': out of host memory";
      refused.push_back(name);
    } catch (const std::system_error& e) {
      row.error = e.what();
      refused.push_back(name);
    }
    if (request.progress) print_to_stderr("dplace: {} done\n", name);
    rows.push_back(std::move(row));
  }

  // Reference for the speed-up column, as in the 2017 paper's Table 2 ("over the fastest
  // baseline"): the fastest feasible row among that table's baselines, i.e. single-device
  // placements, the expert, scotch and mincut.
  auto is_paper_baseline = [](const std::string& placer) {
    return placer.rfind("single", 0) == 0 || placer == "expert" || placer == "scotch" ||
           placer == "mincut";
  };
  double best_baseline = 0;
  std::string best_baseline_name;
  double best_single = 0;
  for (const CompareRow& r : rows) {
    if (!r.evaluation || !r.evaluation->sim.feasible) continue;
    const double t = r.evaluation->sim.step_time_s;
    if (r.placer.rfind("single", 0) == 0 && (best_single == 0 || t < best_single)) best_single = t;
    if (!is_paper_baseline(r.placer)) continue;
    if (best_baseline == 0 || t < best_baseline) {
      best_baseline = t;
      best_baseline_name = r.placer;
    }
  }
  const CompareRow* best = nullptr;
  for (const CompareRow& r : rows) {
    if (!r.evaluation || !r.evaluation->sim.feasible) continue;
    if (!best || r.evaluation->sim.step_time_s < best->evaluation->sim.step_time_s) best = &r;
  }

  // Speed-up of a feasible row over a reference step time (none for an OOM row or without one).
  auto speedup = [](double reference_s, const Evaluation& e) -> std::optional<double> {
    if (reference_s <= 0 || !e.sim.feasible) return std::nullopt;
    return reference_s / e.sim.step_time_s;
  };
  auto json_or_null = [](std::optional<double> x) { return x ? Json(*x) : Json(nullptr); };

  const double lb = session.simulator().lower_bound_s();
  if (args.out.json) {
    Json out_rows = Json::array();
    for (const CompareRow& r : rows) {
      if (!r.evaluation) {
        out_rows.push_back({{"placer", r.placer}, {"error", r.error}});
        continue;
      }
      Json j = evaluation_to_json(session, *r.evaluation);
      j["speedup_vs_best_baseline"] = json_or_null(speedup(best_baseline, *r.evaluation));
      j["speedup_vs_best_single"] = json_or_null(speedup(best_single, *r.evaluation));
      out_rows.push_back(j);
    }
    fmt::print("{}\n",
               Json{{"graph", session.graph().name()},
                    {"cluster", session.cluster().name()},
                    {"lower_bound_s", lb},
                    {"best", best ? Json(best->placer) : Json(nullptr)},
                    {"best_baseline", best_baseline > 0 ? Json(best_baseline_name) : Json(nullptr)},
                    {"rows", out_rows}}
                   .dump(2));
  } else if (args.csv) {
    fmt::print(
        "placer,step_time_s,feasible,speedup_vs_best_baseline,max_peak_memory_bytes,"
        "ratio_to_lower_bound,placement_seconds,evaluations,error\n");
    for (const CompareRow& r : rows) {
      if (!r.evaluation) {
        fmt::print("{},,,,,,,,{}\n", r.placer, csv_quoted(r.error));
        continue;
      }
      const Evaluation& e = *r.evaluation;
      int64_t peak = 0;
      for (const DeviceStats& d : e.sim.devices) peak = std::max(peak, d.peak_memory_bytes);
      const std::optional<double> up = speedup(best_baseline, e);
      const std::optional<double> ratio = ratio_to_lower_bound(e.sim.step_time_s, lb);
      fmt::print("{},{:.9g},{},{},{},{},{:.6g},{},\n", r.placer, e.sim.step_time_s,
                 e.sim.feasible ? 1 : 0, up ? fmt::format("{:.4f}", *up) : "", peak,
                 ratio ? fmt::format("{:.4f}", *ratio) : "", e.placement_seconds, e.evaluations);
    }
  } else {
    fmt::print("graph {} ({} ops, {} groups) on {}; lower bound {}\n", session.graph().name(),
               session.graph().num_ops(), session.graph().num_groups(), session.cluster().name(),
               format_seconds(lb));
    fmt::print("{:<14} {:>12} {:>5} {:>9} {:>12} {:>8} {:>10} {:>7}\n", "placer", "step time",
               "OOM", "speed-up", "peak mem", "vs LB", "placed in", "evals");
    for (const CompareRow& r : rows) {
      if (!r.evaluation) {
        fmt::print("{:<14} n/a: {}\n", r.placer, r.error);
        continue;
      }
      const Evaluation& e = *r.evaluation;
      int64_t peak = 0;
      for (const DeviceStats& d : e.sim.devices) peak = std::max(peak, d.peak_memory_bytes);
      const std::optional<double> up = speedup(best_baseline, e);
      fmt::print("{:<14} {:>12} {:>5} {:>9} {:>12} {:>8} {:>10} {:>7}\n", r.placer,
                 format_seconds(e.sim.step_time_s), e.sim.feasible ? "" : "OOM",
                 up ? fmt::format("{:.2f}x", *up) : "-", format_bytes(double(peak)),
                 format_ratio(ratio_to_lower_bound(e.sim.step_time_s, lb)),
                 format_seconds(e.placement_seconds), e.evaluations);
    }
    if (best_baseline > 0) {
      fmt::print(
          "speed-up: relative to the fastest feasible baseline of the 2017 paper's Table 2 "
          "(single-device, expert, scotch, mincut): {}\n",
          best_baseline_name);
    }
    if (best) fmt::print("best: {}\n", best->placer);
  }
  if (best) {
    write_outputs(session, *best->evaluation, args.out);
  } else if (!args.out.placement_path.empty() || !args.out.trace_path.empty() ||
             !args.out.dot_path.empty()) {
    print_to_stderr("dplace: warning: no placer found a placement that fits; nothing written\n");
  }
  if (!refused.empty()) {
    std::string names;
    for (const std::string& name : refused) names += (names.empty() ? "" : ", ") + name;
    const bool several = refused.size() > 1;
    throw ResourceError(fmt::format(
        "compare: {} {} did not finish: the system refused a resource ({} which); the other rows "
        "are complete",
        several ? "placers" : "placer", names, several ? "their rows say" : "its row says"));
  }
}

}  // namespace

void add_place_commands(CLI::App& app) {
  auto place = std::make_shared<PlaceArgs>();
  CLI::App* cmd = app.add_subcommand("place", "find a placement with one placer");
  add_search_options(cmd, place->search);
  add_param_options(cmd, place->search);
  cmd->add_option("--placer", place->placer, "placer name (see dplace placers)")->required();
  add_output_options(cmd, place->out, true);
  cmd->callback([place] { run_place(*place); });

  auto compare = std::make_shared<CompareArgs>();
  CLI::App* cmp = app.add_subcommand("compare", "run several placers and compare them");
  add_search_options(cmp, compare->search);
  // Split by hand: CLI11's delimiter drops empty items, so "heft," or "heft,,metis" ran without
  // a word about the missing name.
  cmp->add_option_function<std::string>(
         "--placers",
         [compare](const std::string& list) {
           size_t begin = 0;
           while (true) {
             const size_t comma = std::min(list.find(',', begin), list.size());
             const std::string name = list.substr(begin, comma - begin);
             if (name.empty()) {
               throw ConfigError(fmt::format(
                   "--placers '{}': empty placer name (expected comma-separated names)", list));
             }
             compare->placers.push_back(name);
             if (comma == list.size()) break;
             begin = comma + 1;
           }
         },
         "comma-separated placer names")
      ->type_name("LIST");
  cmp->add_flag("--csv", compare->csv, "print CSV");
  add_output_options(cmp, compare->out, true);
  cmp->callback([compare] { run_compare(*compare); });
}

}  // namespace dplace::cli
