#include "dplace/io/ort_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <string_view>

#include "dplace/cluster/cluster.h"
#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/core/json.h"

namespace dplace {

namespace {

constexpr std::string_view kKernelSuffix = "_kernel_time";
constexpr double kMicrosecondsPerSecond = 1e6;  // dividing keeps 900 us exactly 900e-6 s
constexpr size_t kFewRuns = 3;     // below this many runs the first run's one-time work shows
constexpr size_t kNamesShown = 3;  // names quoted in a warning

// onnxruntime's execution providers that run on the host CPU, and those that run on a GPU.
bool is_cpu_provider(std::string_view provider) {
  static const std::set<std::string_view> kCpu = {"CPUExecutionProvider", "DnnlExecutionProvider",
                                                  "XnnpackExecutionProvider",
                                                  "ACLExecutionProvider", "ArmNNExecutionProvider"};
  return kCpu.count(provider) > 0;
}

bool is_gpu_provider(std::string_view provider) {
  static const std::set<std::string_view> kGpu = {
      "CUDAExecutionProvider",         "ROCMExecutionProvider", "TensorrtExecutionProvider",
      "MIGraphXExecutionProvider",     "DmlExecutionProvider",  "WebGpuExecutionProvider",
      "NvTensorRTRTXExecutionProvider"};
  return kGpu.count(provider) > 0;
}

struct NodeEvent {
  std::string name;
  std::string op_type;
  std::string provider;
  std::string node_index;  // args.node_index (or graph_index in older versions); may be empty
  double time_s = 0;
  std::optional<std::vector<int64_t>> output0_shape;
};

// The dims of a shape written as a JSON list of integers; nullopt for anything else.
std::optional<std::vector<int64_t>> integer_dims(const Json& list) {
  if (!list.is_array()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const Json& d : list) {
    if (!d.is_number_integer()) return std::nullopt;
    if (d.is_number_unsigned() && d.get<uint64_t>() > uint64_t{INT64_MAX}) return std::nullopt;
    dims.push_back(d.get<int64_t>());
  }
  return dims;
}

// onnxruntime writes each output as {"<type>": [dims]}; anything else reads as unknown.
std::optional<std::vector<int64_t>> first_output_shape(const Json& args) {
  const auto it = args.find("output_type_shape");
  if (it == args.end() || !it->is_array() || it->empty()) return std::nullopt;
  const Json& first = it->front();
  if (!first.is_object() || first.size() != 1) return std::nullopt;
  return integer_dims(*first.begin());
}

// An argument onnxruntime writes as a string ("12"); a number is taken as well.
std::string text_arg(const Json& args, std::string_view key) {
  const auto it = args.find(key);
  if (it == args.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return it->dump();
  return "";
}

std::string shape_text(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

// "1 node", "2 nodes".
std::string count_of(size_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

std::string in_quotes(const std::string& name) {
  return "'" + escape_control_characters(name) + "'";
}

std::string quoted_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kNamesShown; ++i) {
    out += (i == 0 ? "" : ", ") + in_quotes(names[i]);
  }
  if (names.size() > kNamesShown) out += ", ...";
  return out;
}

// The graph's first output shape of `op`, from the ONNX importer's `output_shapes`.
std::optional<std::vector<int64_t>> graph_output0_shape(const Op& op) {
  if (!op.extra.is_object()) return std::nullopt;
  const auto it = op.extra.find("output_shapes");
  if (it == op.extra.end() || !it->is_array() || it->empty()) return std::nullopt;
  return integer_dims(it->front());
}

// Which op a profiled node's name denotes: the op whose `onnxruntime_name` it is, else the op of
// that name.
class OpsByOnnxruntimeName {
 public:
  explicit OpsByOnnxruntimeName(const Graph& graph) : graph_(graph) {
    for (uint32_t i = 0; i < graph.num_ops(); ++i) {
      const Json& extra = graph.op(OpId(i)).extra;
      if (!extra.is_object()) continue;
      const auto it = extra.find("onnxruntime_name");
      if (it != extra.end() && it->is_string()) by_alias_.emplace(it->get<std::string>(), OpId(i));
    }
  }
  std::optional<OpId> find(const std::string& name) const {
    if (const auto it = by_alias_.find(name); it != by_alias_.end()) return it->second;
    return graph_.find_op(name);
  }

 private:
  const Graph& graph_;
  std::map<std::string, OpId> by_alias_;
};

// What one profile did to the graph, for its warnings.
struct ProfileTally {
  std::vector<std::string> unmatched;
  double unmatched_s = 0, total_s = 0;
  std::vector<std::string> ambiguous;
  std::vector<std::string> other_type;
  std::string first_other_type;
  std::vector<std::string> few_runs;
  std::vector<std::string> shape_differs;
  std::string first_shape_note;
  std::map<std::string, std::vector<OpId>> timed_per_device;  // the ops timed, per device
  std::set<std::string> own_devices;  // devices timed by nodes that are no CPU fallback
};

}  // namespace

ProfileSpec parse_profile_spec(const std::string& text) {
  ProfileSpec spec{.path = text, .device = ""};
  std::error_code ec;
  const size_t eq = text.rfind('=');
  if (eq != std::string::npos && !std::filesystem::exists(text, ec)) {
    spec.path = text.substr(0, eq);
    spec.device = text.substr(eq + 1);
    if (spec.device.empty()) {
      throw ConfigError(fmt::format(
          "--profile '{}': no device after '=' (FILE=DEVICE: a device kind or device name)", text));
    }
  }
  if (spec.path.empty()) {
    throw ConfigError(fmt::format("--profile '{}': no file (expected FILE or FILE=DEVICE)", text));
  }
  if (!spec.device.empty() && !std::filesystem::exists(spec.path, ec)) {
    throw FormatError(fmt::format(
        "--profile '{}': no such file, nor is '{}' one (read as FILE=DEVICE with device '{}')",
        text, spec.path, spec.device));
  }
  return spec;
}

double median_s(std::vector<double> run_times_s) {
  const size_t n = run_times_s.size();
  std::sort(run_times_s.begin(), run_times_s.end());
  return n % 2 == 1 ? run_times_s[n / 2] : (run_times_s[n / 2 - 1] + run_times_s[n / 2]) / 2;
}

OrtProfile read_ort_profile(const ProfileSpec& spec) {
  // Events other than node kernel events become null as they are parsed, and kernel events keep
  // only the fields read below: a profile of a million events holds a few hundred bytes of each.
  const Json doc = read_json_list_file(spec.path, "traceEvents", [](Json& ev) {
    if (!ev.is_object()) return;
    const auto cat = ev.find("cat");
    const auto name = ev.find("name");
    if (cat == ev.end() || !cat->is_string() || *cat != "Node" ||
        (name != ev.end() && name->is_string() &&
         !name->get_ref<const std::string&>().ends_with(kKernelSuffix))) {
      ev = Json(Json::value_t::discarded);  // a value no file can hold
      return;
    }
    Json kept = Json::object();
    for (const char* key : {"cat", "name", "dur"}) {
      if (const auto it = ev.find(key); it != ev.end()) kept[key] = std::move(*it);
    }
    if (const auto args = ev.find("args"); args != ev.end()) {
      if (!args->is_object()) {
        kept["args"] = std::move(*args);
      } else {
        Json& kept_args = kept["args"] = Json::object();
        for (const char* key : {"provider", "op_name", "node_index", "graph_index"}) {
          if (const auto it = args->find(key); it != args->end()) kept_args[key] = std::move(*it);
        }
        if (const auto it = args->find("output_type_shape");
            it != args->end() && it->is_array() && !it->empty()) {
          kept_args["output_type_shape"] = Json::array({std::move(it->front())});
        }
      }
    }
    ev = std::move(kept);
  });
  const Json* events = &doc;
  if (doc.is_object() && doc.contains("traceEvents")) events = &doc["traceEvents"];
  if (!events->is_array()) {
    throw FormatError(fmt::format(
        "{}: not an onnxruntime profile: expected a JSON array of trace events (or an object "
        "with one under 'traceEvents')",
        spec.path));
  }

  std::vector<NodeEvent> node_events;
  bool any_accelerator = false;
  for (size_t i = 0; i < events->size(); ++i) {
    const Json& ev = (*events)[i];
    if (ev.is_discarded()) continue;  // dropped while parsing: not a node kernel event
    const JsonContext at_event{spec.path, fmt::format("event {}", i)};
    require_object(ev, at_event);
    const auto cat = ev.find("cat");
    const auto name = ev.find("name");
    if (cat == ev.end() || !cat->is_string() || *cat != "Node") continue;
    if (name == ev.end() || !name->is_string()) at_event.fail("name", "expected a string");
    const std::string& full = name->get_ref<const std::string&>();
    if (!full.ends_with(kKernelSuffix)) continue;

    const JsonContext ctx{spec.path, fmt::format("event {} ({})", i, in_quotes(full))};
    if (full.size() == kKernelSuffix.size()) ctx.fail("name", "a node event without a node name");
    const double dur_us = get_nonnegative(ev, "dur", ctx);
    if (dur_us / kMicrosecondsPerSecond > kMaxOpSeconds) {
      ctx.fail("dur", fmt::format("{} microseconds is more than {:g} s", dur_us, kMaxOpSeconds));
    }
    NodeEvent node{.name = full.substr(0, full.size() - kKernelSuffix.size()),
                   .op_type = "",
                   .provider = "",
                   .node_index = "",
                   .time_s = dur_us / kMicrosecondsPerSecond,
                   .output0_shape = std::nullopt};
    if (const auto args = ev.find("args"); args != ev.end() && args->is_object()) {
      node.provider = get_string_or(*args, "provider", ctx.at("args"), "");
      node.op_type = get_string_or(*args, "op_name", ctx.at("args"), "");
      node.node_index = text_arg(*args, "node_index");
      if (node.node_index.empty()) node.node_index = text_arg(*args, "graph_index");
      node.output0_shape = first_output_shape(*args);
    }
    if (!is_cpu_provider(node.provider)) any_accelerator = true;
    node_events.push_back(std::move(node));
  }
  if (node_events.empty()) {
    throw ConfigError(fmt::format(
        "{}: no node events (\"cat\": \"Node\", named <node>{}); is it the profile of at least "
        "one onnxruntime session run?",
        spec.path, kKernelSuffix));
  }

  OrtProfile profile{.path = spec.path, .spec_device = spec.device, .nodes = {}};
  std::map<std::pair<std::string, std::string>, size_t> index;
  // Per node name, the first event's node index and op type: a later event of the name with
  // another (both known) is another node of the same name, on any provider.
  std::map<std::string, std::pair<std::string, std::string>> first_seen;
  std::set<std::string> shared_names;
  for (NodeEvent& ev : node_events) {
    const bool cpu = is_cpu_provider(ev.provider);
    std::string device;
    if (!spec.device.empty() && (!cpu || !any_accelerator)) {
      device = spec.device;
    } else if (cpu) {
      device = "cpu";
    } else if (is_gpu_provider(ev.provider)) {
      device = "gpu";
    } else {
      throw ConfigError(fmt::format(
          "{}: node {} ran on {}, whose device dplace cannot tell; name it: --profile "
          "{}=DEVICE (a device kind or device name)",
          spec.path, in_quotes(ev.name),
          ev.provider.empty() ? "no provider the profile names" : in_quotes(ev.provider),
          spec.path));
    }
    auto [it, inserted] = index.emplace(std::make_pair(ev.name, device), profile.nodes.size());
    if (inserted) {
      profile.nodes.push_back(ProfiledNode{.name = ev.name,
                                           .op_type = ev.op_type,
                                           .device = device,
                                           .provider = ev.provider,
                                           .cpu_fallback = cpu && any_accelerator,
                                           .ambiguous = false,
                                           .run_times_s = {},
                                           .output0_shape = ev.output0_shape});
    }
    profile.nodes[it->second].run_times_s.push_back(ev.time_s);
    const auto [seen, first] =
        first_seen.emplace(ev.name, std::make_pair(ev.node_index, ev.op_type));
    const auto differ = [](const std::string& a, const std::string& b) {
      return !a.empty() && !b.empty() && a != b;
    };
    if (!first &&
        (differ(ev.node_index, seen->second.first) || differ(ev.op_type, seen->second.second))) {
      shared_names.insert(ev.name);
    }
  }
  for (ProfiledNode& node : profile.nodes) node.ambiguous = shared_names.count(node.name) > 0;
  return profile;
}

MeasuredGraph apply_ort_profiles(const Graph& graph, const std::vector<OrtProfile>& profiles) {
  MeasuredGraph result;
  const OpsByOnnxruntimeName ops_by_name(graph);
  std::vector<Op> ops(graph.ops().begin(), graph.ops().end());
  std::vector<ProfileTally> tallies(profiles.size());
  // (op index, device) -> the profile that timed it, to refuse two profiles timing one pair.
  std::map<std::pair<uint32_t, std::string>, const std::string*> timed_by;

  // Each profile's own nodes first, then the CPU fallback of the accelerator profiles, which only
  // fills the CPU times no profile of its own gave.
  for (const bool fallback_pass : {false, true}) {
    for (size_t p = 0; p < profiles.size(); ++p) {
      const OrtProfile& profile = profiles[p];
      ProfileTally& tally = tallies[p];
      for (const ProfiledNode& node : profile.nodes) {
        if (node.cpu_fallback != fallback_pass) continue;
        const double time_s = median_s(node.run_times_s);
        tally.total_s += time_s;
        if (node.ambiguous) {
          tally.ambiguous.push_back(node.name);
          continue;
        }
        const std::optional<OpId> id = ops_by_name.find(node.name);
        if (!id) {
          tally.unmatched.push_back(node.name);
          tally.unmatched_s += time_s;
          continue;
        }
        Op& op = ops[id->value()];
        if (!node.op_type.empty() && !op.type.empty() && node.op_type != op.type) {
          if (tally.other_type.empty()) {
            tally.first_other_type =
                fmt::format("node {}: {} in the profile, {} in the graph", in_quotes(node.name),
                            in_quotes(node.op_type), in_quotes(op.type));
          }
          tally.other_type.push_back(node.name);
          continue;
        }
        const auto [it, inserted] =
            timed_by.emplace(std::make_pair(id->value(), node.device), &profile.path);
        if (!inserted) {
          if (fallback_pass) continue;  // a CPU profile, or an earlier fallback, timed it
          throw ConfigError(fmt::format(
              "--profile: op {} is timed on {} by both {} and {}; give each device one profile",
              in_quotes(op.name), in_quotes(node.device), *it->second, profile.path));
        }
        std::erase_if(op.time_s, [&](const TimeOverride& t) { return t.device == node.device; });
        op.time_s.push_back(TimeOverride{.device = node.device, .time_s = time_s});
        tally.timed_per_device[node.device].push_back(*id);
        if (!node.cpu_fallback) tally.own_devices.insert(node.device);
        if (node.run_times_s.size() < kFewRuns) tally.few_runs.push_back(node.name);
        const std::optional<std::vector<int64_t>> ours = graph_output0_shape(op);
        if (node.output0_shape && ours && *node.output0_shape != *ours) {
          if (tally.shape_differs.empty()) {
            tally.first_shape_note =
                fmt::format("node {}: profiled {}, the graph's {}", in_quotes(node.name),
                            shape_text(*node.output0_shape), shape_text(*ours));
          }
          tally.shape_differs.push_back(node.name);
        }
        if (parse_device_kind(node.device)) {  // the graph's own times for device names
          for (const TimeOverride& t : graph.op(*id).time_s) {
            if (parse_device_kind(t.device)) continue;
            result.profiles.named_times.push_back(ProfilesOnGraph::NamedTime{
                .path = profile.path, .op = *id, .kind = node.device, .device_name = t.device});
          }
        }
      }
    }
  }

  for (size_t p = 0; p < profiles.size(); ++p) {
    const OrtProfile& profile = profiles[p];
    const ProfileTally& tally = tallies[p];
    if (tally.timed_per_device.empty() && tally.ambiguous.empty() && tally.other_type.empty()) {
      throw ConfigError(fmt::format(
          "{}: none of its {} names an op of graph {} (first: {}); profile the same model, with "
          "onnxruntime's graph optimizations off so that nodes keep their names, on providers "
          "that run node by node (TensorRT and MIGraphX replace the graph with nodes of their "
          "own)",
          profile.path, count_of(profile.nodes.size(), "profiled node"), in_quotes(graph.name()),
          quoted_names(tally.unmatched)));
    }
    if (tally.timed_per_device.empty()) {
      throw ConfigError(fmt::format(
          "{}: none of its {} times an op of graph {}: of those naming one, {} {} names that "
          "several nodes share and {} an op of another type{}",
          profile.path, count_of(profile.nodes.size(), "profiled node"), in_quotes(graph.name()),
          tally.ambiguous.size(), tally.ambiguous.size() == 1 ? "has" : "have",
          tally.other_type.size(),
          tally.other_type.empty() ? "" : " (" + tally.first_other_type + ")"));
    }
    for (const auto& [device, timed] : tally.timed_per_device) {
      std::vector<OpId> ascending = timed;
      std::sort(ascending.begin(), ascending.end());
      result.profiles.targets.push_back(ProfilesOnGraph::Target{
          .path = profile.path,
          .device = device,
          .from_spec = !profile.spec_device.empty() && device == profile.spec_device,
          .cpu_fallback = tally.own_devices.count(device) == 0,
          .ops = std::move(ascending)});
    }
    std::vector<std::string>& w = result.warnings;
    if (!tally.unmatched.empty()) {
      w.push_back(fmt::format(
          "{}: {} of its {} ({:.1f}% of their time) {} no op of graph {}: folded or aliased on "
          "import, fused by onnxruntime, inside an If, Loop or Scan, or from another model "
          "(first: {})",
          profile.path, tally.unmatched.size(), count_of(profile.nodes.size(), "profiled node"),
          tally.total_s > 0 ? 100 * tally.unmatched_s / tally.total_s : 0.0,
          tally.unmatched.size() == 1 ? "names" : "name", in_quotes(graph.name()),
          quoted_names(tally.unmatched)));
    }
    if (!tally.ambiguous.empty()) {
      w.push_back(fmt::format("{}: {} several nodes share, so their times are not used (first: {})",
                              profile.path, count_of(tally.ambiguous.size(), "name"),
                              quoted_names(tally.ambiguous)));
    }
    if (!tally.other_type.empty()) {
      w.push_back(fmt::format("{}: {} an op of another type, so {} not used ({})", profile.path,
                              tally.other_type.size() == 1
                                  ? "1 node names"
                                  : fmt::format("{} nodes name", tally.other_type.size()),
                              tally.other_type.size() == 1 ? "its time is" : "their times are",
                              tally.first_other_type));
    }
    if (!tally.shape_differs.empty()) {
      w.push_back(fmt::format(
          "{}: {} another first output shape than the graph's ({}); was the profile run at other "
          "input sizes (--dim)?",
          profile.path,
          tally.shape_differs.size() == 1
              ? "1 node has"
              : fmt::format("{} nodes have", tally.shape_differs.size()),
          tally.first_shape_note));
    }
    if (!tally.few_runs.empty()) {
      w.push_back(fmt::format(
          "{}: {} ran fewer than {} times (first: {}); onnxruntime's first run includes one-time "
          "work, which the median of three or more runs leaves out",
          profile.path, count_of(tally.few_runs.size(), "node"), kFewRuns,
          quoted_names(tally.few_runs)));
    }
  }

  std::vector<std::string> untimed;  // forward ops with work that no time_s covers
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.phase == Phase::kBackward || op.phase == Phase::kUpdate || op.type == "Input") continue;
    if (op.flops == 0 && graph.bytes_accessed(OpId(i)) == 0) continue;
    if (op.time_s.empty()) untimed.push_back(op.name);
  }
  if (!untimed.empty() && !profiles.empty()) {
    result.warnings.push_back(fmt::format(
        "--profile: {} with work {} no measured time and {} the cost model's estimates (first: "
        "{})",
        count_of(untimed.size(), "forward op"), untimed.size() == 1 ? "has" : "have",
        untimed.size() == 1 ? "keeps" : "keep", quoted_names(untimed)));
  }

  GraphBuilder builder(graph.name(), profiles.empty() ? graph.name() : profiles.front().path);
  for (Op& op : ops) builder.add_op(std::move(op));
  result.graph = std::move(builder).build();
  return result;
}

std::vector<std::string> check_profiles_on_cluster(const ProfilesOnGraph& profiles,
                                                   const Graph& graph, const Cluster& cluster) {
  for (const ProfilesOnGraph::Target& target : profiles.targets) {
    if (target.from_spec && !cluster.has_device_or_kind(target.device)) {
      throw ConfigError(
          fmt::format("--profile {}={}: cluster '{}' has no device or device kind '{}'",
                      target.path, target.device, cluster.name(), target.device));
    }
  }
  // Two profiles, one timing a kind and the other a device of that kind, both time an op there.
  for (const ProfilesOnGraph::Target& by_kind : profiles.targets) {
    const std::optional<DeviceKind> kind = parse_device_kind(by_kind.device);
    if (!kind || by_kind.cpu_fallback) continue;
    for (const ProfilesOnGraph::Target& by_name : profiles.targets) {
      const std::optional<DeviceId> device = cluster.find_device(by_name.device);
      if (!device || parse_device_kind(by_name.device) || cluster.device(*device).kind != *kind) {
        continue;
      }
      std::vector<OpId> both;
      std::set_intersection(by_kind.ops.begin(), by_kind.ops.end(), by_name.ops.begin(),
                            by_name.ops.end(), std::back_inserter(both));
      if (both.empty()) continue;
      throw ConfigError(fmt::format(
          "--profile: op '{}' is timed on '{}' by {} and on its kind '{}' by {}; give each device "
          "one profile",
          escape_control_characters(graph.op(both.front()).name), by_name.device, by_name.path,
          by_kind.device, by_kind.path));
    }
  }
  // A device name's time in the graph file wins over a profile's time for the device's kind.
  struct Shadowed {
    std::set<OpId> ops;
    const ProfilesOnGraph::NamedTime* first = nullptr;
  };
  std::map<std::string, Shadowed> shadowed;  // per profile
  for (const ProfilesOnGraph::NamedTime& named : profiles.named_times) {
    const std::optional<DeviceId> device = cluster.find_device(named.device_name);
    const std::optional<DeviceKind> kind = parse_device_kind(named.kind);
    if (!device || !kind || cluster.device(*device).kind != *kind) continue;
    Shadowed& s = shadowed[named.path];
    s.ops.insert(named.op);
    if (s.first == nullptr) s.first = &named;
  }
  std::vector<std::string> warnings;
  for (const auto& [path, s] : shadowed) {
    warnings.push_back(fmt::format(
        "{}: {} also {} times in the graph for a device of the kind it times (op '{}' on '{}'), "
        "which win over the profile's on that device",
        path, count_of(s.ops.size(), "op"), s.ops.size() == 1 ? "has" : "have",
        graph.op(s.first->op).name, s.first->device_name));
  }
  return warnings;
}

}  // namespace dplace
