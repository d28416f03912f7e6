#include "dplace/sim/simulator.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "dplace/core/error.h"

// Implementation notes.
//
// Ops are numbered internally by their topological rank, and tensors by (producer rank, output
// index), so per-op and per-tensor arrays are visited roughly in order. Time advances over
// "instants" (distinct event times), numbered 0, 1, 2, ... in increasing time. Because readiness
// and transfer requests only ever happen at the current instant, "became ready earliest, then
// lower topo rank" is the order of the 64-bit key (instant << 32 | internal op id), and the channel
// order "requested earliest, then producer rank, then output index" is the order of
// (instant << 32 | internal tensor id). (The destination tie-break of semantics 4 never applies
// inside one channel: every request on channel a->b has destination b.) Ready queues and channel
// queues are sorted arrays of such keys (sorted_push) in two flat pools that each run partitions
// by the counts it knows from the placement, so a run needs no memory beyond what the first run
// sized.
//
// Memory: every allocation is held over the half-open interval [alloc, free), so at one instant
// frees precede allocations and something held for zero time (temp_bytes of a zero-length op, the
// unconsumed output of a zero-length op) counts nothing. A device's peak is therefore its level
// after an instant has settled.

namespace dplace {

namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kLowMask = 0xffffffffULL;
// On clusters up to this size, a run clears whole per-device rows and samples every device's
// memory level at the end of each instant instead of tracking which devices need it.
constexpr uint32_t kSmallCluster = 16;

// The end of an activity: code < num_devices is the op running on device `code`; otherwise the
// transfer on channel `code - num_devices`.
struct Event {
  double time_s;
  uint32_t code;
};

// Binary min-heap of events by time on heap[0, size). Events at equal times may come out in any
// order: everything done at one instant is independent of the order of its completions.
inline void event_push(Event* heap, uint32_t& size, Event e) {
  uint32_t i = size++;
  while (i > 0) {
    const uint32_t parent = (i - 1) >> 1;
    if (heap[parent].time_s <= e.time_s) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = e;
}

// Removes the earliest event. Bottom-up: the hole at the root sinks to a leaf along the earlier
// child (a branch-free choice thanks to the +inf sentinel kept at heap[size]), then the last event
// rises from there. The slot the pop frees holds the sentinel. REQUIRES: size > 0.
inline void event_pop(Event* heap, uint32_t& size) {
  const Event last = heap[--size];
  const uint32_t n = size;
  heap[n].time_s = kInfiniteTime;  // sentinel: a missing right child never wins
  uint32_t i = 0;
  for (uint32_t child = 1; child < n; child = 2 * i + 1) {
    child += heap[child + 1].time_s < heap[child].time_s ? 1 : 0;
    heap[i] = heap[child];
    i = child;
  }
  while (i > 0) {
    const uint32_t parent = (i - 1) >> 1;
    if (heap[parent].time_s <= last.time_s) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = last;
}

// Sorts a short list ascending (the per-round lists hold a few devices or channels).
inline void sort_small(uint32_t* a, uint32_t n) {
  for (uint32_t i = 1; i < n; ++i) {
    const uint32_t v = a[i];
    uint32_t j = i;
    while (j > 0 && a[j - 1] > v) {
      a[j] = a[j - 1];
      --j;
    }
    a[j] = v;
  }
}

// A queue of 64-bit keys in queue[head, tail), kept sorted ascending. Keys arrive at the current
// instant, so they are nearly always the largest so far: a push is an append, and an out-of-order
// key (several completions at one instant) is placed by binary search. Every op enters its
// device's queue once per run and every transfer its channel's queue once, so the slices the run
// reserves never overflow and never wrap.
inline void sorted_push(uint64_t* queue, uint32_t head, uint32_t& tail, uint64_t key) {
  uint64_t* const end = queue + tail++;
  if (end == queue + head || end[-1] < key) {
    *end = key;
    return;
  }
  uint64_t* const at = std::upper_bound(queue + head, end, key);
  std::memmove(at + 1, at, static_cast<size_t>(end - at) * sizeof(uint64_t));
  *at = key;
}

}  // namespace

struct SimWorkspace::State {
  // Dimensions this state was sized for.
  size_t num_ops = kNone;
  size_t num_devices = kNone;
  size_t num_tensors = kNone;
  size_t max_transfers = kNone;

  std::vector<uint32_t> device_of;       // per op
  std::vector<uint32_t> pending;         // per op: input tensors not yet present on its device
  std::vector<int32_t> holders;          // tensor * D + device: users of that copy still to finish
  std::vector<uint64_t> ready_pool;      // ready ops, sorted per device (see sorted_push)
  std::vector<uint32_t> ready_head;      // per device, into ready_pool
  std::vector<uint32_t> ready_tail;      // per device
  std::vector<uint64_t> channel_pool;    // requested transfers, sorted per channel
  std::vector<uint32_t> channel_head;    // per channel, into channel_pool
  std::vector<uint32_t> channel_tail;    // per channel
  std::vector<uint32_t> channel_tensor;  // per channel: tensor in flight or kNone
  std::vector<uint32_t> device_op;       // per device: op running or kNone
  std::vector<int64_t> level_bytes;      // per device
  std::vector<int64_t> peak_bytes;       // per device
  std::vector<int64_t> param_bytes;      // per device
  std::vector<double> busy_s;            // per device
  std::vector<uint32_t> stamp;           // per device: last tensor that requested a transfer to it
  std::vector<uint32_t> touched;         // per device: allocated during this instant
  std::vector<uint32_t> touched_list;
  std::vector<uint32_t> device_flag;   // per device: in device_todo
  std::vector<uint32_t> device_todo;   // devices that may start an op this round
  std::vector<uint32_t> channel_flag;  // per channel: in channel_todo
  std::vector<uint32_t> channel_todo;  // channels that may start a transfer this round
  std::vector<Event> events;           // heap; at most one per device and per channel

  void size_for(size_t n, size_t d, size_t t, size_t max_transfers_bound) {
    if (n == num_ops && d == num_devices && t == num_tensors &&
        max_transfers_bound == max_transfers) {
      return;
    }
    num_ops = n;
    num_devices = d;
    num_tensors = t;
    max_transfers = max_transfers_bound;
    const size_t c = d * d;
    device_of.assign(n, 0);
    pending.assign(n, 0);
    holders.assign(t * d, 0);
    ready_pool.assign(n, 0);
    ready_head.assign(d, 0);
    ready_tail.assign(d, 0);
    channel_pool.assign(max_transfers_bound, 0);
    channel_head.assign(c, 0);
    channel_tail.assign(c, 0);
    channel_tensor.assign(c, kNone);
    device_op.assign(d, kNone);
    level_bytes.assign(d, 0);
    peak_bytes.assign(d, 0);
    param_bytes.assign(d, 0);
    busy_s.assign(d, 0);
    stamp.assign(d, kNone);
    touched.assign(d, 0);
    touched_list.assign(d, 0);
    device_flag.assign(d, 0);
    device_todo.assign(d, 0);
    channel_flag.assign(c, 0);
    channel_todo.assign(c, 0);
    events.assign(d + c, Event{});
  }
};

SimWorkspace::SimWorkspace() : state_(std::make_unique<State>()) {}
SimWorkspace::~SimWorkspace() = default;
SimWorkspace::SimWorkspace(SimWorkspace&&) noexcept = default;
SimWorkspace& SimWorkspace::operator=(SimWorkspace&&) noexcept = default;

Simulator::Simulator(const Graph& graph, const Cluster& cluster, const CostTable& costs)
    : graph_(graph), cluster_(cluster), costs_(costs) {
  num_ops_ = graph.num_ops();
  num_devices_ = cluster.num_devices();
  DPLACE_CHECK(costs.num_ops() == num_ops_ && costs.num_devices() == num_devices_)
      << "Simulator: cost table does not match graph '" << graph.name() << "' and cluster '"
      << cluster.name() << "'";
  const size_t n = num_ops_;
  const size_t d = num_devices_;

  // Internal op ids are topological ranks; internal tensor ids follow (producer rank, output).
  op_of_rank_.resize(n);
  for (size_t r = 0; r < n; ++r) op_of_rank_[r] = graph.topo_order()[r].value();
  ops_.assign(n, OpInfo{});
  size_t num_tensors = 0;
  for (size_t r = 0; r < n; ++r) {
    ops_[r].output_begin = static_cast<uint32_t>(num_tensors);
    num_tensors += graph.num_outputs(OpId(op_of_rank_[r]));
    DPLACE_CHECK(num_tensors < kNone) << "Simulator: too many tensors";
    ops_[r].output_end = static_cast<uint32_t>(num_tensors);
  }
  auto tensor_id = [&](TensorRef t) { return ops_[graph.topo_rank(t.op)].output_begin + t.output; };

  tensors_.assign(num_tensors, TensorInfo{});
  consumers_.clear();
  consumers_.reserve(graph.num_edges());
  max_transfers_ = 0;
  for (size_t r = 0; r < n; ++r) {
    const OpId id(op_of_rank_[r]);
    for (uint32_t k = 0; k < graph.num_outputs(id); ++k) {
      TensorInfo& t = tensors_[ops_[r].output_begin + k];
      t.producer = static_cast<uint32_t>(r);
      t.bytes = graph.tensor_bytes({id, k});
      t.consumer_begin = static_cast<uint32_t>(consumers_.size());
      const auto cons = graph.consumers({id, k});
      for (OpId c : cons) consumers_.push_back(graph.topo_rank(c));
      std::sort(consumers_.begin() + t.consumer_begin, consumers_.end());
      t.consumer_end = static_cast<uint32_t>(consumers_.size());
      max_transfers_ += std::min(cons.size(), d - 1);
    }
  }

  // Distinct input tensors per op, in order of first appearance.
  inputs_.clear();
  for (size_t r = 0; r < n; ++r) {
    const size_t first = inputs_.size();
    for (const TensorRef& in : graph.op(OpId(op_of_rank_[r])).inputs) {
      const uint32_t t = tensor_id(in);
      if (std::find(inputs_.begin() + first, inputs_.end(), t) == inputs_.end()) {
        inputs_.push_back(t);
      }
    }
    ops_[r].input_begin = static_cast<uint32_t>(first);
    ops_[r].input_end = static_cast<uint32_t>(inputs_.size());
  }

  param_bytes_.resize(n);
  times_.resize(n * d);
  for (size_t r = 0; r < n; ++r) {
    const OpId id(op_of_rank_[r]);
    const Op& op = graph.op(id);
    int64_t out = 0;
    for (int64_t b : op.output_bytes) out += b;
    ops_[r].start_bytes = out + op.temp_bytes;
    ops_[r].temp_bytes = op.temp_bytes;
    param_bytes_[r] = op.param_bytes;
    for (size_t k = 0; k < d; ++k) times_[r * d + k] = costs.time_s(id, DeviceId::from_index(k));
  }

  channel_link_.assign(d * d, Link{});
  channel_has_link_.assign(d * d, 0);
  for (size_t a = 0; a < d; ++a) {
    for (size_t b = 0; b < d; ++b) {
      if (a == b) continue;
      const Link* link = cluster.link(DeviceId::from_index(a), DeviceId::from_index(b));
      if (link != nullptr) {
        channel_link_[a * d + b] = *link;
        channel_has_link_[a * d + b] = 1;
      }
    }
  }

  // docs/simulator.md: longest path with each op at its fastest allowed time and free
  // communication, and total fastest work spread evenly over the devices.
  std::vector<double> finish_s(n, 0);
  double critical_s = 0;
  double total_s = 0;
  for (OpId id : graph.topo_order()) {
    double start_s = 0;
    for (OpId p : graph.predecessors(id)) start_s = std::max(start_s, finish_s[p.value()]);
    const double fastest = costs.fastest_time_s(id);
    finish_s[id.value()] = start_s + fastest;
    critical_s = std::max(critical_s, finish_s[id.value()]);
    total_s += fastest;
  }
  lower_bound_s_ = std::max(critical_s, total_s / static_cast<double>(d));
}

SimResult Simulator::run(const Placement& placement, const SimOptions& options) const {
  SimWorkspace workspace;
  SimResult result;
  run(placement, workspace, result, options);
  return result;
}

void Simulator::run(const Placement& placement, SimWorkspace& workspace, SimResult& result,
                    const SimOptions& options) const {
  DPLACE_CHECK(placement.device_of_op.size() == num_ops_)
      << "Simulator::run: placement has " << placement.device_of_op.size() << " entries for "
      << num_ops_ << " ops";
  DPLACE_DCHECK(placement_problem(graph_, cluster_, costs_, placement).empty())
      << placement_problem(graph_, cluster_, costs_, placement);

  const uint32_t n = static_cast<uint32_t>(num_ops_);
  const uint32_t nd = static_cast<uint32_t>(num_devices_);
  const uint32_t nc = nd * nd;
  const uint32_t num_tensors = static_cast<uint32_t>(tensors_.size());
  SimWorkspace::State& s = workspace.state();
  s.size_for(n, nd, num_tensors, max_transfers_);
  const bool record = options.record_timeline;
  SimObserver* const observer = options.observer;

  // Raw pointers and locals for the hot loop (no stores through char-typed pointers, so the
  // compiler keeps them in registers).
  uint32_t* const device_of = s.device_of.data();
  uint32_t* const pending = s.pending.data();
  int32_t* const holders = s.holders.data();
  uint64_t* const ready_pool = s.ready_pool.data();
  uint32_t* const ready_head = s.ready_head.data();
  uint32_t* const ready_tail = s.ready_tail.data();
  uint64_t* const channel_pool = s.channel_pool.data();
  uint32_t* const channel_head = s.channel_head.data();
  uint32_t* const channel_tail = s.channel_tail.data();
  uint32_t* const channel_tensor = s.channel_tensor.data();
  uint32_t* const device_op = s.device_op.data();
  int64_t* const level = s.level_bytes.data();
  int64_t* const peak = s.peak_bytes.data();
  int64_t* const params = s.param_bytes.data();
  double* const busy = s.busy_s.data();
  uint32_t* const stamp = s.stamp.data();
  uint32_t* const touched = s.touched.data();
  uint32_t* const touched_list = s.touched_list.data();
  uint32_t* const device_flag = s.device_flag.data();
  uint32_t* const device_todo = s.device_todo.data();
  uint32_t* const channel_flag = s.channel_flag.data();
  uint32_t* const channel_todo = s.channel_todo.data();
  Event* const events = s.events.data();
  const OpInfo* const ops = ops_.data();
  const TensorInfo* const tensors = tensors_.data();
  const uint32_t* const inputs = inputs_.data();
  const uint32_t* const consumers = consumers_.data();
  const uint32_t* const op_of_rank = op_of_rank_.data();
  const double* const times = times_.data();
  const Link* const channel_link = channel_link_.data();
  const int64_t* const param_bytes = param_bytes_.data();

  // ---- Per-placement set-up: device of each op, queue partitions, holder counts, parameters.
  for (uint32_t k = 0; k < nd; ++k) {
    ready_tail[k] = 0;
    params[k] = 0;
  }
  for (uint32_t c = 0; c < nc; ++c) channel_tail[c] = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t dv = placement.device_of_op[op_of_rank[i]].value();
    DPLACE_CHECK(dv < nd && times[static_cast<size_t>(i) * nd + dv] != kInfiniteTime)
        << "Simulator::run: op '" << graph_.op(OpId(op_of_rank[i])).name
        << "' is not on an allowed device";
    device_of[i] = dv;
    pending[i] = ops[i].input_end - ops[i].input_begin;
    ++ready_tail[dv];  // ops per device, turned into offsets below
    params[dv] += param_bytes[i];
  }
  for (uint32_t t = 0; t < num_tensors; ++t) {
    const TensorInfo& info = tensors[t];
    const uint32_t pd = device_of[info.producer];
    int32_t* const h = holders + static_cast<size_t>(t) * nd;
    if (nd <= kSmallCluster) {
      for (uint32_t k = 0; k < nd; ++k) h[k] = 0;
    } else {  // clear only the slots this tensor uses
      h[pd] = 0;
      for (uint32_t j = info.consumer_begin; j < info.consumer_end; ++j) {
        h[device_of[consumers[j]]] = 0;
      }
    }
    for (uint32_t j = info.consumer_begin; j < info.consumer_end; ++j) {
      // The first consumer on another device adds a transfer, which also holds the producer's
      // copy (branch-free: with a scattered placement this test is unpredictable).
      const uint32_t cd = device_of[consumers[j]];
      const uint32_t first_remote = static_cast<uint32_t>(h[cd]++ == 0) & (cd != pd);
      h[pd] += static_cast<int32_t>(first_remote);
      channel_tail[pd * nd + cd] += first_remote;  // transfers per channel, made offsets below
    }
  }
  {
    uint32_t offset = 0;
    for (uint32_t k = 0; k < nd; ++k) {
      const uint32_t count = ready_tail[k];
      ready_head[k] = ready_tail[k] = offset;
      offset += count;
    }
    offset = 0;
    for (uint32_t c = 0; c < nc; ++c) {
      DPLACE_CHECK(channel_tail[c] == 0 || channel_has_link_[c])
          << "Simulator::run: a tensor must move '" << cluster_.device(DeviceId(c / nd)).name
          << "' -> '" << cluster_.device(DeviceId(c % nd)).name << "' but there is no link";
      const uint32_t count = channel_tail[c];
      channel_head[c] = channel_tail[c] = offset;
      offset += count;
      channel_tensor[c] = kNone;
      channel_flag[c] = 0;
    }
    DPLACE_CHECK(offset <= max_transfers_);
  }
  uint32_t num_device_todo = 0;
  for (uint32_t k = 0; k < nd; ++k) {
    device_op[k] = kNone;
    stamp[k] = kNone;
    level[k] = params[k];
    peak[k] = params[k];
    busy[k] = 0;
    touched[k] = 0;
    device_flag[k] = 1;
    device_todo[num_device_todo++] = k;
  }
  uint32_t num_channel_todo = 0;
  uint32_t num_touched = 0;
  uint32_t num_events = 0;
  int64_t num_transfers = 0;
  int64_t transferred_bytes = 0;
  uint32_t ops_started = 0;

  result.transfers.clear();
  if (record) {
    result.ops.assign(n, OpTiming{});
  } else {
    result.ops.clear();
  }

  uint64_t instant = 0;
  double now = 0;

  auto make_ready = [&](uint32_t op, uint32_t dv) {
    sorted_push(ready_pool, ready_head[dv], ready_tail[dv], (instant << 32) | op);
    if (device_op[dv] == kNone && !device_flag[dv]) {
      device_flag[dv] = 1;
      device_todo[num_device_todo++] = dv;
    }
  };
  // Peaks are sampled when an instant has settled: on every device when there are few (cheaper
  // than bookkeeping), else on the devices that allocated during the instant.
  const bool sample_all = nd <= kSmallCluster;
  auto touch = [&](uint32_t dv) {
    if (!sample_all && !touched[dv]) {
      touched[dv] = 1;
      touched_list[num_touched++] = dv;
    }
  };

  for (uint32_t i = 0; i < n; ++i) {
    if (pending[i] == 0) make_ready(i, device_of[i]);
  }

  for (;;) {
    // Settle the current instant.
    for (;;) {
      // 1. Completions.
      while (num_events > 0 && events[0].time_s <= now) {
        const uint32_t code = events[0].code;
        event_pop(events, num_events);
        if (code < nd) {
          const uint32_t dv = code;
          const OpInfo& op = ops[device_op[dv]];
          device_op[dv] = kNone;
          if (ready_tail[dv] > ready_head[dv] && !device_flag[dv]) {
            device_flag[dv] = 1;
            device_todo[num_device_todo++] = dv;
          }
          int64_t freed = op.temp_bytes;
          for (uint32_t j = op.input_begin; j < op.input_end; ++j) {
            const uint32_t t = inputs[j];
            if (--holders[static_cast<size_t>(t) * nd + dv] == 0) freed += tensors[t].bytes;
          }
          for (uint32_t t = op.output_begin; t < op.output_end; ++t) {
            const TensorInfo& info = tensors[t];
            if (info.consumer_begin == info.consumer_end) {
              freed += info.bytes;  // nobody consumes it
              continue;
            }
            for (uint32_t j = info.consumer_begin; j < info.consumer_end; ++j) {
              const uint32_t c = consumers[j];
              const uint32_t cd = device_of[c];
              if (cd == dv) {
                if (--pending[c] == 0) make_ready(c, cd);
              } else if (stamp[cd] != t) {
                stamp[cd] = t;
                const uint32_t ch = dv * nd + cd;
                sorted_push(channel_pool, channel_head[ch], channel_tail[ch], (instant << 32) | t);
                if (channel_tensor[ch] == kNone && !channel_flag[ch]) {
                  channel_flag[ch] = 1;
                  channel_todo[num_channel_todo++] = ch;
                }
              }
            }
          }
          level[dv] -= freed;
        } else {
          const uint32_t ch = code - nd;
          const uint32_t t = channel_tensor[ch];
          channel_tensor[ch] = kNone;
          if (channel_tail[ch] > channel_head[ch] && !channel_flag[ch]) {
            channel_flag[ch] = 1;
            channel_todo[num_channel_todo++] = ch;
          }
          const uint32_t from = ch / nd;
          const uint32_t to = ch - from * nd;
          const TensorInfo& info = tensors[t];
          if (--holders[static_cast<size_t>(t) * nd + from] == 0) level[from] -= info.bytes;
          for (uint32_t j = info.consumer_begin; j < info.consumer_end; ++j) {
            const uint32_t c = consumers[j];
            if (device_of[c] == to && --pending[c] == 0) make_ready(c, to);
          }
        }
      }

      // 2. Queued transfers start on free channels, in channel order.
      if (num_channel_todo > 0) {
        sort_small(channel_todo, num_channel_todo);
        for (uint32_t i = 0; i < num_channel_todo; ++i) {
          const uint32_t ch = channel_todo[i];
          channel_flag[ch] = 0;
          const uint64_t key = channel_pool[channel_head[ch]++];
          const uint32_t t = static_cast<uint32_t>(key & kLowMask);
          const uint32_t from = ch / nd;
          const uint32_t to = ch - from * nd;
          const int64_t bytes = tensors[t].bytes;
          // transfer_time_s(bytes, link), written out so that it inlines.
          const Link& link = channel_link[ch];
          const double end =
              now + (link.latency_s + static_cast<double>(bytes) / link.bandwidth_bytes_per_s);
          channel_tensor[ch] = t;
          level[to] += bytes;
          touch(to);
          ++num_transfers;
          transferred_bytes += bytes;
          event_push(events, num_events, Event{end, nd + ch});
          if (record || observer != nullptr) {
            const uint32_t producer = tensors[t].producer;
            const TransferTiming timing{
                .tensor = {OpId(op_of_rank[producer]), t - ops[producer].output_begin},
                .from = DeviceId(from),
                .to = DeviceId(to),
                .bytes = bytes,
                .start_s = now,
                .end_s = end};
            if (record) result.transfers.push_back(timing);
            if (observer != nullptr) observer->on_transfer(timing);
          }
        }
        num_channel_todo = 0;
      }

      // 3. Free devices start their best ready op, in cluster order.
      if (num_device_todo > 0) {
        sort_small(device_todo, num_device_todo);
        for (uint32_t i = 0; i < num_device_todo; ++i) {
          const uint32_t dv = device_todo[i];
          device_flag[dv] = 0;
          if (device_op[dv] != kNone || ready_tail[dv] == ready_head[dv]) continue;
          const uint64_t key = ready_pool[ready_head[dv]++];
          const uint32_t op = static_cast<uint32_t>(key & kLowMask);
          const double duration = times[static_cast<size_t>(op) * nd + dv];
          const double end = now + duration;
          device_op[dv] = op;
          level[dv] += ops[op].start_bytes;
          touch(dv);
          busy[dv] += duration;
          ++ops_started;
          event_push(events, num_events, Event{end, dv});
          if (record || observer != nullptr) {
            const OpTiming timing{.device = DeviceId(dv), .start_s = now, .end_s = end};
            if (record) result.ops[op_of_rank[op]] = timing;
            if (observer != nullptr) observer->on_op(OpId(op_of_rank[op]), timing);
          }
        }
        num_device_todo = 0;
      }

      if (num_events == 0 || events[0].time_s > now) break;
    }

    if (sample_all) {
      for (uint32_t k = 0; k < nd; ++k) peak[k] = std::max(peak[k], level[k]);
    } else {
      for (uint32_t i = 0; i < num_touched; ++i) {
        const uint32_t dv = touched_list[i];
        peak[dv] = std::max(peak[dv], level[dv]);
        touched[dv] = 0;
      }
      num_touched = 0;
    }

    if (num_events == 0) break;
    now = events[0].time_s;
    ++instant;
  }
  DPLACE_CHECK(ops_started == n) << "Simulator::run: only " << ops_started << " of " << n
                                 << " ops ran (invalid placement?)";

  result.step_time_s = now;
  result.num_transfers = num_transfers;
  result.transferred_bytes = transferred_bytes;
  result.oom_devices.clear();
  result.oom_devices.reserve(nd);
  result.devices.resize(nd);
  for (uint32_t k = 0; k < nd; ++k) {
    DeviceStats& stats = result.devices[k];
    stats.busy_s = busy[k];
    stats.param_bytes = params[k];
    stats.peak_memory_bytes = peak[k];
    const int64_t capacity = cluster_.device(DeviceId(k)).memory_bytes;
    if (stats.peak_memory_bytes > capacity) {
      result.oom_devices.push_back({.device = DeviceId(k),
                                    .peak_memory_bytes = stats.peak_memory_bytes,
                                    .capacity_bytes = capacity,
                                    .overflow_bytes = stats.peak_memory_bytes - capacity});
    }
  }
  result.feasible = result.oom_devices.empty();
}

}  // namespace dplace
