// The list behind model_registry(); each model family adds its entries in builtin_models.cc.
#pragma once

#include <vector>

#include "dplace/models/registry.h"

namespace dplace {

std::vector<ModelEntry> builtin_models();

// A small two-tower MLP (two independent branches joined by a head): the smoke-test model.
ModelEntry two_tower_model();
// rnnlm, nmt, gnmt4, gnmt8 (rnn_models.cc).
std::vector<ModelEntry> rnn_models();
// inception_v3, inception_v3_aux, resnet50 (cnn_models.cc).
std::vector<ModelEntry> cnn_models();
// bert_base, gpt2 (transformer_models.cc).
std::vector<ModelEntry> transformer_models();

}  // namespace dplace
