// Factories of the list-scheduling placers (registered by register_sched_placers()).
//
// Every one places ops (not groups) one at a time on a ListSchedule (common/list_schedule.h), so
// colocation pins a group to the device of its first placed op, only allowed devices are used and
// a device is skipped when the memory estimate would exceed its limit. The result is simulated;
// while the simulation reports OOM the limit of the overflowing devices is lowered and the
// schedule redone (common/memory.h, schedule_with_memory_retries).
//
// Parameters (--param), shared: devices (m-* only; Default: accelerators: an op is offered the
// GPUs/accelerators it allows and only ops that allow none go elsewhere, as in Baechi; all: every
// allowed device), memory_fraction (Default: 1.0, in (0, 1]; share of each
// device's memory the estimate may use), memory_retries (Default: 4; re-schedules after an OOM
// simulation). m-sct adds lp_max_edges (Default: 200000; larger graphs skip the LP and m-sct
// reduces to m-etf, saying so in the note).
#pragma once

#include <memory>

#include "dplace/placers/placer.h"

namespace dplace {

// HEFT (Topcuoglu, Hariri and Wu, IEEE TPDS 2002): ops in decreasing upward rank (mean time plus
// mean communication), each to the device with the earliest finish time, idle gaps allowed.
std::unique_ptr<Placer> make_heft_placer();
// Baechi's m-TOPO: ops in topological order fill one accelerator up to an equal share of the
// graph's memory (plus the largest group), then the next.
std::unique_ptr<Placer> make_m_topo_placer();
// Baechi's m-ETF: earliest task first under memory limits (sched/etf.h).
std::unique_ptr<Placer> make_m_etf_placer();
// Baechi's m-SCT: ETF with favourite children from the SCT linear program (sched/sct_lp.h).
std::unique_ptr<Placer> make_m_sct_placer();

}  // namespace dplace
