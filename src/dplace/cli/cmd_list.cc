// dplace models | clusters | placers [--json]
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "dplace/cli/commands.h"
#include "dplace/cluster/presets.h"
#include "dplace/core/json.h"
#include "dplace/models/registry.h"
#include "dplace/placers/placer.h"

namespace dplace::cli {
namespace {

struct ListArgs {
  bool json = false;
};

// Prints one "name  description" line per row, names padded to the longest one.
void print_name_column(const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t width = 0;
  for (const auto& [name, description] : rows) width = std::max(width, name.size());
  for (const auto& [name, description] : rows) {
    fmt::print("{:<{}}  {}\n", name, width, description);
  }
}

void list_models(const ListArgs& args) {
  Json rows = Json::array();
  for (const ModelEntry& m : model_registry()) {
    rows.push_back({{"name", m.name},
                    {"description", m.description},
                    {"expert", static_cast<bool>(m.expert)}});
  }
  if (args.json) {
    fmt::print("{}\n", Json{{"models", rows}}.dump(2));
    return;
  }
  std::vector<std::pair<std::string, std::string>> lines;
  for (const ModelEntry& m : model_registry()) lines.emplace_back(m.name, m.description);
  print_name_column(lines);
}

void list_clusters(const ListArgs& args) {
  Json rows = Json::array();
  for (const std::string& name : preset_names()) {
    const Cluster c = load_preset(name);
    int cpus = 0, gpus = 0, accels = 0;
    for (const Device& d : c.devices()) {
      cpus += d.kind == DeviceKind::kCpu;
      gpus += d.kind == DeviceKind::kGpu;
      accels += d.kind == DeviceKind::kAccel;
    }
    rows.push_back({{"name", name},
                    {"devices", c.num_devices()},
                    {"cpus", cpus},
                    {"gpus", gpus},
                    {"accels", accels},
                    {"source", c.source()}});
  }
  if (args.json) {
    fmt::print("{}\n", Json{{"clusters", rows}}.dump(2));
    return;
  }
  for (const Json& r : rows) {
    fmt::print("{:<16} {} cpu, {} gpu, {} accel\n    source: {}\n", r["name"].get<std::string>(),
               r["cpus"].get<int>(), r["gpus"].get<int>(), r["accels"].get<int>(),
               r["source"].get<std::string>());
  }
}

void list_placers(const ListArgs& args) {
  const std::vector<PlacerInfo> placers = dplace::list_placers();
  if (args.json) {
    Json rows = Json::array();
    for (const PlacerInfo& p : placers) {
      rows.push_back({{"name", p.name},
                      {"description", p.description},
                      {"randomised", p.randomised},
                      {"default_compare", p.in_default_compare}});
    }
    fmt::print("{}\n", Json{{"placers", rows}}.dump(2));
    return;
  }
  std::vector<std::pair<std::string, std::string>> lines;
  for (const PlacerInfo& p : placers) lines.emplace_back(p.name, p.description);
  lines.emplace_back("single:<dev>", "every op on the named device");
  print_name_column(lines);
}

}  // namespace

void add_list_commands(CLI::App& app) {
  auto args = std::make_shared<ListArgs>();
  CLI::App* models = app.add_subcommand("models", "list the built-in models");
  models->add_flag("--json", args->json, "print JSON");
  models->callback([args] { list_models(*args); });
  CLI::App* clusters = app.add_subcommand("clusters", "list the cluster presets");
  clusters->add_flag("--json", args->json, "print JSON");
  clusters->callback([args] { list_clusters(*args); });
  CLI::App* placers = app.add_subcommand("placers", "list the placers");
  placers->add_flag("--json", args->json, "print JSON");
  placers->callback([args] { list_placers(*args); });
}

}  // namespace dplace::cli
