#include "dplace/placers/placer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "dplace/core/error.h"
#include "dplace/placers/builtin.h"

namespace dplace {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, PlacerInfo>& registry() {
  static std::map<std::string, PlacerInfo> r;
  return r;
}

void ensure_builtins() {
  static std::once_flag once;
  std::call_once(once, [] { register_builtin_placers(); });
}

}  // namespace

PlaceResult Placer::place(const PlaceRequest& request) {
  DPLACE_CHECK(request.graph && request.cluster && request.costs && request.simulator)
      << "PlaceRequest is missing graph, cluster, costs or simulator";
  DPLACE_CHECK(request.costs->num_ops() == request.graph->num_ops());
  DPLACE_CHECK(request.costs->num_devices() == request.cluster->num_devices());
  check_limit_seconds("--budget-seconds", request.budget_seconds);
  if (!handles_missing_links()) {
    if (const std::optional<DevicePair> pair = request.cluster->first_unlinked_pair()) {
      throw ConfigError(fmt::format(
          "placer '{}': cluster '{}' has no link '{}' -> '{}' (no links entry and no "
          "default_link), and this placer needs every pair of devices linked; add the link or a "
          "default_link, or use anneal, expert or a single-device placer",
          name_, request.cluster->name(), request.cluster->device(pair->from).name,
          request.cluster->device(pair->to).name));
    }
  }
  PlaceResult result = place_impl(request);
  const std::string problem = placement_structure_problem(*request.graph, *request.cluster,
                                                          *request.costs, result.placement);
  DPLACE_CHECK(problem.empty()) << "placer returned an invalid placement: " << problem;
  // Otherwise valid: only the cluster's missing link can stand in the way.
  const std::string link = missing_link_problem(*request.graph, *request.cluster, result.placement);
  if (!link.empty()) {
    throw ConfigError(fmt::format("placer '{}': its placement needs a link cluster '{}' lacks: {}",
                                  name_, request.cluster->name(), link));
  }
  return result;
}

void register_placer(PlacerInfo info) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const std::string name = info.name;
  registry()[name] = std::move(info);
}

std::vector<PlacerInfo> list_placers() {
  ensure_builtins();
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<PlacerInfo> out;
  for (const auto& [name, info] : registry()) out.push_back(info);
  return out;
}

std::unique_ptr<Placer> make_placer(const std::string& name) {
  ensure_builtins();
  std::unique_ptr<Placer> placer;
  if (name.rfind("single:", 0) == 0) {
    placer = make_single_device_placer(name.substr(7));
  } else {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(name);
    if (it == registry().end()) {
      std::string known;
      for (const auto& [n, info] : registry()) known += (known.empty() ? "" : ", ") + n;
      throw ConfigError(
          fmt::format("unknown placer '{}' (known: {}, single:<device>)", name, known));
    }
    placer = it->second.factory();
  }
  placer->name_ = name;
  return placer;
}

void check_deadline(const PlaceRequest& request, size_t step, size_t total) {
  if (!request.deadline || step % 64 != 63) return;
  if (std::chrono::steady_clock::now() > *request.deadline) {
    throw DeadlinePassed(fmt::format("stopped at its deadline at step {} of {}", step, total));
  }
}

}  // namespace dplace
