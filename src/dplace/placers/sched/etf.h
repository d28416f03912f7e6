// The earliest-task-first engine behind m-etf and m-sct (Hwang, Chow, Anger and Lee, SIAM J.
// Comput. 1989; memory-constrained as in Baechi, Jeon et al., SoCC 2020).
//
// Repeatedly places the (ready op, device) pair with the earliest start time, over devices the op
// fits on (ListSchedule::fits); ties go to the higher static level, then the lower topological
// rank, then the lower device index. An op that fits nowhere is placed on its fallback device
// once nothing else is placeable, and the outcome says so.
//
// With favourite children (m-sct): an op whose favourite parent is placed goes to that parent's
// device when it fits there and starts there no later than elsewhere (as in Baechi); and a device
// whose last placed op has a favourite child that is ready is kept for that child: another op may
// use it only if it would finish there before the child could start (or has no other device).
//
// Thread safety: pure function of its arguments.
#pragma once

#include <cstdint>
#include <vector>

#include "dplace/placers/common/group_graph.h"
#include "dplace/placers/common/memory.h"
#include "dplace/placers/placer.h"

namespace dplace {

struct EtfOptions {
  bool accelerators_only = true;  // Default: true. See ListScheduleOptions.
  // Per op: the op index of its favourite child, or -1. Empty: plain ETF.
  std::vector<int64_t> favourite_child;
  // Default: true. With favourite children, keep a device for the pending favourite child of
  // its last op (Hanen and Munier's rule); false: only the "follow the parent" rule.
  bool reserve_for_favourite = true;
};

ScheduleOutcome run_etf(const PlaceRequest& request, const GroupGraph& groups,
                        const std::vector<int64_t>& memory_limits, const EtfOptions& options);

}  // namespace dplace
