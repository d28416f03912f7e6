// The event simulator (its rules: docs/simulator.md). It is the inner loop of every search and
// learning placer, so a Simulator is built once per (graph, cluster, cost table) and then runs many
// placements; each run reuses a caller-owned SimWorkspace and allocates nothing after the first
// run with that workspace (when SimOptions::record_timeline is false).
//
// Semantics (exact; tests pin them):
//  1. One compute stream per device; ops run non-preemptively, one at a time.
//  2. An op is ready on its device when every input tensor is there: produced there and finished,
//     or transferred in.
//  3. A free device starts the ready op that became ready earliest; ties go to the lower rank in
//     Graph::topo_order().
//  4. A tensor produced on a and consumed on b != a is transferred once to b however many consumers
//     it has there, requested when the producer finishes. Each directed (a, b) channel is FIFO and
//     carries one transfer at a time; transfers never use compute. Transfers requested at the same
//     instant queue by producer rank, then output index, then the destination's cluster order.
//  5. Memory per device: param_bytes of its ops all step; an op's outputs from its start until
//     every consumer on that device and every outgoing transfer has finished (a tensor nobody
//     consumes is freed when its producer finishes); a received tensor from its transfer's start
//     until its last consumer there finishes; temp_bytes while the op runs. At one instant, frees
//     happen before allocations. Peak above memory_bytes is OOM: reported, step time still given.
//     Precisely: each allocation is held over the half-open interval [alloc, free), and a device's
//     peak is the largest level over time, so bytes held for zero time (temp_bytes of a
//     zero-length op, the unconsumed output of a zero-length op) never count.
//  6. Step time: when the last op or transfer finishes.
//  7. Lower bound: max(critical path with each op at its fastest allowed device and free
//     communication, sum over ops of fastest time / number of devices).
// Events at one instant: completions are processed first, then queued transfers start on free
// channels, then free devices start ops (devices in cluster order). Zero-length ops and transfers
// complete within the same instant, and processing repeats until that instant is quiet.
//
// Thread safety: a Simulator is immutable after construction; run() is const and may be called
// concurrently from several threads, each with its own SimWorkspace.
// Ownership: the Simulator keeps references to graph, cluster and costs; they must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/cost/cost_model.h"
#include "dplace/ir/graph.h"
#include "dplace/sim/placement.h"

namespace dplace {

struct OpTiming {
  DeviceId device;
  double start_s = 0;
  double end_s = 0;
};

struct TransferTiming {
  TensorRef tensor;
  DeviceId from;
  DeviceId to;
  int64_t bytes = 0;
  double start_s = 0;
  double end_s = 0;
};

struct DeviceStats {
  double busy_s = 0;              // total compute time
  int64_t param_bytes = 0;        // resident parameters
  int64_t peak_memory_bytes = 0;  // including parameters
};

struct OomDevice {
  DeviceId device;
  int64_t peak_memory_bytes = 0;
  int64_t capacity_bytes = 0;
  int64_t overflow_bytes = 0;  // peak - capacity
};

struct SimResult {
  double step_time_s = 0;
  bool feasible = true;  // false when any device is OOM
  std::vector<OomDevice> oom_devices;
  std::vector<DeviceStats> devices;  // indexed by DeviceId
  int64_t num_transfers = 0;
  int64_t transferred_bytes = 0;
  // Filled only with SimOptions::record_timeline.
  std::vector<OpTiming> ops;              // indexed by OpId
  std::vector<TransferTiming> transfers;  // in start order

  // Sum over the OOM devices of peak - capacity (0 when feasible).
  int64_t total_overflow_bytes() const {
    int64_t sum = 0;
    for (const OomDevice& o : oom_devices) sum += o.overflow_bytes;
    return sum;
  }
};

// Called as the simulation proceeds; both calls happen when the activity starts (its end is
// already known, since nothing is preempted). Default implementations do nothing.
class SimObserver {
 public:
  virtual ~SimObserver() = default;
  virtual void on_op(OpId /*op*/, const OpTiming& /*timing*/) {}
  virtual void on_transfer(const TransferTiming& /*timing*/) {}
};

struct SimOptions {
  bool record_timeline = false;     // Default: off (the search loop needs only the summary).
  SimObserver* observer = nullptr;  // Default: none. Not owned.
};

// Per-thread scratch state of a run. Opaque; create one per thread and reuse it.
class SimWorkspace {
 public:
  SimWorkspace();
  ~SimWorkspace();
  SimWorkspace(SimWorkspace&&) noexcept;
  SimWorkspace& operator=(SimWorkspace&&) noexcept;

  struct State;
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

class Simulator {
 public:
  Simulator(const Graph& graph, const Cluster& cluster, const CostTable& costs);

  const Graph& graph() const { return graph_; }
  const Cluster& cluster() const { return cluster_; }
  const CostTable& costs() const { return costs_; }

  // docs/simulator.md; computed once at construction.
  double lower_bound_s() const { return lower_bound_s_; }

  // Simulates one placement into `result` (its vectors are reused).
  // REQUIRES: placement_problem(graph, cluster, costs, placement) is empty (DPLACE_DCHECK).
  void run(const Placement& placement, SimWorkspace& workspace, SimResult& result,
           const SimOptions& options = {}) const;
  // Convenience: a fresh workspace and result.
  SimResult run(const Placement& placement, const SimOptions& options = {}) const;

 private:
  const Graph& graph_;
  const Cluster& cluster_;
  const CostTable& costs_;
  double lower_bound_s_ = 0;

  // Static data laid out for the hot loop (filled at construction). Internally ops are numbered
  // by topological rank and tensors by (producer rank, output index); see simulator.cc.
  struct OpInfo {
    uint32_t input_begin = 0;  // distinct input tensors: inputs_[input_begin, input_end)
    uint32_t input_end = 0;
    uint32_t output_begin = 0;  // output tensors: [output_begin, output_end)
    uint32_t output_end = 0;
    int64_t start_bytes = 0;  // outputs + temp, allocated when the op starts
    int64_t temp_bytes = 0;
  };
  struct TensorInfo {
    uint32_t consumer_begin = 0;  // distinct consumer ops: consumers_[begin, end)
    uint32_t consumer_end = 0;
    uint32_t producer = 0;
    int64_t bytes = 0;
  };
  size_t num_ops_ = 0;
  size_t num_devices_ = 0;
  size_t max_transfers_ = 0;  // sum over tensors of min(consumers, devices - 1)
  std::vector<OpInfo> ops_;
  std::vector<TensorInfo> tensors_;
  std::vector<uint32_t> inputs_;
  std::vector<uint32_t> consumers_;
  std::vector<uint32_t> op_of_rank_;  // Graph::topo_order: internal id -> OpId
  std::vector<int64_t> param_bytes_;  // per op
  std::vector<double> times_;         // op * num_devices + device; copy of the cost table
  std::vector<Link> channel_link_;    // from * num_devices + to
  std::vector<uint8_t> channel_has_link_;
};

}  // namespace dplace
