// The --param keys the simulator-driven learning placers (post, hsdag) share: the grouping's
// (placers/learning/groupings.h) and the polishing's (search/anneal.h, polish_learned), with one
// reading of each so that the two placers accept the same values.
//
//   groups (2..max_groups, default 256), sole-consumer (full|chains|limited|off, chains),
//   sole-consumer-limit (64), cap (lightest|communication, communication),
//   cap-transfer-scale (0.3), shared-weights (one of the placer's choices);
//   polish (-1: kPolishFactor x anneal's default evaluations, 0: off), polish-share (0..0.9, 0.1),
//   polish-rounds (1..1000, 8).
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

// The keys read by the two functions below, for PlacerParams' list of known keys.
std::vector<std::string> learning_grouping_keys();
std::vector<std::string> polish_keys();

// levels is 1. Throws ConfigError naming the key for a bad value.
LearningGroupingOptions learning_grouping_from_params(
    const PlacerParams& p, int64_t max_groups, const std::vector<std::string>& shared_weights,
    const std::string& shared_weights_default);

PolishOptions polish_from_params(const PlacerParams& p);

}  // namespace dplace
