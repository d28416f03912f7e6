// The state shared by the list-scheduling placers (heft, m-topo, m-etf, m-sct): a partial schedule
// of ops on devices, built one op at a time, with colocation, allowed devices, link transfers and
// a memory estimate.
//
// Schedule model (an estimate of the simulator's, docs/simulator.md):
//  * place(op, d) starts the op at start_s(op, d): when every input is on d and d is free. A
//    tensor from another device arrives after a transfer on the (from, d) channel, which starts
//    when the producer has finished and the channel is free (FIFO, one transfer at a time) and
//    takes latency + bytes / bandwidth. A tensor moves to a device once.
//  * Without insertion a device is free after its last placed op; with insertion (HEFT) the op may
//    fill an idle gap of the device that is long enough.
//  * Colocation: the first op placed of a group pins the group's device; devices_for() of its
//    other ops is then that device only.
//  * Free sources (ops with no inputs that take no time anywhere: variables, inputs, constants)
//    are deferred: take_ready() never returns them, their tensors count as present at time 0 on
//    every device their group allows, and each is placed with its first consumer, on that
//    consumer's device (or, when its group may not go there, on the group's roomiest allowed
//    device). Otherwise every list scheduler would put the weights on the first device by
//    tie-break and make their consumers pull them over a link. Pinning a group places its
//    deferred ops.
//  * With insertion (HEFT) a transfer may also fill an idle gap of its channel.
// Memory estimate per device d (checked by fits(), against the limits given at construction):
//    reserved params of every group pinned to d (all of a group's param_bytes at pinning)
//  + the peak of live tensor bytes on d over the placement sequence, where an op's outputs and
//    the tensors it receives from other devices become live when it is placed and die when the
//    last consumer of the tensor is placed, and an op's temp_bytes count while it is placed.
// This follows the simulator's accounting when the device runs its ops in placement order.
//
// Thread safety: not thread-safe; one per scheduling run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dplace/placers/common/group_graph.h"
#include "dplace/placers/placer.h"

namespace dplace {

struct ListScheduleOptions {
  bool insertion = false;  // Default: false. Allow an op into an idle gap of its device (HEFT).
  // Default: false. Offer an op only the accelerators (GPUs and other accelerators) it allows,
  // or every device it allows when it allows no accelerator (Baechi's setting: the CPU only
  // takes what cannot run elsewhere).
  bool accelerators_only = false;
  bool defer_free_sources = true;  // Default: true. See the file comment.
};

class ListSchedule {
 public:
  // REQUIRES: memory_limits.size() == number of devices; request and groups outlive this.
  ListSchedule(const PlaceRequest& request, const GroupGraph& groups,
               std::vector<int64_t> memory_limits, ListScheduleOptions options = {});

  // Ops with every predecessor placed (or deferred) that were not returned before, deferred
  // free sources excluded; ascending topological rank within one call.
  std::vector<OpId> take_ready();

  // The group's device once pinned, else the devices the group allows (only its accelerators
  // with ListScheduleOptions::accelerators_only, when it has some).
  std::span<const DeviceId> devices_for(OpId op) const;
  bool group_pinned(OpId op) const;
  // Whether the estimate stays within d's limit with op placed on d; always true on the device the
  // op's group is pinned to.
  bool fits(OpId op, DeviceId d) const;
  // Earliest start on d. REQUIRES: every predecessor placed or deferred. kInfiniteTime when an
  // input would need a link that does not exist.
  double start_s(OpId op, DeviceId d) const;
  double finish_s_on(OpId op, DeviceId d) const;
  // Places op on d at start_s(op, d), or later when the device is to wait until not_before_s (an
  // m-sct device kept for a favourite child), and its deferred producers with it. REQUIRES:
  // predecessors placed or deferred, d in devices_for(op).
  void place(OpId op, DeviceId d, double not_before_s = 0);

  bool placed(OpId op) const { return device_[op.value()].valid(); }
  // A free source waiting for its first consumer (see the file comment); callers skip it.
  bool deferred(OpId op) const { return deferred_[op.value()] && !placed(op); }
  // The deferred sources the last place() call placed (an input of the op, or a member of a
  // group it pinned). Their readers' start times change on every device, not only the op's.
  std::span<const OpId> materialized_by_last_place() const { return last_materialized_; }
  DeviceId device(OpId op) const { return device_[op.value()]; }
  double finish_s(OpId op) const { return finish_[op.value()]; }
  size_t num_placed() const { return num_placed_; }
  double makespan_s() const { return makespan_s_; }

  // limit - reserved params - peak live bytes (may be negative after a forced placement).
  int64_t free_bytes(DeviceId d) const;
  // For an op that fits nowhere: the device of devices_for(op) with the most free_bytes.
  DeviceId fallback_device(OpId op) const;
  // "op 'x' (group 'g') fits on no device: it needs N GB more, the most free is /gpu:1 with M GB".
  std::string no_fit_message(OpId op) const;

  // Places the deferred sources nobody consumed (on their group's roomiest device), then returns
  // the placement. REQUIRES: every other op placed.
  Placement placement();

 private:
  struct Interval {
    double start_s;
    double end_s;
  };
  int64_t bytes_needed(OpId op, DeviceId d) const;  // what fits() compares with the limit
  // Earliest start >= ready_s of an activity of duration_s in `busy` (sorted, disjoint).
  static double first_gap(const std::vector<Interval>& busy, double ready_s, double duration_s);
  static void insert_interval(std::vector<Interval>& busy, double start_s, double end_s);
  double device_available_s(DeviceId d, double ready_s, double duration_s) const;
  double channel_start_s(size_t channel, double ready_s, double duration_s) const;
  // A transfer start_s() considers, before place() books it.
  struct PendingTransfer {
    size_t channel;
    double start_s;
    double end_s;
  };
  // channel_start_s() with the transfers in `pending` booked too, as place() books them in turn:
  // behind the last one on the channel, or with insertion in any gap left by them.
  double pending_channel_start_s(size_t channel, double ready_s, double duration_s,
                                 const std::vector<PendingTransfer>& pending) const;
  // The device a deferred source goes to when its consumer goes to d.
  DeviceId deferred_device(OpId source, DeviceId d) const;
  void pin_group(GroupId g, DeviceId d);  // reserves its params, places its deferred ops
  void materialize(OpId source, DeviceId d);
  void free_tensor(uint32_t t);

  const Graph& graph_;
  const Cluster& cluster_;
  const CostTable& costs_;
  const GroupGraph& groups_;
  std::vector<int64_t> limits_;
  ListScheduleOptions options_;
  size_t num_devices_;

  // Static data.
  std::vector<uint32_t> tensor_begin_;  // per op + 1
  std::vector<uint32_t> producer_;      // per tensor
  std::vector<int64_t> tensor_bytes_;   // per tensor
  std::vector<uint32_t> input_begin_;   // per op + 1, into inputs_
  std::vector<uint32_t> inputs_;        // distinct input tensors per op
  std::vector<int64_t> output_total_;   // per op
  std::vector<uint8_t> deferred_;       // per op: a free source

  // Dynamic state.
  std::vector<DeviceId> device_;  // per op
  std::vector<double> finish_;    // per op
  std::vector<uint32_t> unplaced_preds_;
  std::vector<OpId> ready_;
  bool sources_taken_ = false;
  size_t num_placed_ = 0;
  double makespan_s_ = 0;
  std::vector<std::vector<DeviceId>> candidates_;    // per group, before pinning
  std::vector<DeviceId> pinned_;                     // per group
  std::vector<double> arrival_;                      // tensor * devices + d; < 0: not there
  std::vector<uint32_t> consumers_left_;             // per tensor
  std::vector<double> channel_free_s_;               // from * devices + to
  std::vector<std::vector<Interval>> channel_busy_;  // with insertion, sorted
  std::vector<double> device_free_s_;                // without insertion
  std::vector<std::vector<Interval>> busy_;          // with insertion, sorted
  std::vector<int64_t> reserved_params_;
  std::vector<int64_t> live_;
  std::vector<int64_t> peak_live_;
  std::vector<OpId> last_materialized_;
  mutable std::vector<PendingTransfer> pending_;  // start_s() scratch
};

// Whether op is a free source: no inputs and no time on any device its group allows (a variable,
// an input, a constant). The list schedulers defer these (see ListSchedule).
bool is_free_source(const Graph& graph, const GroupGraph& groups, const CostTable& costs, OpId op);

// Rank of each op for list-scheduling priorities: rank(i) = w(i) + max over successors j of
// (c(i, j) + rank(j)), where w(i) is i's mean time over its allowed devices and c(i, j) is the
// mean transfer time, over the cluster's links, of the bytes j reads from i (0 when
// `with_communication` is false: the static level). HEFT's upward rank with communication.
std::vector<double> upward_ranks(const PlaceRequest& request, bool with_communication);

}  // namespace dplace
