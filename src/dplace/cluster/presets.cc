#include "dplace/cluster/presets.h"

#include <fmt/format.h>

#include <algorithm>

#include "dplace/cluster/cluster_json.h"
#include "dplace/core/error.h"

namespace dplace {

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  names.reserve(internal::kEmbeddedPresets.size());
  for (const internal::EmbeddedPreset& p : internal::kEmbeddedPresets) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

Cluster load_preset(const std::string& name) {
  for (const internal::EmbeddedPreset& p : internal::kEmbeddedPresets) {
    if (name != p.name) continue;
    const std::string origin = "preset " + name;
    return parse_cluster_json(parse_json_text(p.json, origin), origin);
  }
  std::string known;
  for (const std::string& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError(fmt::format(
      "cluster '{}': not a preset (presets: {}); a cluster file must end in .json or contain '/'",
      name, known));
}

Cluster load_cluster(const std::string& name_or_path) {
  const bool is_path =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() >= 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0);
  return is_path ? read_cluster_file(name_or_path) : load_preset(name_or_path);
}

}  // namespace dplace
