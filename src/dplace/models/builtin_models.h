// The list behind model_registry(); each model family adds its entries in builtin_models.cc.
#pragma once

#include <vector>

#include "dplace/models/registry.h"

namespace dplace {

std::vector<ModelEntry> builtin_models();

// A small two-tower MLP (two independent branches joined by a head): the smoke-test model.
ModelEntry two_tower_model();

}  // namespace dplace
