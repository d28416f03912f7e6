#include "dplace/placers/pipeline/problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "dplace/core/error.h"
#include "dplace/placers/pipeline/units.h"

namespace dplace {

int PipelineProblem::num_devices() const {
  int total = 0;
  for (const PipelineDeviceType& t : types) total += t.count;
  return total;
}

int PipelineProblem::type_of_device(int device) const {
  for (size_t t = 0; t < types.size(); ++t) {
    if (device < types[t].count) return static_cast<int>(t);
    device -= types[t].count;
  }
  DPLACE_CHECK(false) << "device index out of range";
  return -1;
}

int PipelineProblem::first_device_of_type(int type) const {
  int first = 0;
  for (int t = 0; t < type; ++t) first += types[t].count;
  return first;
}

const std::string& PipelineProblem::device_name(int device) const {
  const int t = type_of_device(device);
  return types[t].device_names[device - first_device_of_type(t)];
}

void validate_pipeline_problem(const PipelineProblem& p) {
  auto fail = [&](const std::string& what) {
    throw ConfigError(fmt::format("pipeline problem '{}': {}", p.name, what));
  };
  if (p.types.empty()) fail("no device types");
  if (p.num_devices() == 0) fail("no devices");
  for (const PipelineDeviceType& t : p.types) {
    if (t.count < 0) fail(fmt::format("type '{}' has a negative count", t.name));
    if (static_cast<int>(t.device_names.size()) != t.count) {
      fail(fmt::format("type '{}' needs one device name per device", t.name));
    }
    if (!(t.memory_cap_bytes >= 0)) fail(fmt::format("type '{}' has a bad memory cap", t.name));
  }
  for (const PipelineNode& n : p.nodes) {
    if (n.time_s.size() != p.types.size()) {
      fail(fmt::format("node '{}' needs one time per device type", n.name));
    }
    for (double t : n.time_s) {
      if (!(t >= 0) || std::isnan(t)) fail(fmt::format("node '{}' has a negative time", n.name));
    }
    if (!(n.size_bytes >= 0) || !std::isfinite(n.size_bytes)) {
      fail(fmt::format("node '{}' has a bad size", n.name));
    }
  }
  for (const PipelineTensor& t : p.tensors) {
    if (t.producer >= p.nodes.size()) fail("a tensor names an unknown producer");
    if (t.comm_s.size() != p.types.size()) fail("a tensor needs one cost per device type");
    for (uint32_t c : t.consumers) {
      if (c >= p.nodes.size() || c == t.producer) fail("a tensor names a bad consumer");
    }
    for (double c : t.comm_s) {
      if (!(c >= 0) || !std::isfinite(c)) fail("a tensor has a bad communication cost");
    }
  }
}

PipelineProblem pipeline_problem_from_graph(const Graph& graph, const Cluster& cluster,
                                            const CostTable& costs) {
  PipelineProblem p;
  p.name = graph.name();
  const size_t num_ops = graph.num_ops();
  const size_t num_devices = cluster.num_devices();

  // The communication partner of each device: the first CPU device, else another device.
  std::optional<DeviceId> host;
  for (size_t d = 0; d < num_devices; ++d) {
    if (cluster.device(DeviceId::from_index(d)).kind == DeviceKind::kCpu) {
      host = DeviceId::from_index(d);
      break;
    }
  }
  std::vector<std::optional<Link>> partner_link(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    const DeviceId id = DeviceId::from_index(d);
    std::optional<DeviceId> partner;
    if (host && *host != id) {
      partner = host;
    } else {
      for (size_t e = 0; e < num_devices && !partner; ++e) {
        if (e != d) partner = DeviceId::from_index(e);
      }
    }
    if (!partner) continue;
    if (const Link* l = cluster.link(id, *partner)) {
      partner_link[d] = *l;
    } else if (const Link* l2 = cluster.link(*partner, id)) {
      partner_link[d] = *l2;
    }
  }

  // Group identical devices into types, in order of first appearance.
  struct TypeKey {
    DeviceKind kind;
    int64_t memory_bytes;
    std::vector<double> times;
    bool has_link;
    double bandwidth;
    double latency;
    auto operator<=>(const TypeKey&) const = default;
  };
  std::map<TypeKey, int> type_of_key;
  std::vector<int> type_of_device(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    const DeviceId id = DeviceId::from_index(d);
    const Device& dev = cluster.device(id);
    // A CPU pays no communication (PipelineDeviceType::pays_communication), so its partner link
    // is not part of its type: the host CPU's partner is an accelerator and the other CPUs' is
    // the host, which used to split identical CPUs into two types.
    const bool pays_communication = dev.kind != DeviceKind::kCpu;
    const bool keyed_link = pays_communication && partner_link[d].has_value();
    TypeKey key{dev.kind, dev.memory_bytes, {}, keyed_link, 0, 0};
    key.times.reserve(num_ops);
    for (size_t i = 0; i < num_ops; ++i) key.times.push_back(costs.time_s(OpId::from_index(i), id));
    if (keyed_link) {
      key.bandwidth = partner_link[d]->bandwidth_bytes_per_s;
      key.latency = partner_link[d]->latency_s;
    }
    auto [it, inserted] = type_of_key.emplace(std::move(key), static_cast<int>(p.types.size()));
    if (inserted) {
      PipelineDeviceType type;
      type.name = std::string(device_kind_name(dev.kind));
      type.memory_cap_bytes = static_cast<double>(dev.memory_bytes);
      type.pays_communication = pays_communication;
      p.types.push_back(std::move(type));
    }
    const int t = it->second;
    type_of_device[d] = t;
    ++p.types[t].count;
    p.types[t].device_names.push_back(dev.name);
    p.types[t].cluster_devices.push_back(id);
  }
  // Distinguish types of the same kind by their first device.
  std::map<std::string, int> kind_count;
  for (const PipelineDeviceType& t : p.types) ++kind_count[t.name];
  for (PipelineDeviceType& t : p.types) {
    if (kind_count[t.name] > 1) t.name += "@" + t.device_names.front();
  }
  // Global device order must be type-major; the cluster order within a type is kept.
  const size_t num_types = p.types.size();

  p.nodes.resize(num_ops);
  for (size_t i = 0; i < num_ops; ++i) {
    const OpId id = OpId::from_index(i);
    const Op& op = graph.op(id);
    PipelineNode& node = p.nodes[i];
    node.name = op.name;
    node.time_s.resize(num_types);
    for (size_t t = 0; t < num_types; ++t) {
      node.time_s[t] = costs.time_s(id, p.types[t].cluster_devices.front());
    }
    node.size_bytes = static_cast<double>(op.param_bytes + op.temp_bytes);
    node.backward = op.phase == Phase::kBackward || op.phase == Phase::kUpdate;
    const GroupId g = graph.group_of(id);
    node.colour = graph.group_ops(g).size() > 1 ? static_cast<int64_t>(g.value()) : -1;
    if (op.extra.is_object() && op.extra.contains("dnn_id") &&
        op.extra.at("dnn_id").is_number_integer()) {
      node.external_id = op.extra.at("dnn_id").get<int64_t>();
    }
  }

  size_t missing_links = 0;
  for (size_t i = 0; i < num_ops; ++i) {
    const OpId id = OpId::from_index(i);
    const Op& op = graph.op(id);
    std::optional<double> fixed_cost;
    if (op.extra.is_object() && op.extra.contains("comm_cost_s") &&
        op.extra.at("comm_cost_s").is_number()) {
      fixed_cost = op.extra.at("comm_cost_s").get<double>();
    }
    for (uint32_t k = 0; k < graph.num_outputs(id); ++k) {
      const TensorRef ref{id, k};
      const auto consumers = graph.consumers(ref);
      if (consumers.empty()) continue;
      PipelineTensor t;
      t.producer = static_cast<uint32_t>(i);
      for (OpId c : consumers) {
        if (c != id) t.consumers.push_back(c.value());
      }
      if (t.consumers.empty()) continue;
      t.comm_s.assign(num_types, 0.0);
      for (size_t ty = 0; ty < num_types; ++ty) {
        if (!p.types[ty].pays_communication) continue;
        if (fixed_cost) {
          t.comm_s[ty] = *fixed_cost;
          continue;
        }
        const size_t d = p.types[ty].cluster_devices.front().value();
        if (partner_link[d]) {
          t.comm_s[ty] = transfer_time_s(graph.tensor_bytes(ref), *partner_link[d]);
        } else if (num_devices > 1) {
          ++missing_links;
        }
      }
      p.tensors.push_back(std::move(t));
    }
  }
  if (missing_links > 0) {
    p.warnings.push_back(fmt::format(
        "cluster '{}': no link to a partner device for some device types; {} tensor costs "
        "taken as 0",
        cluster.name(), missing_links));
  }
  validate_pipeline_problem(p);
  return p;
}

void devices_of_tensor(const PipelineTensor& tensor, const std::vector<int>& device_of_node,
                       std::vector<int>& devices) {
  devices.clear();
  devices.push_back(device_of_node[tensor.producer]);
  for (uint32_t c : tensor.consumers) devices.push_back(device_of_node[c]);
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
}

PipelineEvaluation evaluate_pipeline(const PipelineProblem& problem,
                                     const std::vector<int>& device_of_node) {
  const int num_devices = problem.num_devices();
  DPLACE_CHECK(device_of_node.size() == problem.nodes.size()) << "assignment size mismatch";
  PipelineEvaluation ev;
  ev.devices.resize(num_devices);
  std::vector<int> type_of(num_devices);
  for (int d = 0; d < num_devices; ++d) type_of[d] = problem.type_of_device(d);

  for (size_t i = 0; i < problem.nodes.size(); ++i) {
    const int d = device_of_node[i];
    DPLACE_CHECK(d >= 0 && d < num_devices) << "device index out of range";
    const PipelineNode& node = problem.nodes[i];
    const double t = node.time_s[type_of[d]];
    if (t == kInfiniteTime && ev.violation.empty()) {
      ev.violation = fmt::format("node '{}' may not run on '{}' (type {})", node.name,
                                 problem.device_name(d), problem.types[type_of[d]].name);
    }
    PipelineDeviceLoad& load = ev.devices[d];
    load.compute_s += t;
    load.memory_bytes += node.size_bytes;
    load.nodes.push_back(static_cast<uint32_t>(i));
  }
  std::vector<int> touched;
  for (const PipelineTensor& t : problem.tensors) {
    devices_of_tensor(t, device_of_node, touched);
    if (touched.size() < 2) continue;
    for (int d : touched) {
      if (problem.types[type_of[d]].pays_communication) {
        ev.devices[d].comm_s += t.comm_s[type_of[d]];
      }
    }
  }
  for (int d = 0; d < num_devices; ++d) {
    PipelineDeviceLoad& load = ev.devices[d];
    load.load_s = load.compute_s + load.comm_s;
    ev.max_load_s = std::max(ev.max_load_s, load.load_s);
    const double cap = problem.types[type_of[d]].memory_cap_bytes;
    if (load.memory_bytes > cap && ev.violation.empty()) {
      ev.violation = fmt::format("device '{}' holds {:.0f} bytes, more than its memory of {:.0f}",
                                 problem.device_name(d), load.memory_bytes, cap);
    }
  }
  // Colours.
  const ColourClasses classes = colour_classes(problem);
  std::vector<int> device_of_class(classes.num_classes, -1);
  for (size_t i = 0; i < problem.nodes.size() && ev.violation.empty(); ++i) {
    int& d = device_of_class[classes.class_of_node[i]];
    if (d == -1) {
      d = device_of_node[i];
    } else if (d != device_of_node[i]) {
      ev.violation = fmt::format("colour class of node '{}' is split over '{}' and '{}'",
                                 problem.nodes[i].name, problem.device_name(d),
                                 problem.device_name(device_of_node[i]));
    }
  }
  ev.contiguous = is_contiguous_assignment(problem, device_of_node);
  return ev;
}

bool is_contiguous_assignment(const PipelineProblem& problem,
                              const std::vector<int>& device_of_node) {
  const UnitDag dag = build_unit_dag(problem);
  const int num_devices = problem.num_devices();
  std::vector<int> device_of_unit(dag.num_units, -1);
  for (size_t i = 0; i < problem.nodes.size(); ++i) {
    int& d = device_of_unit[dag.unit_of_node[i]];
    if (d == -1) {
      d = device_of_node[i];
    } else if (d != device_of_node[i]) {
      return false;
    }
  }
  // The device quotient of the unit DAG must be acyclic.
  std::vector<std::vector<int>> succ(num_devices);
  std::vector<int> indegree(num_devices, 0);
  for (size_t u = 0; u < dag.num_units; ++u) {
    for (uint32_t v : dag.succ[u]) {
      const int a = device_of_unit[u];
      const int b = device_of_unit[v];
      if (a != b) {
        succ[a].push_back(b);
        ++indegree[b];
      }
    }
  }
  std::vector<int> ready;
  for (int d = 0; d < num_devices; ++d) {
    if (indegree[d] == 0) ready.push_back(d);
  }
  int seen = 0;
  while (!ready.empty()) {
    const int d = ready.back();
    ready.pop_back();
    ++seen;
    for (int e : succ[d]) {
      if (--indegree[e] == 0) ready.push_back(e);
    }
  }
  return seen == num_devices;
}

}  // namespace dplace
