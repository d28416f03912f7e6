#include "dplace/io/placement_json.h"

#include <fmt/format.h>

#include <sstream>

#include "dplace/core/error.h"
#include "dplace/core/files.h"

namespace dplace {

namespace {

void check_placement_shape(const Graph& graph, const Cluster& cluster, const Placement& placement) {
  DPLACE_CHECK(placement.device_of_op.size() == graph.num_ops())
      << "placement has " << placement.device_of_op.size() << " entries for " << graph.num_ops()
      << " ops";
  for (DeviceId d : placement.device_of_op) {
    DPLACE_CHECK(d.valid() && d.value() < cluster.num_devices()) << "bad device id " << d.value();
  }
}

std::string device_list(const Cluster& cluster) {
  std::string list;
  for (const Device& d : cluster.devices()) list += (list.empty() ? "" : ", ") + d.name;
  return list;
}

}  // namespace

Placement read_placement_json(const Json& doc, const std::string& source, const Graph& graph,
                              const Cluster& cluster, std::vector<std::string>* warnings) {
  const JsonContext ctx{source, ""};
  require_object(doc, ctx);
  const std::string format = get_string(doc, "format", ctx);
  if (format != kPlacementFormat) {
    ctx.fail("format", fmt::format("expected \"{}\", got \"{}\"", kPlacementFormat, format));
  }
  // Informational; only their type is checked, and a name that differs is a warning.
  const std::string made_for_graph = get_string_or(doc, "graph", ctx, "");
  const std::string made_for_cluster = get_string_or(doc, "cluster", ctx, "");
  if (warnings != nullptr) {
    if (!made_for_graph.empty() && made_for_graph != graph.name()) {
      warnings->push_back(fmt::format("{}: made for graph '{}', read with graph '{}'", source,
                                      made_for_graph, graph.name()));
    }
    if (!made_for_cluster.empty() && made_for_cluster != cluster.name()) {
      warnings->push_back(fmt::format("{}: made for cluster '{}', read with cluster '{}'", source,
                                      made_for_cluster, cluster.name()));
    }
  }
  if (!has_field(doc, "assignment")) ctx.fail("assignment", "missing");
  const Json& assignment = doc.at("assignment");
  if (!assignment.is_object()) {
    ctx.fail("assignment", "expected an object mapping op name to device name");
  }

  const JsonContext actx = ctx.at("assignment");
  Placement placement;
  placement.device_of_op.assign(graph.num_ops(), DeviceId::invalid());
  for (const auto& item : assignment.items()) {
    const auto op = graph.find_op(item.key());
    if (!op) {
      actx.fail(fmt::format("unknown op '{}' (not in graph '{}')", item.key(), graph.name()));
    }
    const JsonContext op_ctx = actx.at(fmt::format("op '{}'", item.key()));
    if (!item.value().is_string()) op_ctx.fail("expected a device name");
    const std::string device = item.value().get<std::string>();
    const auto id = cluster.find_device(device);
    if (!id) {
      op_ctx.fail(fmt::format("unknown device '{}' (devices of cluster '{}': {})", device,
                              cluster.name(), device_list(cluster)));
    }
    placement.device_of_op[op->value()] = *id;
  }

  size_t missing = 0;
  const Op* first_missing = nullptr;
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    if (placement.device_of_op[i].valid()) continue;
    if (missing++ == 0) first_missing = &graph.op(OpId::from_index(i));
  }
  if (missing == 1) actx.fail(fmt::format("op '{}' has no device", first_missing->name));
  if (missing > 1) {
    actx.fail(fmt::format("op '{}' and {} more of the {} ops have no device", first_missing->name,
                          missing - 1, graph.num_ops()));
  }
  return placement;
}

Placement read_placement_file(const std::string& path, const Graph& graph, const Cluster& cluster,
                              std::vector<std::string>* warnings) {
  return read_placement_json(read_json_file(path), path, graph, cluster, warnings);
}

Json placement_to_json(const Graph& graph, const Cluster& cluster, const Placement& placement) {
  check_placement_shape(graph, cluster, placement);
  Json assignment = Json::object();
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    assignment[graph.op(OpId::from_index(i)).name] = cluster.device(placement.device_of_op[i]).name;
  }
  return Json{{"format", kPlacementFormat},
              {"graph", graph.name()},
              {"cluster", cluster.name()},
              {"assignment", std::move(assignment)}};
}

void write_placement_file(const Graph& graph, const Cluster& cluster, const Placement& placement,
                          const std::string& path) {
  check_placement_shape(graph, cluster, placement);
  std::ostringstream out;
  out << "{\n  \"format\": " << Json(kPlacementFormat).dump()
      << ",\n  \"graph\": " << Json(graph.name()).dump()
      << ",\n  \"cluster\": " << Json(cluster.name()).dump() << ",\n  \"assignment\": {";
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    out << (i == 0 ? "\n    " : ",\n    ") << Json(graph.op(OpId::from_index(i)).name).dump()
        << ": " << Json(cluster.device(placement.device_of_op[i]).name).dump();
  }
  out << (graph.num_ops() == 0 ? "}\n}\n" : "\n  }\n}\n");
  if (const std::string why = write_file_whole(path, out.view()); !why.empty()) {
    throw FormatError(fmt::format("{}: cannot write file ({})", path, why));
  }
}

}  // namespace dplace
