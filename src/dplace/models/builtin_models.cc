#include "dplace/models/builtin_models.h"

namespace dplace {

std::vector<ModelEntry> builtin_models() {
  std::vector<ModelEntry> models;
  models.push_back(two_tower_model());
  return models;
}

}  // namespace dplace
