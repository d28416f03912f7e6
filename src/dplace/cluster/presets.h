// Built-in cluster presets. Each is a dplace.cluster/1 file under data/clusters/, embedded into
// the library at build time (cmake/embed_presets.cmake), with a `source` field citing its figures.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"

namespace dplace {

namespace internal {
struct EmbeddedPreset {
  const char* name;
  const char* json;
};
extern const std::vector<EmbeddedPreset> kEmbeddedPresets;
}  // namespace internal

// Preset names, sorted.
std::vector<std::string> preset_names();
// Throws ConfigError naming the known presets when `name` is not one.
Cluster load_preset(const std::string& name);
// A preset name, or a path to a dplace.cluster/1 file (anything containing '/' or ending in
// ".json" is a path). Throws FormatError / ConfigError naming the file on bad input.
Cluster load_cluster(const std::string& name_or_path);

}  // namespace dplace
