// Built-in benchmark models (issue: model zoo). Each entry generates an op-level graph in C++ from
// a few size parameters, and may offer an expert (hand-crafted) placement for a cluster.
//
// Thread safety: the registry is immutable; builders are pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/ir/graph.h"
#include "dplace/sim/placement.h"

namespace dplace {

// Unset fields take the model's defaults.
struct ModelOptions {
  std::optional<int> batch;
  std::optional<int> layers;
  std::optional<int> hidden;
  std::optional<int> seq;
  std::optional<int> vocab;
  bool inference = false;  // Default: false (training graph: forward + backward + update).
};

struct ModelEntry {
  std::string name;
  std::string description;  // one line, including the default sizes
  // Throws ConfigError for an out-of-range option.
  std::function<Graph(const ModelOptions&)> build;
  // The expert placement for this cluster; empty function when the model has none.
  std::function<Placement(const Graph&, const Cluster&)> expert;
};

const std::vector<ModelEntry>& model_registry();
// nullptr when unknown.
const ModelEntry* find_model(const std::string& name);

}  // namespace dplace
