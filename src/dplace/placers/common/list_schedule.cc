#include "dplace/placers/common/list_schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "dplace/core/error.h"
#include "dplace/placers/common/memory.h"

namespace dplace {

ListSchedule::ListSchedule(const PlaceRequest& request, const GroupGraph& groups,
                           std::vector<int64_t> memory_limits, ListScheduleOptions options)
    : graph_(*request.graph),
      cluster_(*request.cluster),
      costs_(*request.costs),
      groups_(groups),
      limits_(std::move(memory_limits)),
      options_(options),
      num_devices_(request.cluster->num_devices()) {
  DPLACE_CHECK(limits_.size() == num_devices_);
  const size_t n = graph_.num_ops();
  tensor_begin_.assign(n + 1, 0);
  output_total_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const OpId op = OpId::from_index(i);
    tensor_begin_[i + 1] = tensor_begin_[i] + static_cast<uint32_t>(graph_.num_outputs(op));
    for (uint32_t k = 0; k < graph_.num_outputs(op); ++k) {
      producer_.push_back(static_cast<uint32_t>(i));
      tensor_bytes_.push_back(graph_.tensor_bytes({op, k}));
      consumers_left_.push_back(static_cast<uint32_t>(graph_.consumers({op, k}).size()));
      output_total_[i] += graph_.tensor_bytes({op, k});
    }
  }
  input_begin_.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const size_t first = inputs_.size();
    for (const TensorRef& t : graph_.op(OpId::from_index(i)).inputs) {
      const uint32_t flat = tensor_begin_[t.op.value()] + t.output;
      if (std::find(inputs_.begin() + first, inputs_.end(), flat) == inputs_.end()) {
        inputs_.push_back(flat);
      }
    }
    input_begin_[i + 1] = static_cast<uint32_t>(inputs_.size());
  }
  const size_t num_tensors = producer_.size();

  device_.assign(n, DeviceId::invalid());
  finish_.assign(n, 0.0);
  unplaced_preds_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    unplaced_preds_[i] = static_cast<uint32_t>(graph_.predecessors(OpId::from_index(i)).size());
  }
  deferred_.assign(n, 0);
  if (options_.defer_free_sources) {
    for (size_t i = 0; i < n; ++i) {
      const OpId op = OpId::from_index(i);
      if (!is_free_source(graph_, groups_, costs_, op)) continue;
      deferred_[i] = 1;
      for (OpId s : graph_.successors(op)) --unplaced_preds_[s.value()];
    }
  }
  pinned_.assign(graph_.num_groups(), DeviceId::invalid());
  candidates_.resize(graph_.num_groups());
  for (size_t g = 0; g < graph_.num_groups(); ++g) {
    const std::vector<DeviceId>& allowed = groups_.allowed(GroupId::from_index(g));
    if (options_.accelerators_only) {
      for (DeviceId d : allowed) {
        if (cluster_.device(d).kind != DeviceKind::kCpu) candidates_[g].push_back(d);
      }
    }
    if (candidates_[g].empty()) candidates_[g] = allowed;
  }
  arrival_.assign(num_tensors * num_devices_, -1.0);
  channel_free_s_.assign(num_devices_ * num_devices_, 0.0);
  channel_busy_.resize(options_.insertion ? num_devices_ * num_devices_ : 0);
  device_free_s_.assign(num_devices_, 0.0);
  busy_.resize(num_devices_);
  reserved_params_.assign(num_devices_, 0);
  live_.assign(num_devices_, 0);
  peak_live_.assign(num_devices_, 0);
}

std::vector<OpId> ListSchedule::take_ready() {
  if (!sources_taken_) {
    sources_taken_ = true;
    for (size_t i = 0; i < graph_.num_ops(); ++i) {
      if (unplaced_preds_[i] == 0 && !deferred_[i]) ready_.push_back(OpId::from_index(i));
    }
  }
  std::vector<OpId> out;
  out.swap(ready_);
  std::sort(out.begin(), out.end(),
            [&](OpId a, OpId b) { return graph_.topo_rank(a) < graph_.topo_rank(b); });
  return out;
}

std::span<const DeviceId> ListSchedule::devices_for(OpId op) const {
  const GroupId g = graph_.group_of(op);
  if (pinned_[g.value()].valid()) return {&pinned_[g.value()], 1};
  return candidates_[g.value()];
}

bool ListSchedule::group_pinned(OpId op) const {
  return pinned_[graph_.group_of(op).value()].valid();
}

DeviceId ListSchedule::deferred_device(OpId source, DeviceId d) const {
  const GroupId g = graph_.group_of(source);
  if (pinned_[g.value()].valid()) return pinned_[g.value()];
  if (groups_.allows(g, d)) return d;
  DeviceId best = DeviceId::invalid();
  for (DeviceId c : candidates_[g.value()]) {
    if (!best.valid() || free_bytes(c) > free_bytes(best)) best = c;
  }
  return best;
}

int64_t ListSchedule::bytes_needed(OpId op, DeviceId d) const {
  const GroupId g = graph_.group_of(op);
  const size_t dv = d.value();
  int64_t incoming = 0;
  int64_t params = reserved_params_[dv] + (pinned_[g.value()].valid() ? 0 : groups_.param_bytes(g));
  // Deferred producers that would come along to d, each group once.
  GroupId along[8];
  size_t num_along = 0;
  for (uint32_t j = input_begin_[op.value()]; j < input_begin_[op.value() + 1]; ++j) {
    const uint32_t t = inputs_[j];
    const OpId p = OpId::from_index(producer_[t]);
    if (deferred(p)) {
      const GroupId pg = graph_.group_of(p);
      if (deferred_device(p, d) == d) {
        incoming += output_total_[p.value()];
        if (pg != g && std::find(along, along + num_along, pg) == along + num_along) {
          if (num_along < 8) along[num_along++] = pg;
          params += groups_.param_bytes(pg);
        }
      } else {
        incoming += tensor_bytes_[t];
      }
      continue;
    }
    if (device_[p.value()] != d && arrival_[t * num_devices_ + dv] < 0)
      incoming += tensor_bytes_[t];
  }
  const int64_t live_now =
      live_[dv] + incoming + output_total_[op.value()] + graph_.op(op).temp_bytes;
  return params + std::max(peak_live_[dv], live_now);
}

bool ListSchedule::fits(OpId op, DeviceId d) const {
  if (pinned_[graph_.group_of(op).value()] == d) return true;
  return bytes_needed(op, d) <= limits_[d.value()];
}

double ListSchedule::first_gap(const std::vector<Interval>& busy, double ready_s,
                               double duration_s) {
  // First interval ending after ready_s; intervals are disjoint, so their ends are sorted too.
  auto it = std::lower_bound(busy.begin(), busy.end(), ready_s,
                             [](const Interval& iv, double t) { return iv.end_s <= t; });
  double t = ready_s;
  for (; it != busy.end(); ++it) {
    if (t + duration_s <= it->start_s) return t;
    t = std::max(t, it->end_s);
  }
  return t;
}

void ListSchedule::insert_interval(std::vector<Interval>& busy, double start_s, double end_s) {
  auto pos = std::lower_bound(busy.begin(), busy.end(), start_s,
                              [](const Interval& iv, double t) { return iv.start_s < t; });
  busy.insert(pos, {start_s, end_s});
}

double ListSchedule::device_available_s(DeviceId d, double ready_s, double duration_s) const {
  if (!options_.insertion) return std::max(ready_s, device_free_s_[d.value()]);
  return first_gap(busy_[d.value()], ready_s, duration_s);
}

double ListSchedule::channel_start_s(size_t channel, double ready_s, double duration_s) const {
  if (!options_.insertion) return std::max(ready_s, channel_free_s_[channel]);
  return first_gap(channel_busy_[channel], ready_s, duration_s);
}

double ListSchedule::pending_channel_start_s(size_t channel, double ready_s, double duration_s,
                                             const std::vector<PendingTransfer>& pending) const {
  if (!options_.insertion) {
    double start = channel_start_s(channel, ready_s, duration_s);
    for (const PendingTransfer& p : pending) {
      if (p.channel == channel) start = std::max(start, p.end_s);
    }
    return start;
  }
  // The first gap of the booked intervals, moved past every pending one it overlaps: no start
  // before a pending interval's end can hold the transfer once it overlaps that interval.
  double start = channel_start_s(channel, ready_s, duration_s);
  for (bool moved = true; moved;) {
    moved = false;
    for (const PendingTransfer& p : pending) {
      if (p.channel == channel && start < p.end_s && p.start_s < start + duration_s) {
        start = channel_start_s(channel, p.end_s, duration_s);
        moved = true;
      }
    }
  }
  return start;
}

double ListSchedule::start_s(OpId op, DeviceId d) const {
  const size_t dv = d.value();
  double ready = 0;
  // This op's new transfers, booked here as place() would book them, in input order.
  pending_.clear();
  for (uint32_t j = input_begin_[op.value()]; j < input_begin_[op.value() + 1]; ++j) {
    const uint32_t t = inputs_[j];
    const OpId p = OpId::from_index(producer_[t]);
    DeviceId from = device_[p.value()];
    double produced = finish_[p.value()];
    if (deferred(p)) {
      from = deferred_device(p, d);
      produced = 0;
    }
    if (from == d) {
      ready = std::max(ready, produced);
      continue;
    }
    const double arrived = deferred(p) ? -1.0 : arrival_[t * num_devices_ + dv];
    if (arrived >= 0) {
      ready = std::max(ready, arrived);
      continue;
    }
    const Link* link = cluster_.link(from, d);
    if (!link) return kInfiniteTime;
    const size_t c = cluster_.channel_index(from, d);
    const double duration = transfer_time_s(tensor_bytes_[t], *link);
    const double start = pending_channel_start_s(c, produced, duration, pending_);
    pending_.push_back({c, start, start + duration});
    ready = std::max(ready, start + duration);
  }
  return device_available_s(d, ready, costs_.time_s(op, d));
}

double ListSchedule::finish_s_on(OpId op, DeviceId d) const {
  const double s = start_s(op, d);
  return s == kInfiniteTime ? kInfiniteTime : s + costs_.time_s(op, d);
}

void ListSchedule::pin_group(GroupId g, DeviceId d) {
  DPLACE_CHECK(!pinned_[g.value()].valid());
  DPLACE_CHECK(groups_.allows(g, d)) << "group pinned to a device it does not allow";
  pinned_[g.value()] = d;
  reserved_params_[d.value()] += groups_.param_bytes(g);
  for (OpId member : graph_.group_ops(g)) {
    if (deferred(member)) materialize(member, d);
  }
}

void ListSchedule::materialize(OpId source, DeviceId d) {
  const size_t i = source.value();
  const GroupId g = graph_.group_of(source);
  if (!pinned_[g.value()].valid()) {
    device_[i] = d;  // before pin_group, which places the group's other deferred ops
    pin_group(g, d);
  }
  DPLACE_CHECK(pinned_[g.value()] == d) << "deferred op placed off its group's device";
  device_[i] = d;
  finish_[i] = 0;
  ++num_placed_;
  last_materialized_.push_back(source);
  live_[d.value()] += output_total_[i];
  peak_live_[d.value()] = std::max(peak_live_[d.value()], live_[d.value()]);
  for (uint32_t t = tensor_begin_[i]; t < tensor_begin_[i + 1]; ++t) {
    if (consumers_left_[t] == 0) free_tensor(t);
  }
}

void ListSchedule::place(OpId op, DeviceId d, double not_before_s) {
  const size_t i = op.value();
  const size_t dv = d.value();
  DPLACE_CHECK(!placed(op)) << "op placed twice";
  last_materialized_.clear();
  if (deferred_[i]) {
    materialize(op, d);
    return;
  }
  DPLACE_CHECK(unplaced_preds_[i] == 0) << "op placed before its predecessors";
  const GroupId g = graph_.group_of(op);
  if (!pinned_[g.value()].valid()) pin_group(g, d);
  DPLACE_CHECK(pinned_[g.value()] == d) << "op placed off its colocation group's device";
  for (uint32_t j = input_begin_[i]; j < input_begin_[i + 1]; ++j) {
    const OpId p = OpId::from_index(producer_[inputs_[j]]);
    if (deferred(p)) materialize(p, deferred_device(p, d));
  }

  // Transfers, committed in input order (as start_s estimates them).
  double ready = 0;
  for (uint32_t j = input_begin_[i]; j < input_begin_[i + 1]; ++j) {
    const uint32_t t = inputs_[j];
    const uint32_t p = producer_[t];
    if (device_[p] == d) {
      ready = std::max(ready, finish_[p]);
      continue;
    }
    double& arrived = arrival_[t * num_devices_ + dv];
    if (arrived < 0) {
      const Link* link = cluster_.link(device_[p], d);
      DPLACE_CHECK(link) << "op placed where an input cannot reach it";
      const size_t c = cluster_.channel_index(device_[p], d);
      const double duration = transfer_time_s(tensor_bytes_[t], *link);
      const double start = channel_start_s(c, finish_[p], duration);
      arrived = start + duration;
      channel_free_s_[c] = std::max(channel_free_s_[c], arrived);
      if (options_.insertion) insert_interval(channel_busy_[c], start, arrived);
      live_[dv] += tensor_bytes_[t];
    }
    ready = std::max(ready, arrived);
  }
  const double duration = costs_.time_s(op, d);
  const double start = device_available_s(d, std::max(ready, not_before_s), duration);
  const double end = start + duration;
  if (options_.insertion) insert_interval(busy_[dv], start, end);
  device_free_s_[dv] = std::max(device_free_s_[dv], end);
  device_[i] = d;
  finish_[i] = end;
  makespan_s_ = std::max(makespan_s_, end);
  ++num_placed_;

  // Memory: outputs and temp while placed; inputs die with their last consumer.
  live_[dv] += output_total_[i];
  peak_live_[dv] = std::max(peak_live_[dv], live_[dv] + graph_.op(op).temp_bytes);
  for (uint32_t j = input_begin_[i]; j < input_begin_[i + 1]; ++j) {
    const uint32_t t = inputs_[j];
    if (--consumers_left_[t] == 0) free_tensor(t);
  }
  for (uint32_t t = tensor_begin_[i]; t < tensor_begin_[i + 1]; ++t) {
    if (consumers_left_[t] == 0) free_tensor(t);
  }

  for (OpId s : graph_.successors(op)) {
    if (--unplaced_preds_[s.value()] == 0) ready_.push_back(s);
  }
}

void ListSchedule::free_tensor(uint32_t t) {
  live_[device_[producer_[t]].value()] -= tensor_bytes_[t];
  for (size_t d = 0; d < num_devices_; ++d) {
    if (arrival_[t * num_devices_ + d] >= 0) live_[d] -= tensor_bytes_[t];
  }
}

int64_t ListSchedule::free_bytes(DeviceId d) const {
  return limits_[d.value()] - reserved_params_[d.value()] - peak_live_[d.value()];
}

DeviceId ListSchedule::fallback_device(OpId op) const {
  DeviceId best = DeviceId::invalid();
  for (DeviceId d : devices_for(op)) {
    if (!best.valid() || free_bytes(d) > free_bytes(best)) best = d;
  }
  return best;
}

std::string ListSchedule::no_fit_message(OpId op) const {
  const DeviceId best = fallback_device(op);
  const int64_t short_by = bytes_needed(op, best) - limits_[best.value()];
  std::string message = fmt::format(
      "op '{}' (group '{}') fits on no allowed device: on {}, the one with the most room, the "
      "estimate exceeds the {} limit by {}",
      graph_.op(op).name, graph_.group_name(graph_.group_of(op)), cluster_.device(best).name,
      memory_amount(limits_[best.value()]), memory_amount(short_by));
  // Devices the op may use that this schedule does not offer it (the CPU, for the m-* placers).
  const std::vector<DeviceId>& offered = candidates_[graph_.group_of(op).value()];
  std::vector<std::string> left_out;
  for (DeviceId d : costs_.group_devices(graph_.group_of(op))) {
    if (std::find(offered.begin(), offered.end(), d) == offered.end()) {
      left_out.push_back(cluster_.device(d).name);
    }
  }
  if (!left_out.empty()) {
    message += fmt::format(" (not offered: {}; --param devices=all offers every device)",
                           fmt::join(left_out, ", "));
  }
  return message;
}

Placement ListSchedule::placement() {
  for (size_t i = 0; i < graph_.num_ops(); ++i) {
    const OpId op = OpId::from_index(i);
    if (deferred(op)) materialize(op, fallback_device(op));
  }
  DPLACE_CHECK(num_placed_ == graph_.num_ops()) << "schedule incomplete";
  return Placement{device_};
}

bool is_free_source(const Graph& graph, const GroupGraph& groups, const CostTable& costs, OpId op) {
  if (!graph.predecessors(op).empty()) return false;
  for (DeviceId d : groups.allowed(graph.group_of(op))) {
    if (costs.time_s(op, d) != 0) return false;
  }
  return true;
}

std::vector<double> upward_ranks(const PlaceRequest& request, bool with_communication) {
  const Graph& graph = *request.graph;
  const Cluster& cluster = *request.cluster;
  const CostTable& costs = *request.costs;
  const size_t nd = cluster.num_devices();
  const MeanLinkCost link_cost = cluster.mean_link_cost();
  std::vector<double> rank(graph.num_ops(), 0.0);
  const auto order = graph.topo_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const OpId op = *it;
    double w = 0;
    size_t allowed = 0;
    for (size_t d = 0; d < nd; ++d) {
      const double t = costs.time_s(op, DeviceId::from_index(d));
      if (t == kInfiniteTime) continue;
      w += t;
      ++allowed;
    }
    w /= double(std::max<size_t>(allowed, 1));
    double tail = 0;
    for (OpId s : graph.successors(op)) {
      const double comm = with_communication && link_cost.links > 0
                              ? link_cost.transfer_s(graph.bytes_between(op, s))
                              : 0.0;
      tail = std::max(tail, comm + rank[s.value()]);
    }
    rank[op.value()] = w + tail;
  }
  return rank;
}

}  // namespace dplace
