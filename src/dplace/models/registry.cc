#include "dplace/models/registry.h"

#include "dplace/models/builtin_models.h"

namespace dplace {

const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> entries = builtin_models();
  return entries;
}

const ModelEntry* find_model(const std::string& name) {
  for (const ModelEntry& e : model_registry()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace dplace
