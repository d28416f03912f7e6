#include "dplace/cli/report.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <system_error>

#include "dplace/core/error.h"
#include "dplace/core/files.h"
#include "dplace/io/dot.h"
#include "dplace/io/placement_json.h"
#include "dplace/io/trace.h"

namespace dplace::cli {

std::optional<double> ratio_to_lower_bound(double step_time_s, double lower_bound_s) {
  if (lower_bound_s > 0) return step_time_s / lower_bound_s;
  if (step_time_s == 0) return 1.0;
  return std::nullopt;
}

std::string format_ratio(std::optional<double> ratio) {
  return ratio ? fmt::format("{:.3f}", *ratio) : "n/a";
}

std::string csv_quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

Evaluation evaluate(const Session& session, std::string placer, Placement placement) {
  Evaluation e;
  e.placer = std::move(placer);
  e.placement = std::move(placement);
  e.sim = session.simulator().run(e.placement);
  return e;
}

Json evaluation_to_json(const Session& session, const Evaluation& e) {
  const Cluster& cluster = session.cluster();
  Json oom = Json::array();
  for (const OomDevice& d : e.sim.oom_devices) {
    oom.push_back({{"device", cluster.device(d.device).name},
                   {"peak_memory_bytes", d.peak_memory_bytes},
                   {"capacity_bytes", d.capacity_bytes},
                   {"overflow_bytes", d.overflow_bytes}});
  }
  Json peak = Json::object();
  Json busy = Json::object();
  Json ops_per_device = Json::object();
  std::vector<int64_t> op_count(cluster.num_devices(), 0);
  for (DeviceId d : e.placement.device_of_op) ++op_count[d.value()];
  for (size_t i = 0; i < cluster.num_devices(); ++i) {
    const std::string& name = cluster.devices()[i].name;
    peak[name] = e.sim.devices[i].peak_memory_bytes;
    busy[name] = e.sim.devices[i].busy_s;
    ops_per_device[name] = op_count[i];
  }
  const double lb = session.simulator().lower_bound_s();
  const std::optional<double> ratio = ratio_to_lower_bound(e.sim.step_time_s, lb);
  Json j = {{"graph", session.graph().name()},
            {"cluster", cluster.name()},
            {"placer", e.placer},
            {"step_time_s", e.sim.step_time_s},
            {"feasible", e.sim.feasible},
            {"oom_devices", oom},
            {"peak_memory_bytes", peak},
            {"lower_bound_s", lb},
            {"ratio_to_lower_bound", ratio ? Json(*ratio) : Json(nullptr)},
            {"placement_seconds", e.placement_seconds},
            {"evaluations", e.evaluations},
            {"busy_s", busy},
            {"ops_per_device", ops_per_device},
            {"transfers", e.sim.num_transfers},
            {"transferred_bytes", e.sim.transferred_bytes}};
  if (!e.note.empty()) j["note"] = e.note;
  if (!e.infeasible_reason.empty()) j["infeasible_reason"] = e.infeasible_reason;
  return j;
}

void print_evaluation(const Session& session, const Evaluation& e, std::FILE* out) {
  const Cluster& cluster = session.cluster();
  const double lb = session.simulator().lower_bound_s();
  fmt::print(out, "graph {} ({} ops) on {}, placer {}\n", session.graph().name(),
             session.graph().num_ops(), cluster.name(), e.placer);
  fmt::print(out, "step time    {}   lower bound {}   ratio {}\n",
             format_seconds(e.sim.step_time_s), format_seconds(lb),
             format_ratio(ratio_to_lower_bound(e.sim.step_time_s, lb)));
  fmt::print(out, "feasible     {}\n", e.sim.feasible ? "yes" : "NO (out of memory)");
  std::vector<int64_t> op_count(cluster.num_devices(), 0);
  for (DeviceId d : e.placement.device_of_op) ++op_count[d.value()];
  fmt::print(out, "{:<18} {:<5} {:>8} {:>12} {:>6} {:>12} {:>12}\n", "device", "kind", "ops",
             "busy", "util", "peak mem", "capacity");
  for (size_t i = 0; i < cluster.num_devices(); ++i) {
    const Device& d = cluster.devices()[i];
    const DeviceStats& s = e.sim.devices[i];
    const bool oom = s.peak_memory_bytes > d.memory_bytes;
    fmt::print(out, "{:<18} {:<5} {:>8} {:>12} {:>5.1f}% {:>12} {:>12}{}\n", d.name,
               device_kind_name(d.kind), op_count[i], format_seconds(s.busy_s),
               e.sim.step_time_s > 0 ? 100.0 * s.busy_s / e.sim.step_time_s : 0.0,
               format_bytes(double(s.peak_memory_bytes)), format_bytes(double(d.memory_bytes)),
               oom ? "  OOM" : "");
  }
  fmt::print(out, "transfers    {} ({})\n", e.sim.num_transfers,
             format_bytes(double(e.sim.transferred_bytes)));
  // `simulate` reads its placement, so nothing was placed there (it printed "0 us (0
  // simulations)").
  if (e.evaluations > 0) {
    fmt::print(out, "placed in    {} ({} simulations)\n", format_seconds(e.placement_seconds),
               e.evaluations);
  }
  if (!e.infeasible_reason.empty()) fmt::print(out, "note         {}\n", e.infeasible_reason);
  if (!e.note.empty()) fmt::print(out, "note         {}\n", e.note);
}

void add_output_options(CLI::App* cmd, OutputArgs& args, bool with_placement_out) {
  if (with_placement_out) {
    cmd->add_option("-o,--output", args.placement_path, "write the placement (dplace.placement/1)")
        ->check(non_empty_value("a file name"));
  }
  cmd->add_option("--trace", args.trace_path, "write a Chrome trace-event timeline (Perfetto)")
      ->check(non_empty_value("a file name"));
  cmd->add_option("--dot", args.dot_path, "write the placed graph as .dot or .svg (Graphviz)")
      ->check(non_empty_value("a file name"));
  cmd->add_flag("--json", args.json, "print one JSON object on stdout");
}

void check_outputs_apart(const std::vector<NamedPath>& outputs) {
  std::vector<std::filesystem::path> resolved;
  for (const NamedPath& o : outputs) {
    // An empty name is no file (its option refuses it with its own message); absolute("")
    // would throw.
    if (o.path.empty()) {
      resolved.emplace_back();
      continue;
    }
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(o.path, ec);
    if (ec) absolute = o.path;
    std::filesystem::path p = std::filesystem::weakly_canonical(absolute, ec);
    if (ec) p = absolute.lexically_normal();
    resolved.push_back(std::move(p));
  }
  // Two names of one existing file (hard links) are one file too.
  auto same_inode = [](const std::string& a, const std::string& b) {
    struct stat sa {};
    struct stat sb {};
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && S_ISREG(sa.st_mode) &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (resolved[i].empty() || resolved[j].empty()) continue;
      if (resolved[i] == resolved[j] || same_inode(outputs[i].path, outputs[j].path)) {
        // "-o FILE", but "--param curve=FILE".
        auto shown = [](const NamedPath& o) {
          return o.option + (o.option.ends_with('=') ? "" : " ") + o.path;
        };
        throw ConfigError(fmt::format("{} and {} are the same file: one would overwrite the other",
                                      shown(outputs[j]), shown(outputs[i])));
      }
    }
  }
}

void check_output_paths(const OutputArgs& args) {
  check_outputs_apart(output_files(args));
  for (const std::string& path : {args.placement_path, args.trace_path, args.dot_path}) {
    if (path.empty()) continue;
    const std::filesystem::path p(path);
    if (const std::string problem = path_status_problem(path); !problem.empty()) {
      throw ConfigError(fmt::format("{}: cannot open file for writing ({})", path, problem));
    }
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      throw ConfigError(fmt::format("{}: cannot open file for writing (it is a directory)", path));
    }
    const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
    if (!std::filesystem::is_directory(dir, ec)) {
      throw ConfigError(
          fmt::format("{}: cannot open file for writing (no directory '{}')", path, dir.string()));
    }
    const bool exists = std::filesystem::exists(p, ec);
    if (access(exists ? path.c_str() : dir.c_str(), W_OK) != 0) {
      throw ConfigError(fmt::format("{}: cannot open file for writing ({} is not writable)", path,
                                    exists ? "the file" : "its directory"));
    }
  }
}

std::vector<NamedPath> output_files(const OutputArgs& args) {
  std::vector<NamedPath> out;
  if (!args.placement_path.empty()) out.push_back({"-o", args.placement_path});
  if (!args.trace_path.empty()) out.push_back({"--trace", args.trace_path});
  if (!args.dot_path.empty()) out.push_back({"--dot", args.dot_path});
  return out;
}

void write_outputs(const Session& session, const Evaluation& e, const OutputArgs& args) {
  if (!args.placement_path.empty()) {
    write_placement_file(session.graph(), session.cluster(), e.placement, args.placement_path);
  }
  if (!args.trace_path.empty()) {
    SimResult timeline = session.simulator().run(e.placement, SimOptions{.record_timeline = true});
    write_trace_file(session.graph(), session.cluster(), timeline, args.trace_path);
  }
  if (!args.dot_path.empty()) {
    write_dot(session.graph(), session.cluster(), &e.placement, args.dot_path);
  }
}

}  // namespace dplace::cli
