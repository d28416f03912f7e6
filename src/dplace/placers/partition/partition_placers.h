// Factories of the graph-partitioning placers (registered by register_partition_placers()).
//
// All three partition the group quotient graph (partition_common.h): groups weighted by compute
// time, edges by bytes, target devices weighted by their speed on this graph. They minimise
// communication subject to load balance, not step time; a placement that does not fit in memory
// is repaired afterwards (common/memory.h, repair_memory).
//
// Parameters (--param): imbalance (Default: 0.05; allowed load imbalance, in [0, 1]); scotch and
// mincut add strategy (Default: quality; one of default, quality, speed, balance: Scotch's
// SCOTCH_STRAT* flag for the mapping strategy).
#pragma once

#include <memory>

#include "dplace/placers/placer.h"

namespace dplace {

// Scotch static mapping (Pellegrini; as the 2017 paper used it): the target architecture is the
// complete graph of the cluster's devices, each weighted by speed, each link by a cost inversely
// proportional to its bandwidth (a "deco" architecture built with SCOTCH_archBuild0).
std::unique_ptr<Placer> make_scotch_placer();
// The 2017 paper's MinCut baseline: the same mapping with the CPUs removed from the targets (ops
// that cannot run elsewhere stay on a CPU).
std::unique_ptr<Placer> make_mincut_placer();
// METIS k-way partitioning (Karypis and Kumar 1998) into one part per device, target part
// weights proportional to device speed.
std::unique_ptr<Placer> make_metis_placer();

}  // namespace dplace
