#include "dplace/io/ort_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "dplace/core/error.h"
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
  std::string provider;
  double seconds = 0;
  std::optional<std::vector<int64_t>> output0_shape;
};

// onnxruntime writes each output as {"<type>": [dims]}; anything else reads as unknown.
std::optional<std::vector<int64_t>> first_output_shape(const Json& args) {
  const auto it = args.find("output_type_shape");
  if (it == args.end() || !it->is_array() || it->empty()) return std::nullopt;
  const Json& first = it->front();
  if (!first.is_object() || first.size() != 1 || !first.begin()->is_array()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const Json& d : *first.begin()) {
    if (!d.is_number_integer()) return std::nullopt;
    dims.push_back(d.get<int64_t>());
  }
  return dims;
}

std::string shape_text(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

std::string quoted_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kNamesShown; ++i) {
    out += (i == 0 ? "'" : ", '") + names[i] + "'";
  }
  if (names.size() > kNamesShown) out += ", ...";
  return out;
}

// The graph's first output shape of `op`, from the ONNX importer's `output_shapes`.
std::optional<std::vector<int64_t>> graph_output0_shape(const Op& op) {
  if (!op.extra.is_object()) return std::nullopt;
  const auto it = op.extra.find("output_shapes");
  if (it == op.extra.end() || !it->is_array() || it->empty() || !it->front().is_array()) {
    return std::nullopt;
  }
  std::vector<int64_t> dims;
  for (const Json& d : it->front()) {
    if (!d.is_number_integer()) return std::nullopt;
    dims.push_back(d.get<int64_t>());
  }
  return dims;
}

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
  return spec;
}

double median_seconds(std::vector<double> run_seconds) {
  const size_t n = run_seconds.size();
  std::sort(run_seconds.begin(), run_seconds.end());
  return n % 2 == 1 ? run_seconds[n / 2] : (run_seconds[n / 2 - 1] + run_seconds[n / 2]) / 2;
}

OrtProfile read_ort_profile(const ProfileSpec& spec) {
  const Json doc = read_json_file(spec.path);
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
    const JsonContext at_event{spec.path, fmt::format("event {}", i)};
    require_object(ev, at_event);
    const auto cat = ev.find("cat");
    const auto name = ev.find("name");
    if (cat == ev.end() || !cat->is_string() || *cat != "Node") continue;
    if (name == ev.end() || !name->is_string()) at_event.fail("name", "expected a string");
    const std::string& full = name->get_ref<const std::string&>();
    if (full.size() <= kKernelSuffix.size() || !full.ends_with(kKernelSuffix)) continue;

    const JsonContext ctx{spec.path, fmt::format("event {} ('{}')", i, full)};
    const double micros = get_nonnegative(ev, "dur", ctx);
    if (micros / kMicrosecondsPerSecond > kMaxOpSeconds) {
      ctx.fail("dur", fmt::format("{:g} microseconds is more than {:g} s", micros, kMaxOpSeconds));
    }
    NodeEvent node{.name = full.substr(0, full.size() - kKernelSuffix.size()),
                   .provider = "",
                   .seconds = micros / kMicrosecondsPerSecond,
                   .output0_shape = std::nullopt};
    if (const auto args = ev.find("args"); args != ev.end() && args->is_object()) {
      node.provider = get_string_or(*args, "provider", ctx.at("args"), "");
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
  for (NodeEvent& ev : node_events) {
    std::string device;
    if (!spec.device.empty() && (!is_cpu_provider(ev.provider) || !any_accelerator)) {
      device = spec.device;
    } else if (is_cpu_provider(ev.provider)) {
      device = "cpu";
    } else if (is_gpu_provider(ev.provider)) {
      device = "gpu";
    } else {
      throw ConfigError(fmt::format(
          "{}: node '{}' ran on {}, whose device dplace cannot tell; name it: --profile "
          "{}=DEVICE (a device kind or device name)",
          spec.path, ev.name,
          ev.provider.empty() ? "no provider the profile names" : "'" + ev.provider + "'",
          spec.path));
    }
    auto [it, inserted] = index.emplace(std::make_pair(ev.name, device), profile.nodes.size());
    if (inserted) {
      profile.nodes.push_back(ProfiledNode{.name = ev.name,
                                           .device = device,
                                           .provider = ev.provider,
                                           .run_seconds = {},
                                           .output0_shape = ev.output0_shape});
    }
    profile.nodes[it->second].run_seconds.push_back(ev.seconds);
  }
  return profile;
}

MeasuredGraph apply_ort_profiles(const Graph& graph, const std::vector<OrtProfile>& profiles) {
  MeasuredGraph result;
  std::vector<Op> ops(graph.ops().begin(), graph.ops().end());
  // (op index, device) -> the profile that timed it, to refuse two profiles timing one pair.
  std::map<std::pair<uint32_t, std::string>, const std::string*> timed_by;

  for (const OrtProfile& profile : profiles) {
    std::vector<std::string> unmatched;
    double unmatched_s = 0, total_s = 0;
    std::vector<std::string> few_runs;
    std::vector<std::string> shape_differs;
    std::string first_shape_note;
    std::map<std::string, size_t> timed_per_device;
    std::set<uint32_t> timed_ops;

    for (const ProfiledNode& node : profile.nodes) {
      const double seconds = median_seconds(node.run_seconds);
      total_s += seconds;
      const std::optional<OpId> id = graph.find_op(node.name);
      if (!id) {
        unmatched.push_back(node.name);
        unmatched_s += seconds;
        continue;
      }
      const auto [it, inserted] =
          timed_by.emplace(std::make_pair(id->value(), node.device), &profile.path);
      if (!inserted) {
        throw ConfigError(fmt::format(
            "--profile: op '{}' is timed on '{}' by both {} and {}; give each device one profile",
            node.name, node.device, *it->second, profile.path));
      }
      Op& op = ops[id->value()];
      const auto same_device = [&](const TimeOverride& t) { return t.device == node.device; };
      std::erase_if(op.time_s, same_device);
      op.time_s.push_back(TimeOverride{.device = node.device, .time_s = seconds});
      ++timed_per_device[node.device];
      timed_ops.insert(id->value());
      if (node.run_seconds.size() < kFewRuns) few_runs.push_back(node.name);
      const std::optional<std::vector<int64_t>> ours = graph_output0_shape(op);
      if (node.output0_shape && ours && *node.output0_shape != *ours) {
        if (shape_differs.empty()) {
          first_shape_note = fmt::format("node '{}': profiled {}, the graph's {}", node.name,
                                         shape_text(*node.output0_shape), shape_text(*ours));
        }
        shape_differs.push_back(node.name);
      }
    }

    if (timed_per_device.empty()) {
      throw ConfigError(fmt::format(
          "{}: none of its {} profiled nodes is an op of graph '{}' (first: {}); profile the "
          "same model, with onnxruntime's graph optimizations off so that nodes keep their names",
          profile.path, profile.nodes.size(), graph.name(), quoted_names(unmatched)));
    }
    for (const auto& [device, count] : timed_per_device) {
      result.targets.push_back(MeasuredGraph::Target{
          .path = profile.path,
          .device = device,
          .from_spec = !profile.spec_device.empty() && device == profile.spec_device});
    }
    std::vector<std::string> untimed;
    for (uint32_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.phase == Phase::kBackward || op.phase == Phase::kUpdate || op.type == "Input") {
        continue;
      }
      if (op.flops == 0 && graph.bytes_accessed(OpId(i)) == 0) continue;
      if (timed_ops.count(i) == 0) untimed.push_back(op.name);
    }

    if (!unmatched.empty()) {
      result.warnings.push_back(fmt::format(
          "{}: {} of its {} profiled nodes ({:.1f}% of their time) are no op of graph '{}': "
          "folded or aliased on import, fused by onnxruntime, or from another model (first: {})",
          profile.path, unmatched.size(), profile.nodes.size(),
          total_s > 0 ? 100 * unmatched_s / total_s : 0.0, graph.name(), quoted_names(unmatched)));
    }
    if (!untimed.empty()) {
      result.warnings.push_back(fmt::format(
          "{}: {} forward ops with work have no time in it and keep the cost model's estimates "
          "(first: {})",
          profile.path, untimed.size(), quoted_names(untimed)));
    }
    if (!shape_differs.empty()) {
      result.warnings.push_back(fmt::format(
          "{}: {} nodes' first output has another shape than the graph's ({}); was the profile "
          "run at other input sizes (--dim)?",
          profile.path, shape_differs.size(), first_shape_note));
    }
    if (!few_runs.empty()) {
      result.warnings.push_back(fmt::format(
          "{}: {} nodes ran fewer than {} times (first: {}); onnxruntime's first run includes "
          "one-time work, which the median of three or more runs leaves out",
          profile.path, few_runs.size(), kFewRuns, quoted_names(few_runs)));
    }
  }

  GraphBuilder builder(graph.name(), profiles.empty() ? graph.name() : profiles.front().path);
  for (Op& op : ops) builder.add_op(std::move(op));
  result.graph = std::move(builder).build();
  return result;
}

}  // namespace dplace
