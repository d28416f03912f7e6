#include "dplace/cli/workload.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "dplace/cluster/presets.h"
#include "dplace/core/error.h"
#include "dplace/core/files.h"
#include "dplace/core/format.h"
#include "dplace/io/placement_json.h"

namespace dplace::cli {

void add_graph_options(CLI::App* cmd, GraphArgs& args) {
  cmd->add_option("GRAPH", args.spec, "built-in model name or graph file (.onnx, JSON, graph.txt)")
      ->required()
      ->check(non_empty_value("a model name or a graph file"));
  // Sizes are decimal: CLI11's integer conversion read "010" as 8 and "0x10" as 16. An empty size
  // used to read as "not given" (the model's default) without a word. Negative values reach the
  // model, whose message names its limits.
  auto size_option = [&](const char* name, std::optional<int>& target, const char* help) {
    cmd->add_option_function<std::string>(
           name,
           [name, &target](const std::string& text) {
             const bool negative = !text.empty() && text[0] == '-';
             const char* first = text.data() + (negative ? 1 : 0);
             uint64_t value = 0;  // unsigned: from_chars takes no sign, so "--5" is refused
             const auto [end, ec] = std::from_chars(first, text.data() + text.size(), value);
             if (first == text.data() + text.size() || ec != std::errc() ||
                 end != text.data() + text.size() ||
                 value > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
               throw ConfigError(fmt::format(
                   "{} '{}': expected a whole number in decimal, at most 2147483647", name, text));
             }
             target = negative ? -static_cast<int>(value) : static_cast<int>(value);
           },
           help)
        ->type_name("INT");
  };
  size_option("--batch", args.batch, "batch size (built-in models)");
  size_option("--layers", args.layers, "number of layers (built-in models)");
  size_option("--hidden", args.hidden, "hidden size (built-in models)");
  size_option("--seq", args.seq, "sequence length (built-in models)");
  size_option("--vocab", args.vocab, "vocabulary size (built-in models)");
  cmd->add_flag("--training", args.training, "forward + backward + update graph");
  cmd->add_flag("--inference", args.inference, "forward graph only");
  cmd->add_option("--dim", args.dims, "value of a symbolic ONNX dimension, name=value");
  cmd->add_option("--profile", args.profiles,
                  "onnxruntime profile (JSON) whose measured node times replace the cost model's "
                  "on the device kind each node ran on; FILE=DEVICE names the device")
      ->type_name("FILE[=DEVICE]")
      ->check(non_empty_value("an onnxruntime profile file"));
}

CLI::Validator non_empty_value(const std::string& expected) {
  return CLI::Validator(
      [expected](const std::string& value) {
        return value.empty() ? "empty value: expected " + expected : std::string();
      },
      "", "non-empty");
}

void add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& help) {
  cmd->add_option_function<std::string>(
         "--seed",
         [&seed](const std::string& text) {
           uint64_t value = 0;
           const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
           if (ec != std::errc() || end != text.data() + text.size()) {
             throw ConfigError(fmt::format(
                 "--seed '{}': expected a whole number in [0, 18446744073709551615]", text));
           }
           seed = value;
         },
         help)
      ->type_name("UINT");
}

void add_seconds_option(CLI::App* cmd, const std::string& name, double& seconds,
                        const std::string& help) {
  cmd->add_option_function<std::string>(
         name,
         [name, &seconds](const std::string& text) {
           if (text.empty()) {
             throw ConfigError(fmt::format("{}: empty value: expected a number of seconds", name));
           }
           double value = 0;
           const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
           if (ec != std::errc() || end != text.data() + text.size()) {
             throw ConfigError(
                 fmt::format("{} '{}': expected a number of seconds in (0, {}], in decimal", name,
                             text, kMaxLimitSeconds));
           }
           check_limit_seconds(name, value);
           seconds = value;
         },
         help)
      ->type_name("SECONDS");
}

namespace {

std::vector<std::string>& waiting_input_warnings() {
  static std::vector<std::string> waiting;
  return waiting;
}

}  // namespace

void defer_input_warning(std::string line) { waiting_input_warnings().push_back(std::move(line)); }

Placement read_placement_deferring_warnings(const std::string& path, const Graph& graph,
                                            const Cluster& cluster) {
  std::vector<std::string> warnings;
  Placement placement = read_placement_file(path, graph, cluster, &warnings);
  for (std::string& w : warnings) defer_input_warning(std::move(w));
  return placement;
}

void print_input_warnings() {
  for (const std::string& line : waiting_input_warnings()) {
    print_to_stderr("dplace: warning: {}\n", one_line(line));
  }
  waiting_input_warnings().clear();
}

void drop_input_warnings() { waiting_input_warnings().clear(); }

namespace {

std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& dims) {
  std::map<std::string, int64_t> out;
  for (const std::string& d : dims) {
    const size_t eq = d.find('=');
    int64_t value = 0;
    const char* first = d.data() + (eq == std::string::npos ? 0 : eq + 1);
    const char* last = d.data() + d.size();
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (eq == std::string::npos || eq == 0 || ec != std::errc() || ptr != last || value <= 0) {
      throw ConfigError(fmt::format("--dim '{}': expected name=positive-integer", d));
    }
    const auto [it, inserted] = out.emplace(d.substr(0, eq), value);
    if (!inserted) {
      throw ConfigError(
          fmt::format("--dim '{}': dimension '{}' is already set to {}", d, it->first, it->second));
    }
  }
  return out;
}

}  // namespace

namespace {

Workload load_graph_or_model(const GraphArgs& args) {
  if (args.training && args.inference) {
    throw ConfigError("--training and --inference are mutually exclusive");
  }
  Workload w;
  if (const ModelEntry* model = find_model(args.spec)) {
    if (!args.dims.empty()) throw ConfigError("--dim applies to ONNX files, not built-in models");
    ModelOptions options{.batch = args.batch,
                         .layers = args.layers,
                         .hidden = args.hidden,
                         .seq = args.seq,
                         .vocab = args.vocab,
                         .inference = args.inference};
    w.graph = model->build(options);
    w.model = model;
    w.format = "model";
    return w;
  }
  if (const std::string problem = path_status_problem(args.spec); !problem.empty()) {
    throw FormatError(fmt::format("{}: cannot open: {}", args.spec, problem));
  }
  std::error_code ec;
  if (!std::filesystem::exists(args.spec, ec)) {
    std::string known;
    for (const ModelEntry& m : model_registry()) known += (known.empty() ? "" : ", ") + m.name;
    throw FormatError(
        fmt::format("{}: no such file, and not a built-in model (models: {})", args.spec, known));
  }
  if (args.batch || args.layers || args.hidden || args.seq || args.vocab) {
    throw ConfigError(fmt::format(
        "{}: --batch/--layers/--hidden/--seq/--vocab apply to built-in models only", args.spec));
  }
  ImportOptions options;
  options.dims = parse_dims(args.dims);
  if (args.training) options.training = true;
  if (args.inference) options.training = false;
  LoadedGraph loaded = load_graph_file(args.spec, options);
  for (std::string& warning : loaded.warnings) defer_input_warning(std::move(warning));
  w.graph = std::move(loaded.graph);
  w.implied_cluster = std::move(loaded.implied_cluster);
  w.format = loaded.format;
  w.path = args.spec;
  return w;
}

}  // namespace

Workload load_workload(const GraphArgs& args) {
  Workload w = load_graph_or_model(args);
  if (args.profiles.empty()) return w;
  std::vector<OrtProfile> profiles;
  for (const std::string& text : args.profiles) {
    profiles.push_back(read_ort_profile(parse_profile_spec(text)));
  }
  MeasuredGraph measured = apply_ort_profiles(w.graph, profiles);
  for (std::string& warning : measured.warnings) defer_input_warning(std::move(warning));
  w.graph = std::move(measured.graph);
  w.profiles = std::move(measured.profiles);
  return w;
}

namespace {

Cluster choose_cluster(const Workload& w, const std::optional<std::string>& cluster_arg) {
  if (cluster_arg) return load_cluster(*cluster_arg);
  if (w.implied_cluster) return *w.implied_cluster;
  throw ConfigError(fmt::format("graph '{}' implies no cluster: pass --cluster (presets: {})",
                                w.graph.name(), fmt::join(preset_names(), ", ")));
}

}  // namespace

Session::Session(Workload workload, const std::optional<std::string>& cluster_arg)
    : workload_(std::move(workload)), cluster_(choose_cluster(workload_, cluster_arg)) {
  try {
    costs_ = std::make_unique<CostTable>(workload_.graph, cluster_);
  } catch (const ConfigError& e) {
    // An op the cluster cannot run: name the graph's file when there is one.
    if (workload_.path.empty()) throw;
    throw ConfigError(workload_.path + ": " + e.what());
  }
  simulator_ = std::make_unique<Simulator>(workload_.graph, cluster_, *costs_);
  check_measured_devices();
}

void Session::check_measured_devices() const {
  for (std::string& warning :
       check_profiles_on_cluster(workload_.profiles, workload_.graph, cluster_)) {
    defer_input_warning(std::move(warning));
  }
  // An op whose measured times are all for devices or kinds the cluster lacks has the cost
  // model's estimates instead: say so, whatever their source (a profile, a graph file's time_s).
  // Files that time every op on several kinds (PipeDream: gpu and accel) are quiet on a cluster
  // with one of them.
  size_t unused_ops = 0;
  std::set<std::string> unused_devices;
  for (const Op& op : workload_.graph.ops()) {
    if (op.time_s.empty()) continue;
    const bool any_used =
        std::any_of(op.time_s.begin(), op.time_s.end(),
                    [&](const TimeOverride& t) { return cluster_.has_device_or_kind(t.device); });
    if (any_used) continue;
    ++unused_ops;
    for (const TimeOverride& t : op.time_s) unused_devices.insert(t.device);
  }
  if (unused_ops > 0) {
    std::string devices;
    for (const std::string& d : unused_devices)
      devices += (devices.empty() ? "'" : ", '") + d + "'";
    defer_input_warning(fmt::format(
        "graph '{}': {} op{} measured times only for {}, which cluster '{}' lacks; the cost "
        "model's estimates are used there",
        workload_.graph.name(), unused_ops, unused_ops == 1 ? " has" : "s have", devices,
        cluster_.name()));
  }
}

std::optional<Placement> Session::expert_placement() const {
  if (!workload_.model || !workload_.model->expert) return std::nullopt;
  return workload_.model->expert(workload_.graph, cluster_);
}

}  // namespace dplace::cli
