// Baseline placers: everything on one device, and the expert placement.
#include <fmt/format.h>

#include <algorithm>

#include "dplace/core/error.h"
#include "dplace/placers/builtin.h"
#include "dplace/placers/common/memory.h"
#include "dplace/placers/common/params.h"

namespace dplace {
namespace {

// A fixed placement has no alternative: one simulation says whether it fits, and why not. An
// invalid one (e.g. needing a link the cluster lacks) is not simulated; Placer::place reports it.
void check_memory(const PlaceRequest& request, const std::string& what, PlaceResult& result) {
  if (!placement_problem(*request.graph, *request.cluster, *request.costs, result.placement)
           .empty()) {
    return;
  }
  const SimResult sim = request.simulator->run(result.placement);
  ++result.evaluations;
  if (!sim.feasible) {
    result.infeasible_reason =
        fmt::format("{} does not fit in memory: {}", what, describe_oom(*request.cluster, sim));
  }
}

// Places every op on one device. Ops that may not run there (e.g. a CPU-only op when the target
// is a GPU) go to the first device they allow, together with their colocation group.
class SingleDevicePlacer final : public Placer {
 public:
  enum class Target { kFirstCpu, kFirstGpu, kNamed };
  SingleDevicePlacer(Target target, std::string device_name)
      : target_(target), device_name_(std::move(device_name)) {}

 private:
  DeviceId resolve(const Cluster& cluster) const {
    if (target_ == Target::kNamed) {
      if (auto d = cluster.find_device(device_name_)) return *d;
      throw ConfigError(fmt::format("placer 'single:{}': cluster '{}' has no device '{}'",
                                    device_name_, cluster.name(), device_name_));
    }
    const DeviceKind kind = target_ == Target::kFirstCpu ? DeviceKind::kCpu : DeviceKind::kGpu;
    std::vector<DeviceId> ds = cluster.devices_of_kind(kind);
    if (ds.empty() && kind == DeviceKind::kGpu) ds = cluster.devices_of_kind(DeviceKind::kAccel);
    if (ds.empty()) {
      throw ConfigError(fmt::format("placer 'single-{}': cluster '{}' has no {} device",
                                    device_kind_name(kind), cluster.name(),
                                    device_kind_name(kind)));
    }
    return ds.front();
  }

  // Needs no link unless an op cannot run on the target; place() reports a link that is missing.
  bool handles_missing_links() const override { return true; }

  PlaceResult place_impl(const PlaceRequest& request) override {
    const PlacerParams no_params(name(), request.params, {});
    const Graph& graph = *request.graph;
    const DeviceId target = resolve(*request.cluster);
    std::vector<DeviceId> device_of_group(graph.num_groups());
    for (size_t g = 0; g < graph.num_groups(); ++g) {
      const std::vector<DeviceId>& allowed = request.costs->group_devices(GroupId::from_index(g));
      const bool ok = std::find(allowed.begin(), allowed.end(), target) != allowed.end();
      device_of_group[g] = ok ? target : allowed.front();
    }
    PlaceResult result;
    result.placement = placement_from_groups(graph, device_of_group);
    check_memory(request, fmt::format("every op on {}", request.cluster->device(target).name),
                 result);
    return result;
  }

  Target target_;
  std::string device_name_;
};

class ExpertPlacer final : public Placer {
  // The placement is given; place() reports a link it needs and the cluster lacks.
  bool handles_missing_links() const override { return true; }

  bool uses_expert_placement() const override { return true; }

  PlaceResult place_impl(const PlaceRequest& request) override {
    const PlacerParams no_params(name(), request.params, {});
    if (!request.expert) {
      throw ConfigError(fmt::format(
          "placer 'expert': graph '{}' has no expert placement; pass one with --placement FILE",
          request.graph->name()));
    }
    PlaceResult result;
    result.placement = *request.expert;
    check_memory(request, "the expert placement", result);
    return result;
  }
};

}  // namespace

std::unique_ptr<Placer> make_single_device_placer(const std::string& device_name) {
  return std::make_unique<SingleDevicePlacer>(SingleDevicePlacer::Target::kNamed, device_name);
}

void register_baseline_placers() {
  register_placer(
      {"single-cpu", "every op on the first CPU (ops it cannot run go to an allowed device)", false,
       true, [] {
         return std::make_unique<SingleDevicePlacer>(SingleDevicePlacer::Target::kFirstCpu, "");
       }});
  register_placer(
      {"single-gpu", "every op on the first GPU (ops it cannot run go to an allowed device)", false,
       true, [] {
         return std::make_unique<SingleDevicePlacer>(SingleDevicePlacer::Target::kFirstGpu, "");
       }});
  register_placer({"expert", "the model's hand-crafted placement, or --placement FILE", false, true,
                   [] { return std::make_unique<ExpertPlacer>(); }});
  register_placer({"round-robin",
                   "colocation groups in topological order dealt to the GPUs in turn", false, true,
                   make_round_robin_placer});
}

}  // namespace dplace
