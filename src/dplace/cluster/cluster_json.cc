#include "dplace/cluster/cluster_json.h"

#include <fmt/format.h>

#include <filesystem>
#include <initializer_list>
#include <string_view>

#include "dplace/core/error.h"

namespace dplace {

namespace {

constexpr std::string_view kFormat = "dplace.cluster/1";

// Rejects fields this format does not define, so that a typo ("op_overhead") is not silently
// ignored and the device quietly gets the default.
void reject_unknown_fields(const Json& obj, std::initializer_list<std::string_view> known,
                           const JsonContext& ctx) {
  for (const auto& item : obj.items()) {
    bool found = false;
    for (std::string_view k : known) found = found || item.key() == k;
    if (!found) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      ctx.fail(item.key(), fmt::format("unknown field (known: {})", list));
    }
  }
}

// `source` may be a string or a list of strings (one citation each), joined with "; ".
std::string read_source(const Json& doc, const JsonContext& ctx) {
  if (!has_field(doc, "source")) return "";
  const Json& value = doc.at("source");
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) ctx.fail("source", "expected a string or a list of strings");
  std::string joined;
  for (const Json& part : value) {
    if (!part.is_string()) ctx.fail("source", "expected a string or a list of strings");
    if (!joined.empty()) joined += "; ";
    joined += part.get<std::string>();
  }
  return joined;
}

Link read_link_figures(const Json& obj, const JsonContext& ctx) {
  Link link;
  // Ranges (positive bandwidth, non-negative latency) are checked by Cluster with the same wording.
  link.bandwidth_bytes_per_s = get_number(obj, "bandwidth_bytes_per_s", ctx);
  link.latency_s = has_field(obj, "latency_s") ? get_number(obj, "latency_s", ctx) : 0.0;
  return link;
}

Device read_device(const Json& obj, size_t index, const JsonContext& file_ctx) {
  const JsonContext item_ctx = file_ctx.at(fmt::format("device #{}", index));
  require_object(obj, item_ctx);
  Device d;
  d.name = get_string(obj, "name", item_ctx);
  const JsonContext ctx = file_ctx.at(fmt::format("device '{}'", d.name));
  reject_unknown_fields(obj,
                        {"name", "kind", "peak_flops", "mem_bandwidth_bytes_per_s", "memory_bytes",
                         "op_overhead_s", "efficiency", "description"},
                        ctx);
  const std::string kind = get_string(obj, "kind", ctx);
  const auto parsed = parse_device_kind(kind);
  if (!parsed)
    ctx.fail("kind", fmt::format("unknown device kind '{}' (known: cpu, gpu, accel)", kind));
  d.kind = *parsed;
  d.peak_flops = get_number(obj, "peak_flops", ctx);
  d.mem_bandwidth_bytes_per_s = get_number(obj, "mem_bandwidth_bytes_per_s", ctx);
  d.memory_bytes = get_bytes(obj, "memory_bytes", ctx);
  d.op_overhead_s = has_field(obj, "op_overhead_s") ? get_number(obj, "op_overhead_s", ctx) : 0.0;
  if (has_field(obj, "efficiency")) {
    const Json& eff = obj.at("efficiency");
    if (!eff.is_object())
      ctx.fail("efficiency", "expected an object mapping op type to a fraction");
    for (const auto& item : eff.items()) {
      if (!item.value().is_number()) {
        ctx.fail(fmt::format("efficiency.{}", item.key()), "expected a number");
      }
      d.efficiency.emplace_back(item.key(), item.value().get<double>());
    }
  }
  d.description = get_string_or(obj, "description", ctx, "");
  return d;
}

LinkSpec read_link(const Json& obj, size_t index, const JsonContext& file_ctx) {
  const JsonContext item_ctx = file_ctx.at(fmt::format("link #{}", index));
  require_object(obj, item_ctx);
  LinkSpec spec;
  spec.from = get_string(obj, "from", item_ctx);
  spec.to = get_string(obj, "to", item_ctx);
  const JsonContext ctx = file_ctx.at(fmt::format("link '{}' -> '{}'", spec.from, spec.to));
  reject_unknown_fields(obj, {"from", "to", "bandwidth_bytes_per_s", "latency_s", "directed"}, ctx);
  spec.link = read_link_figures(obj, ctx);
  spec.directed = get_bool_or(obj, "directed", ctx, false);
  return spec;
}

// "dir/paper-k80x2.json" -> "paper-k80x2"; a preset origin "preset X" stays as it is.
std::string default_name(const std::string& source) {
  const std::string stem = std::filesystem::path(source).stem().string();
  return stem.empty() ? source : stem;
}

}  // namespace

Cluster parse_cluster_json(const Json& doc, const std::string& source) {
  const JsonContext ctx{source, ""};
  require_object(doc, ctx);
  const std::string format = get_string(doc, "format", ctx);
  if (format != kFormat) {
    ctx.fail("format", fmt::format("expected \"{}\", got \"{}\"", kFormat, format));
  }
  reject_unknown_fields(doc, {"format", "name", "source", "devices", "links", "default_link"}, ctx);

  ClusterSpec spec;
  spec.name = get_string_or(doc, "name", ctx, default_name(source));
  if (spec.name.empty()) {
    ctx.fail("name", "must not be empty (leave it out to name the cluster after the file)");
  }
  spec.source = read_source(doc, ctx);

  if (!has_field(doc, "devices"))
    ctx.fail("devices", "missing (a cluster needs at least one device)");
  const Json& devices = doc.at("devices");
  if (!devices.is_array()) ctx.fail("devices", "expected a list of devices");
  for (size_t i = 0; i < devices.size(); ++i) {
    spec.devices.push_back(read_device(devices[i], i, ctx));
  }

  if (has_field(doc, "links")) {
    const Json& links = doc.at("links");
    if (!links.is_array()) ctx.fail("links", "expected a list of links");
    for (size_t i = 0; i < links.size(); ++i) spec.links.push_back(read_link(links[i], i, ctx));
  }
  if (has_field(doc, "default_link")) {
    const Json& dl = doc.at("default_link");
    const JsonContext dl_ctx = ctx.at("default_link");
    require_object(dl, dl_ctx);
    reject_unknown_fields(dl, {"bandwidth_bytes_per_s", "latency_s"}, dl_ctx);
    spec.default_link = read_link_figures(dl, dl_ctx);
  }
  // Semantic checks (no devices, duplicates, ranges, unknown link ends) throw ConfigError.
  return Cluster(std::move(spec), source);
}

Cluster read_cluster_file(const std::string& path) {
  return parse_cluster_json(read_json_file(path), path);
}

Json cluster_to_json(const Cluster& cluster) {
  const ClusterSpec& spec = cluster.spec();
  Json doc = Json::object();
  doc["format"] = kFormat;
  doc["name"] = spec.name;
  if (!spec.source.empty()) doc["source"] = spec.source;
  Json devices = Json::array();
  for (const Device& d : spec.devices) {
    Json jd = Json::object();
    jd["name"] = d.name;
    jd["kind"] = device_kind_name(d.kind);
    jd["peak_flops"] = d.peak_flops;
    jd["mem_bandwidth_bytes_per_s"] = d.mem_bandwidth_bytes_per_s;
    jd["memory_bytes"] = d.memory_bytes;
    jd["op_overhead_s"] = d.op_overhead_s;
    if (!d.efficiency.empty()) {
      Json eff = Json::object();
      for (const auto& [type, value] : d.efficiency) eff[type] = value;
      jd["efficiency"] = std::move(eff);
    }
    if (!d.description.empty()) jd["description"] = d.description;
    devices.push_back(std::move(jd));
  }
  doc["devices"] = std::move(devices);
  Json links = Json::array();
  for (const LinkSpec& l : spec.links) {
    Json jl = Json::object();
    jl["from"] = l.from;
    jl["to"] = l.to;
    jl["bandwidth_bytes_per_s"] = l.link.bandwidth_bytes_per_s;
    jl["latency_s"] = l.link.latency_s;
    if (l.directed) jl["directed"] = true;
    links.push_back(std::move(jl));
  }
  doc["links"] = std::move(links);
  if (spec.default_link) {
    doc["default_link"] = Json{{"bandwidth_bytes_per_s", spec.default_link->bandwidth_bytes_per_s},
                               {"latency_s", spec.default_link->latency_s}};
  }
  return doc;
}

}  // namespace dplace
