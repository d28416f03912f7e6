#include "dplace/io/dnn_partitioning.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "dplace/core/error.h"

namespace dplace {

namespace {

// Nominal compute figures of the implied devices: never used, because every op of a
// dnn-partitioning graph carries measured times for every device kind.
constexpr double kNominalPeakFlops = 1e12;
constexpr double kNominalMemBandwidth = 1e11;
// "Uncapped" CPU memory (the paper puts no memory limit on CPU cores): 1 PiB.
constexpr int64_t kUncappedMemoryBytes = int64_t{1} << 50;
// Bandwidth of a link that costs nothing in the paper's model (cpu <-> cpu, or a file whose
// edges all cost 0).
constexpr double kFreeLinkBandwidth = 1e18;

// A boolean written as true/false or 0/1.
bool get_flag(const Json& obj, std::string_view field, const JsonContext& ctx) {
  if (!has_field(obj, field)) ctx.fail(field, "missing");
  return get_bool_or(obj, field, ctx, false);
}

// An integer id (written as an integer, or a float with an integral value).
int64_t get_id(const Json& obj, std::string_view field, const JsonContext& ctx) {
  const double x = get_number(obj, field, ctx);
  if (std::trunc(x) != x || std::fabs(x) > 9.0e15) ctx.fail(field, "expected an integer id");
  const Json& value = obj.at(std::string(field));
  return value.is_number_integer() ? value.get<int64_t>() : static_cast<int64_t>(x);
}

// A size in bytes; may be fractional (the published files use averages), at most 9e18 so that it
// converts to a byte count.
double get_size(const Json& obj, std::string_view field, const JsonContext& ctx) {
  const double x = get_nonnegative(obj, field, ctx);
  if (x > 9.0e18) ctx.fail(field, fmt::format("byte count {} is too large", x));
  return x;
}

int get_count(const Json& obj, std::string_view field, const JsonContext& ctx) {
  const double x = get_nonnegative(obj, field, ctx);
  if (std::trunc(x) != x || x > 1e6) ctx.fail(field, "expected a small non-negative integer");
  return static_cast<int>(x);
}

}  // namespace

bool is_dnn_partitioning_json(const Json& value) {
  return value.is_object() && !value.contains("format") && value.contains("nodes") &&
         value.contains("edges") && value.contains("maxFPGAs");
}

DnnPartitioningFile parse_dnn_partitioning(const Json& value, const std::string& source) {
  const JsonContext top{source, ""};
  require_object(value, top);
  DnnPartitioningFile file;
  file.source = source;
  file.max_size_per_accel_bytes = get_size(value, "maxSizePerFPGA", top);
  file.max_accels = get_count(value, "maxFPGAs", top);
  file.max_cpus = get_count(value, "maxCPUs", top);
  if (file.max_accels + file.max_cpus == 0) {
    top.fail("maxFPGAs", "maxFPGAs and maxCPUs are both 0: no device to place on");
  }
  // Accelerators hold whole bytes; one that could hold none would take no node of any size.
  if (file.max_accels > 0 && file.max_size_per_accel_bytes < 1) {
    top.fail("maxSizePerFPGA", fmt::format("{} bytes is less than one byte per accelerator (set "
                                           "maxFPGAs to 0 for a CPU-only instance)",
                                           file.max_size_per_accel_bytes));
  }
  if (size_t(file.max_accels) + size_t(file.max_cpus) > kMaxDevices) {
    top.fail("maxFPGAs", fmt::format("maxFPGAs + maxCPUs = {} devices, more than the limit of {}",
                                     file.max_accels + file.max_cpus, kMaxDevices));
  }

  const Json* nodes = value.contains("nodes") ? &value.at("nodes") : nullptr;
  if (nodes == nullptr || !nodes->is_array()) top.fail("nodes", "expected an array");
  const Json* edges = value.contains("edges") ? &value.at("edges") : nullptr;
  if (edges == nullptr || !edges->is_array()) top.fail("edges", "expected an array");

  std::unordered_map<int64_t, size_t> index_of_id;
  file.nodes.reserve(nodes->size());
  for (size_t i = 0; i < nodes->size(); ++i) {
    const Json& n = (*nodes)[i];
    JsonContext ctx = top.at(fmt::format("node #{}", i));
    require_object(n, ctx);
    DnnPartitioningNode node;
    node.id = get_id(n, "id", ctx);
    ctx = top.at(fmt::format("node {}", node.id));
    node.name = get_string_or(n, "name", ctx, "");
    node.supported_on_accel = get_flag(n, "supportedOnFpga", ctx);
    node.cpu_latency = get_nonnegative(n, "cpuLatency", ctx);
    node.accel_latency = get_nonnegative(n, "fpgaLatency", ctx);
    node.is_backward = get_flag(n, "isBackwardNode", ctx);
    if (has_field(n, "colorClass")) node.color_class = get_id(n, "colorClass", ctx);
    node.size_bytes = has_field(n, "size") ? get_size(n, "size", ctx) : 0.0;
    if (has_field(n, "layerId")) node.layer_id = get_id(n, "layerId", ctx);
    if (!index_of_id.emplace(node.id, i).second) ctx.fail("id", "duplicate node id");
    file.nodes.push_back(std::move(node));
  }

  // Outgoing cost per source node, which the paper defines per tensor.
  std::unordered_map<int64_t, double> cost_of_source;
  file.edges.reserve(edges->size());
  for (size_t i = 0; i < edges->size(); ++i) {
    const Json& e = (*edges)[i];
    JsonContext ctx = top.at(fmt::format("edge #{}", i));
    require_object(e, ctx);
    DnnPartitioningEdge edge;
    edge.source_id = get_id(e, "sourceId", ctx);
    edge.dest_id = get_id(e, "destId", ctx);
    ctx = top.at(fmt::format("edge #{} ({} -> {})", i, edge.source_id, edge.dest_id));
    edge.cost = get_nonnegative(e, "cost", ctx);
    if (has_field(e, "size")) edge.size_bytes = get_size(e, "size", ctx);
    if (!index_of_id.contains(edge.source_id)) {
      ctx.fail("sourceId", fmt::format("no node with id {}", edge.source_id));
    }
    if (!index_of_id.contains(edge.dest_id)) {
      ctx.fail("destId", fmt::format("no node with id {}", edge.dest_id));
    }
    if (edge.source_id == edge.dest_id) ctx.fail("destId", "an edge from a node to itself");
    auto [it, inserted] = cost_of_source.emplace(edge.source_id, edge.cost);
    if (!inserted && std::fabs(it->second - edge.cost) > 1e-9 * std::max(1.0, edge.cost)) {
      ctx.fail("cost", fmt::format("node {} has out-edges with different costs ({} and {}); the "
                                   "cost belongs to the node's output tensor",
                                   edge.source_id, it->second, edge.cost));
    }
    file.edges.push_back(edge);
  }
  return file;
}

DnnPartitioningFile read_dnn_partitioning_raw(const std::string& path) {
  const Json value = read_json_file(path);
  if (!is_dnn_partitioning_json(value)) {
    const JsonContext top{path, ""};
    require_object(value, top);
    for (const char* field : {"maxFPGAs", "nodes", "edges"}) {
      if (!value.contains(field)) top.fail(field, "missing");
    }
    top.fail("format", "a dnn-partitioning file has no 'format' field");
  }
  return parse_dnn_partitioning(value, path);
}

LoadedGraph dnn_partitioning_to_graph(const DnnPartitioningFile& file) {
  const std::string stem = std::filesystem::path(file.source).stem().string();
  LoadedGraph loaded;
  loaded.format = "dnn-partitioning";

  // Op names: the node's name when present and unique, else "node<id>" (made unique).
  std::unordered_map<std::string, int> name_count;
  for (const DnnPartitioningNode& n : file.nodes) {
    if (!n.name.empty()) ++name_count[n.name];
  }
  std::unordered_set<std::string> taken;
  std::vector<std::string> op_names(file.nodes.size());
  for (size_t i = 0; i < file.nodes.size(); ++i) {
    const std::string& name = file.nodes[i].name;
    if (!name.empty() && name_count[name] == 1) {
      op_names[i] = name;
      taken.insert(name);
    }
  }
  for (size_t i = 0; i < file.nodes.size(); ++i) {
    if (!op_names[i].empty()) continue;
    std::string name = fmt::format("node{}", file.nodes[i].id);
    for (int k = 2; taken.contains(name); ++k) name = fmt::format("node{}#{}", file.nodes[i].id, k);
    taken.insert(name);
    op_names[i] = name;
  }

  std::unordered_map<int64_t, uint32_t> op_of_id;
  for (size_t i = 0; i < file.nodes.size(); ++i) {
    op_of_id.emplace(file.nodes[i].id, static_cast<uint32_t>(i));
  }
  std::vector<double> out_bytes(file.nodes.size(), 0.0);
  std::vector<std::optional<double>> out_cost(file.nodes.size());
  std::vector<std::vector<uint32_t>> inputs(file.nodes.size());
  size_t sizes_disagree = 0;
  std::vector<uint8_t> seen_size(file.nodes.size(), 0);
  for (const DnnPartitioningEdge& e : file.edges) {
    const uint32_t src = op_of_id.at(e.source_id);
    const uint32_t dst = op_of_id.at(e.dest_id);
    inputs[dst].push_back(src);
    out_cost[src] = e.cost;
    if (e.size_bytes) {
      if (seen_size[src] && *e.size_bytes != out_bytes[src]) ++sizes_disagree;
      seen_size[src] = 1;
      out_bytes[src] = std::max(out_bytes[src], *e.size_bytes);
    }
  }
  if (sizes_disagree > 0) {
    loaded.warnings.push_back(fmt::format(
        "{}: {} out-edges give their source a different size than a sibling edge; each op keeps "
        "the largest as its output size",
        file.source, sizes_disagree));
  }

  GraphBuilder builder(stem, file.source);
  size_t fractional_sizes = 0;
  for (size_t i = 0; i < file.nodes.size(); ++i) {
    const DnnPartitioningNode& n = file.nodes[i];
    Op op;
    op.name = op_names[i];
    for (uint32_t src : inputs[i]) op.inputs.push_back(TensorRef{OpId(src), 0});
    op.output_bytes = {static_cast<int64_t>(std::llround(out_bytes[i]))};
    // Rounded up (the cap down, below): a split never holds more than the file's cap.
    op.param_bytes = static_cast<int64_t>(std::ceil(n.size_bytes));
    fractional_sizes += n.size_bytes != std::ceil(n.size_bytes) ? 1 : 0;
    if (!n.supported_on_accel) op.devices = {"cpu"};
    if (n.color_class) op.colocate = fmt::format("cc{}", *n.color_class);
    op.phase = n.is_backward ? Phase::kBackward : Phase::kForward;
    const double accel_s = n.accel_latency * kDnnPartitioningSecondsPerUnit;
    op.time_s = {{"accel", accel_s},
                 {"gpu", accel_s},
                 {"cpu", n.cpu_latency * kDnnPartitioningSecondsPerUnit}};
    op.extra = Json::object();
    op.extra["dnn_id"] = n.id;
    if (out_cost[i]) op.extra["comm_cost_s"] = *out_cost[i] * kDnnPartitioningSecondsPerUnit;
    if (n.layer_id) op.extra["layer_id"] = *n.layer_id;
    builder.add_op(std::move(op));
  }
  loaded.graph = std::move(builder).build();
  const bool fractional_cap =
      file.max_size_per_accel_bytes != std::floor(file.max_size_per_accel_bytes);
  if (fractional_sizes > 0 || fractional_cap) {
    std::string what = fractional_sizes > 0 ? fmt::format("{} node sizes", fractional_sizes) : "";
    if (fractional_cap)
      what += what.empty() ? "maxSizePerFPGA is" : " and maxSizePerFPGA are";
    else
      what += " are";
    loaded.warnings.push_back(fmt::format(
        "{}: {} not whole bytes: sizes are rounded up and the cap down, so a split never exceeds "
        "the file's cap (one within a byte per node of it is refused)",
        file.source, what));
  }

  // The implied cluster.
  double total_bytes = 0;
  double total_cost = 0;
  for (const DnnPartitioningEdge& e : file.edges) {
    if (e.cost > 0 && e.size_bytes && *e.size_bytes > 0) {
      total_bytes += *e.size_bytes;
      total_cost += e.cost * kDnnPartitioningSecondsPerUnit;
    }
  }
  const double host_bandwidth = total_cost > 0 ? total_bytes / total_cost : kFreeLinkBandwidth;

  ClusterSpec spec;
  spec.name = stem + "-implied";
  spec.source = fmt::format(
      "{}: maxFPGAs={}, maxCPUs={}, maxSizePerFPGA={} bytes; accelerator<->CPU bandwidth "
      "sum(edge size)/sum(edge cost) of the file",
      file.source, file.max_accels, file.max_cpus, file.max_size_per_accel_bytes);
  const int64_t accel_memory = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(std::min(file.max_size_per_accel_bytes, 9.0e18))));
  // (At least one byte: maxSizePerFPGA below 1 is refused above unless there is no accelerator.)
  for (int i = 0; i < file.max_accels; ++i) {
    Device d;
    d.name = fmt::format("/accel:{}", i);
    d.kind = DeviceKind::kAccel;
    d.peak_flops = kNominalPeakFlops;
    d.mem_bandwidth_bytes_per_s = kNominalMemBandwidth;
    d.memory_bytes = accel_memory;
    d.description = "accelerator implied by a dnn-partitioning file (times come from the file)";
    spec.devices.push_back(std::move(d));
  }
  for (int i = 0; i < file.max_cpus; ++i) {
    Device d;
    d.name = fmt::format("/cpu:{}", i);
    d.kind = DeviceKind::kCpu;
    d.peak_flops = kNominalPeakFlops;
    d.mem_bandwidth_bytes_per_s = kNominalMemBandwidth;
    d.memory_bytes = kUncappedMemoryBytes;
    d.description = "CPU core implied by a dnn-partitioning file (times come from the file)";
    spec.devices.push_back(std::move(d));
  }
  for (size_t a = 0; a < spec.devices.size(); ++a) {
    for (size_t b = a + 1; b < spec.devices.size(); ++b) {
      const bool a_cpu = spec.devices[a].kind == DeviceKind::kCpu;
      const bool b_cpu = spec.devices[b].kind == DeviceKind::kCpu;
      double bandwidth = host_bandwidth;
      if (a_cpu && b_cpu) bandwidth = kFreeLinkBandwidth;
      if (!a_cpu && !b_cpu) bandwidth = host_bandwidth / 2;
      spec.links.push_back(LinkSpec{spec.devices[a].name, spec.devices[b].name,
                                    Link{bandwidth, 0.0}, /*directed=*/false});
    }
  }
  loaded.implied_cluster = Cluster(std::move(spec), file.source);
  return loaded;
}

LoadedGraph read_dnn_partitioning_file(const std::string& path, const ImportOptions& options) {
  // The file fixes the phases (isBackwardNode) and the measured times: there is nothing for
  // --training or --inference to choose, and no symbolic dimension for --dim to set.
  if (options.training) {
    throw ConfigError(fmt::format(
        "{}: --training/--inference do not apply to a dnn-partitioning workload, which is read "
        "as written (its isBackwardNode fields give the phases)",
        path));
  }
  LoadedGraph loaded = dnn_partitioning_to_graph(read_dnn_partitioning_raw(path));
  if (!options.dims.empty()) {
    loaded.warnings.push_back(path + ": --dim has no effect on a dnn-partitioning workload");
  }
  return loaded;
}

DnnPartitioningSplit read_dnn_partitioning_split(const std::string& path) {
  const Json value = read_json_file(path);
  const JsonContext top{path, ""};
  require_object(value, top);
  DnnPartitioningSplit split;
  auto read_machines = [&](const char* field, std::vector<std::vector<int64_t>>& out) {
    if (!has_field(value, field)) top.fail(field, "missing");
    const Json& machines = value.at(field);
    if (!machines.is_array()) top.fail(field, "expected an array");
    for (size_t i = 0; i < machines.size(); ++i) {
      const JsonContext ctx = top.at(fmt::format("{}[{}]", field, i));
      require_object(machines[i], ctx);
      if (!has_field(machines[i], "nodes")) ctx.fail("nodes", "missing");
      const Json& ids = machines[i].at("nodes");
      if (!ids.is_array()) ctx.fail("nodes", "expected an array of node ids");
      std::vector<int64_t> machine;
      for (const Json& id : ids) {
        if (!id.is_number_integer()) ctx.fail("nodes", "expected integer node ids");
        machine.push_back(id.get<int64_t>());
      }
      out.push_back(std::move(machine));
    }
  };
  read_machines("cpus", split.cpus);
  read_machines("fpgas", split.accels);
  return split;
}

}  // namespace dplace
