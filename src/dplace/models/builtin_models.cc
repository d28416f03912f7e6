#include "dplace/models/builtin_models.h"

namespace dplace {

std::vector<ModelEntry> builtin_models() {
  std::vector<ModelEntry> models;
  models.push_back(two_tower_model());
  for (auto family : {rnn_models, cnn_models, transformer_models}) {
    for (ModelEntry& e : family()) models.push_back(std::move(e));
  }
  return models;
}

}  // namespace dplace
