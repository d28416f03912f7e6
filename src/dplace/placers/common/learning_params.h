// The --param keys the simulator-driven learning placers (post, hsdag) share: the grouping's
// (placers/learning/groupings.h) and the polishing's (search/anneal.h, polish_learned), with one
// reading of each so that the two placers accept the same values.
//
//   groups (2..max_groups, default 256), sole-consumer (full|chains|limited|off, chains),
//   sole-consumer-limit (64), cap (lightest|communication, communication),
//   cap-transfer-scale (0.3), shared-weights (one of the placer's choices);
//   polish (-1: kPolishFactor x anneal's default evaluations, 0: off), polish-share (0..0.9, 0.1),
//   polish-rounds (1..1000, 8); samples, restart-patience, threads, curve (below).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dplace/placers/common/params.h"
#include "dplace/placers/learning/groupings.h"
#include "dplace/placers/search/anneal.h"

namespace dplace {

// The keys read by the functions below, for PlacerParams' list of known keys.
std::vector<std::string> learning_grouping_keys();
std::vector<std::string> polish_keys();
std::vector<std::string> run_control_keys();

// The run controls the three simulator-driven learning placers share: samples (0..2^50, default
// 0), restart-patience (0..2^40), threads (0..256, default 0), curve (a file name, default none).
struct LearningRunControls {
  int64_t max_samples = 0;
  int64_t restart_patience = 0;
  size_t threads = 0;
  std::string curve;
};
LearningRunControls run_controls_from_params(const PlacerParams& p,
                                             int64_t restart_patience_default);

// levels is 1. Throws ConfigError naming the key for a bad value.
LearningGroupingOptions learning_grouping_from_params(
    const PlacerParams& p, int64_t max_groups, const std::vector<std::string>& shared_weights,
    const std::string& shared_weights_default);

PolishOptions polish_from_params(const PlacerParams& p);

}  // namespace dplace
