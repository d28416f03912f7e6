#include "dplace/io/graph_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "dplace/core/error.h"
#include "dplace/core/files.h"

namespace dplace {

namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kKnownOpFields[] = {
    "name",        "type",       "inputs",   "output_bytes", "flops", "bytes_accessed",
    "param_bytes", "temp_bytes", "colocate", "devices",      "phase", "time_s"};

bool is_known_op_field(std::string_view key) {
  return std::find(std::begin(kKnownOpFields), std::end(kKnownOpFields), key) !=
         std::end(kKnownOpFields);
}

std::string default_graph_name(const std::string& source) {
  const std::string stem = std::filesystem::path(source).stem().string();
  return stem.empty() ? source : stem;
}

std::vector<int64_t> read_output_bytes(const Json& obj, const JsonContext& ctx) {
  if (!has_field(obj, "output_bytes")) return {0};
  const Json& value = obj.at("output_bytes");
  if (value.is_number()) return {as_bytes(value, "output_bytes", ctx)};
  if (!value.is_array()) ctx.fail("output_bytes", "expected a byte count or a list of byte counts");
  if (value.empty()) ctx.fail("output_bytes", "must list at least one output");
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (size_t k = 0; k < value.size(); ++k) {
    out.push_back(as_bytes(value[k], fmt::format("output_bytes[{}]", k), ctx));
  }
  return out;
}

std::vector<std::string> read_devices(const Json& obj, const JsonContext& ctx) {
  if (!has_field(obj, "devices")) return {};
  const Json& value = obj.at("devices");
  std::vector<std::string> out;
  auto add = [&](const Json& v) {
    if (!v.is_string() || v.get<std::string>().empty()) {
      ctx.fail("devices", "expected device kinds or names (non-empty strings)");
    }
    out.push_back(v.get<std::string>());
  };
  if (value.is_array()) {
    for (const Json& v : value) add(v);
  } else {
    add(value);
  }
  return out;
}

std::vector<TimeOverride> read_times(const Json& obj, const JsonContext& ctx) {
  if (!has_field(obj, "time_s")) return {};
  const Json& value = obj.at("time_s");
  if (!value.is_object())
    ctx.fail("time_s", "expected an object mapping device or kind to seconds");
  std::vector<TimeOverride> out;
  for (const auto& item : value.items()) {
    const std::string field = fmt::format("time_s.{}", item.key());
    if (item.key().empty()) ctx.fail("time_s", "a key is empty (expected a device name or kind)");
    if (!item.value().is_number()) ctx.fail(field, "expected a number of seconds");
    const double t = item.value().get<double>();
    if (!std::isfinite(t) || t < 0) ctx.fail(field, fmt::format("must be non-negative, got {}", t));
    out.push_back({.device = item.key(), .time_s = t});
  }
  return out;
}

// Resolves one `inputs` entry against the op names of the file.
TensorRef resolve_input(const Json& entry, const std::unordered_map<std::string, OpId>& by_name,
                        const JsonContext& ctx) {
  if (!entry.is_string())
    ctx.fail("inputs", "expected a list of producer names (\"op\" or \"op:k\")");
  const std::string text = entry.get<std::string>();
  if (auto it = by_name.find(text); it != by_name.end()) return {it->second, 0};
  const size_t colon = text.rfind(':');
  if (colon != std::string::npos && colon + 1 < text.size()) {
    const std::string_view digits = std::string_view(text).substr(colon + 1);
    uint32_t k = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (ec == std::errc() && end == digits.data() + digits.size()) {
      const std::string producer = text.substr(0, colon);
      if (auto it = by_name.find(producer); it != by_name.end()) return {it->second, k};
      throw GraphError(fmt::format("{}: {}: input '{}': no op named '{}'", ctx.source, ctx.where,
                                   text, producer));
    }
  }
  throw GraphError(
      fmt::format("{}: {}: input '{}': no op named '{}'", ctx.source, ctx.where, text, text));
}

Op read_op(const Json& obj, const std::string& name,
           const std::unordered_map<std::string, OpId>& by_name, const JsonContext& ctx) {
  Op op;
  op.name = name;
  op.type = get_string_or(obj, "type", ctx, "");
  if (has_field(obj, "inputs")) {
    const Json& inputs = obj.at("inputs");
    if (!inputs.is_array())
      ctx.fail("inputs", "expected a list of producer names (\"op\" or \"op:k\")");
    op.inputs.reserve(inputs.size());
    for (const Json& entry : inputs) op.inputs.push_back(resolve_input(entry, by_name, ctx));
  }
  op.output_bytes = read_output_bytes(obj, ctx);
  op.flops = get_nonnegative_or(obj, "flops", ctx, 0.0);
  if (has_field(obj, "bytes_accessed"))
    op.bytes_accessed = get_nonnegative(obj, "bytes_accessed", ctx);
  op.param_bytes = get_bytes_or(obj, "param_bytes", ctx, 0);
  op.temp_bytes = get_bytes_or(obj, "temp_bytes", ctx, 0);
  op.colocate = get_string_or(obj, "colocate", ctx, "");
  op.devices = read_devices(obj, ctx);
  const std::string phase = get_string_or(obj, "phase", ctx, "");
  const auto parsed_phase = parse_phase(phase);
  if (!parsed_phase) {
    ctx.fail("phase", fmt::format("unknown phase '{}' (known: forward, backward, update)", phase));
  }
  op.phase = *parsed_phase;
  op.time_s = read_times(obj, ctx);
  for (const auto& item : obj.items()) {
    if (is_known_op_field(item.key())) continue;
    if (op.extra.is_null()) op.extra = Json::object();
    op.extra[item.key()] = item.value();
  }
  return op;
}

template <typename J>
J op_to_json(const Graph& graph, OpId id) {
  const Op& op = graph.op(id);
  J j = J::object();
  j["name"] = op.name;
  if (!op.type.empty()) j["type"] = op.type;
  if (!op.inputs.empty()) {
    J inputs = J::array();
    for (const TensorRef& in : op.inputs) {
      const std::string& producer = graph.op(in.op).name;
      inputs.push_back(in.output == 0 ? producer : fmt::format("{}:{}", producer, in.output));
    }
    j["inputs"] = std::move(inputs);
  }
  if (op.output_bytes.size() == 1) {
    j["output_bytes"] = op.output_bytes[0];
  } else {
    j["output_bytes"] = op.output_bytes;
  }
  if (op.flops != 0) j["flops"] = op.flops;
  if (op.bytes_accessed) j["bytes_accessed"] = *op.bytes_accessed;
  if (op.param_bytes != 0) j["param_bytes"] = op.param_bytes;
  if (op.temp_bytes != 0) j["temp_bytes"] = op.temp_bytes;
  if (!op.colocate.empty()) j["colocate"] = op.colocate;
  if (!op.devices.empty()) j["devices"] = op.devices;
  if (op.phase != Phase::kUnspecified) j["phase"] = std::string(phase_name(op.phase));
  if (!op.time_s.empty()) {
    J times = J::object();
    for (const TimeOverride& t : op.time_s) times[t.device] = t.time_s;
    j["time_s"] = std::move(times);
  }
  if (op.extra.is_object()) {
    for (const auto& item : op.extra.items()) {
      if (j.contains(item.key())) continue;  // a known field always wins
      if constexpr (std::is_same_v<J, Json>) {
        j[item.key()] = item.value();
      } else {
        j[item.key()] = J::parse(item.value().dump());
      }
    }
  }
  return j;
}

}  // namespace

Graph read_graph_json(const Json& doc, const std::string& source) {
  const JsonContext ctx{source, ""};
  require_object(doc, ctx);
  const std::string format = get_string(doc, "format", ctx);
  if (format != kGraphFormat) {
    ctx.fail("format", fmt::format("expected \"{}\", got \"{}\"", kGraphFormat, format));
  }
  const std::string name = get_string_or(doc, "name", ctx, default_graph_name(source));
  if (name.empty())
    ctx.fail("name", "must not be empty (leave it out to name the graph after the file)");
  if (!has_field(doc, "ops")) ctx.fail("ops", "missing");
  const Json& ops = doc.at("ops");
  if (!ops.is_array()) ctx.fail("ops", "expected a list of ops");
  if (ops.empty()) ctx.fail("ops", "graph has no ops");

  // First pass: names, so that inputs may refer to ops later in the file. A duplicate keeps its
  // first index here; GraphBuilder reports it.
  std::vector<std::string> names;
  names.reserve(ops.size());
  std::unordered_map<std::string, OpId> by_name;
  by_name.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const JsonContext op_ctx = ctx.at(fmt::format("op #{}", i));
    require_object(ops[i], op_ctx);
    std::string op_name = get_string(ops[i], "name", op_ctx);
    if (op_name.empty()) op_ctx.fail("name", "must not be empty");
    by_name.emplace(op_name, OpId::from_index(i));
    names.push_back(std::move(op_name));
  }

  GraphBuilder builder(name, source);
  for (size_t i = 0; i < ops.size(); ++i) {
    const JsonContext op_ctx = ctx.at(fmt::format("op '{}'", names[i]));
    builder.add_op(read_op(ops[i], names[i], by_name, op_ctx));
  }
  return std::move(builder).build();
}

Graph read_graph_file(const std::string& path) {
  return read_graph_json(read_json_file(path), path);
}

Json graph_to_json(const Graph& graph) {
  Json doc = Json::object();
  doc["format"] = kGraphFormat;
  doc["name"] = graph.name();
  Json ops = Json::array();
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    ops.push_back(op_to_json<Json>(graph, OpId::from_index(i)));
  }
  doc["ops"] = std::move(ops);
  return doc;
}

void write_graph_file(const Graph& graph, const std::string& path) {
  std::ostringstream out;
  out << "{\n  \"format\": " << Json(kGraphFormat).dump()
      << ",\n  \"name\": " << Json(graph.name()).dump() << ",\n  \"ops\": [";
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    out << (i == 0 ? "\n    " : ",\n    ")
        << op_to_json<OrderedJson>(graph, OpId::from_index(i)).dump();
  }
  out << (graph.num_ops() == 0 ? "]\n}\n" : "\n  ]\n}\n");
  if (const std::string why = write_file_whole(path, out.view()); !why.empty()) {
    throw FormatError(fmt::format("{}: cannot write file ({})", path, why));
  }
}

}  // namespace dplace
