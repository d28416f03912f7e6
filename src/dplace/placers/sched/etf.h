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
// whose last placed op has a favourite child that is ready is kept for that child
// (FavouriteReservation):
//  * kUrgent (Baechi's SCT device, after Hanen and Munier): only while the device is one of the
//    earliest for the child. Another op may then use it only once that op is urgent, i.e. no
//    earlier than the latest of its start times over the devices it fits on (waiting no longer
//    buys it anything anywhere); the device idles until then.
//  * kFinishBefore: whichever device the child would prefer. Another op may use it only if it
//    would finish there before the child could start (or has no other device).
//
// Thread safety: pure function of its arguments.
#pragma once

#include <cstdint>
#include <vector>

#include "dplace/placers/common/group_graph.h"
#include "dplace/placers/common/memory.h"
#include "dplace/placers/placer.h"

namespace dplace {

enum class FavouriteReservation {
  kNone,          // only the "follow the parent" rule
  kUrgent,        // Baechi's rule, see the file comment
  kFinishBefore,  // dplace's earlier rule, see the file comment
};

struct EtfOptions {
  bool accelerators_only = true;  // Default: true. See ListScheduleOptions.
  // Per op: the op index of its favourite child, or -1. Empty: plain ETF.
  std::vector<int64_t> favourite_child;
  // Default: kUrgent. With favourite children, how a device is kept for the pending favourite
  // child of its last op.
  FavouriteReservation reservation = FavouriteReservation::kUrgent;
};

ScheduleOutcome run_etf(const PlaceRequest& request, const GroupGraph& groups,
                        const std::vector<int64_t>& memory_limits, const EtfOptions& options);

}  // namespace dplace
