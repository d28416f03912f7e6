#include "dplace/ir/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "dplace/core/error.h"
#include "dplace/core/format.h"

namespace dplace {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kUpdate:
      return "update";
    case Phase::kUnspecified:
      return "";
  }
  return "";
}

std::optional<Phase> parse_phase(std::string_view word) {
  if (word == "forward") return Phase::kForward;
  if (word == "backward") return Phase::kBackward;
  if (word == "update") return Phase::kUpdate;
  if (word.empty()) return Phase::kUnspecified;
  return std::nullopt;
}

std::optional<OpId> Graph::find_op(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::span<const OpId> Graph::consumers(TensorRef t) const {
  const uint32_t flat = tensor_offsets_[t.op.value()] + t.output;
  return std::span<const OpId>(consumers_)
      .subspan(consumer_offsets_[flat], consumer_offsets_[flat + 1] - consumer_offsets_[flat]);
}

std::span<const OpId> Graph::successors(OpId id) const {
  const uint32_t i = id.value();
  return std::span<const OpId>(succ_).subspan(succ_offsets_[i],
                                              succ_offsets_[i + 1] - succ_offsets_[i]);
}

std::span<const OpId> Graph::predecessors(OpId id) const {
  const uint32_t i = id.value();
  return std::span<const OpId>(pred_).subspan(pred_offsets_[i],
                                              pred_offsets_[i + 1] - pred_offsets_[i]);
}

int64_t Graph::bytes_between(OpId from, OpId to) const {
  int64_t bytes = 0;
  for (uint32_t k = 0; k < num_outputs(from); ++k) {
    const std::span<const OpId> readers = consumers({from, k});
    if (std::binary_search(readers.begin(), readers.end(), to)) bytes += tensor_bytes({from, k});
  }
  return bytes;
}

std::span<const OpId> Graph::group_ops(GroupId g) const {
  const uint32_t i = g.value();
  return std::span<const OpId>(group_members_)
      .subspan(group_offsets_[i], group_offsets_[i + 1] - group_offsets_[i]);
}

double Graph::total_flops() const {
  double total = 0;
  for (const Op& op : ops_) total += op.flops;
  return total;
}

int64_t Graph::total_param_bytes() const {
  int64_t total = 0;
  for (const Op& op : ops_) total += op.param_bytes;
  return total;
}

int64_t Graph::total_output_bytes() const {
  int64_t total = 0;
  for (const Op& op : ops_) {
    for (int64_t b : op.output_bytes) total += b;
  }
  return total;
}

GraphBuilder::GraphBuilder(std::string graph_name, std::string source)
    : name_(std::move(graph_name)), source_(std::move(source)) {}

OpId GraphBuilder::add_op(Op op) {
  ops_.push_back(std::move(op));
  return OpId::from_index(ops_.size() - 1);
}

namespace {

// Builds CSR adjacency from (row, value) pairs; values per row sorted and deduplicated.
void build_csr(size_t num_rows, std::vector<std::pair<uint32_t, uint32_t>>& pairs,
               std::vector<uint32_t>& offsets, std::vector<OpId>& values) {
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  offsets.assign(num_rows + 1, 0);
  for (const auto& p : pairs) ++offsets[p.first + 1];
  for (size_t i = 0; i < num_rows; ++i) offsets[i + 1] += offsets[i];
  values.clear();
  values.reserve(pairs.size());
  for (const auto& p : pairs) values.push_back(OpId(p.second));
}

}  // namespace

Graph GraphBuilder::build() && {
  Graph g;
  g.name_ = std::move(name_);
  g.ops_ = std::move(ops_);
  const size_t n = g.ops_.size();
  auto fail = [&](const Op& op, const std::string& problem) {
    throw GraphError(fmt::format("{}: op '{}': {}", source_, op.name, problem));
  };
  if (n >= OpId::kInvalidValue) throw GraphError(fmt::format("{}: too many ops", source_));
  if (!is_valid_utf8(g.name_)) {
    throw GraphError(fmt::format("{}: graph name '{}' is not valid UTF-8", source_,
                                 escape_invalid_utf8(g.name_)));
  }
  if (has_control_character(g.name_)) {
    throw GraphError(
        fmt::format("{}: graph name '{}' contains a control character (a line break, tab or other)",
                    source_, escape_control_characters(g.name_)));
  }

  // Names, numbers, outputs.
  g.index_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops_[i];
    if (op.name.empty()) {
      throw GraphError(fmt::format("{}: op #{}: field 'name': must not be empty", source_, i));
    }
    // Names and strings go to JSON output, which must be UTF-8 (ONNX and PipeDream files may
    // hold any bytes).
    if (!is_valid_utf8(op.name)) {
      throw GraphError(fmt::format("{}: op '{}': field 'name': not valid UTF-8", source_,
                                   escape_invalid_utf8(op.name)));
    }
    for (const auto& [field, text] : {std::pair<const char*, const std::string*>{"type", &op.type},
                                      {"colocate", &op.colocate}}) {
      if (!is_valid_utf8(*text)) {
        fail(op,
             fmt::format("field '{}': '{}' is not valid UTF-8", field, escape_invalid_utf8(*text)));
      }
    }
    for (const std::string& d : op.devices) {
      if (!is_valid_utf8(d)) {
        fail(op, fmt::format("field 'devices': '{}' is not valid UTF-8", escape_invalid_utf8(d)));
      }
    }
    for (const TimeOverride& t : op.time_s) {
      if (!is_valid_utf8(t.device)) {
        fail(op, fmt::format("field 'time_s': key '{}' is not valid UTF-8",
                             escape_invalid_utf8(t.device)));
      }
    }
    if (!g.index_.emplace(op.name, OpId::from_index(i)).second) {
      fail(op, "duplicate op name");
    }
    if (op.output_bytes.empty()) fail(op, "field 'output_bytes': op has no outputs");
    for (int64_t b : op.output_bytes) {
      if (b < 0) fail(op, fmt::format("field 'output_bytes': must be non-negative, got {}", b));
    }
    if (!std::isfinite(op.flops) || op.flops < 0) {
      fail(op, fmt::format("field 'flops': must be a non-negative number, got {}", op.flops));
    }
    if (op.flops > kMaxOpFlops) {
      fail(op,
           fmt::format("field 'flops': {:g} is above the limit of {:g}", op.flops, kMaxOpFlops));
    }
    if (op.bytes_accessed && (!std::isfinite(*op.bytes_accessed) || *op.bytes_accessed < 0)) {
      fail(op,
           fmt::format("field 'bytes_accessed': must be non-negative, got {}", *op.bytes_accessed));
    }
    if (op.bytes_accessed && *op.bytes_accessed > kMaxOpBytesAccessed) {
      fail(op, fmt::format("field 'bytes_accessed': {:g} is above the limit of {:g}",
                           *op.bytes_accessed, kMaxOpBytesAccessed));
    }
    if (op.param_bytes < 0) fail(op, "field 'param_bytes': must be non-negative");
    if (op.temp_bytes < 0) fail(op, "field 'temp_bytes': must be non-negative");
    for (const TimeOverride& t : op.time_s) {
      if (!std::isfinite(t.time_s) || t.time_s < 0) {
        fail(op,
             fmt::format("field 'time_s.{}': must be non-negative, got {}", t.device, t.time_s));
      }
      if (t.time_s > kMaxOpSeconds) {
        fail(op, fmt::format("field 'time_s.{}': {:g} s is above the limit of {:g} s", t.device,
                             t.time_s, kMaxOpSeconds));
      }
    }
  }

  // Inputs and tensor numbering.
  g.tensor_offsets_.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    g.tensor_offsets_[i + 1] = g.tensor_offsets_[i] + g.ops_[i].output_bytes.size();
  }
  std::vector<std::pair<uint32_t, uint32_t>> tensor_consumer;
  std::vector<std::pair<uint32_t, uint32_t>> succ_pairs;
  std::vector<std::pair<uint32_t, uint32_t>> pred_pairs;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops_[i];
    for (const TensorRef& in : op.inputs) {
      if (!in.op.valid() || in.op.value() >= n) {
        fail(op, fmt::format("input refers to op #{} which does not exist", in.op.value()));
      }
      const Op& producer = g.ops_[in.op.value()];
      if (in.output >= producer.output_bytes.size()) {
        fail(op, fmt::format("input '{}:{}': op '{}' has only {} output(s)", producer.name,
                             in.output, producer.name, producer.output_bytes.size()));
      }
      if (in.op.value() == i) fail(op, "op consumes its own output (cycle of length 1)");
      tensor_consumer.emplace_back(g.tensor_offsets_[in.op.value()] + in.output, i);
      succ_pairs.emplace_back(in.op.value(), i);
      pred_pairs.emplace_back(i, in.op.value());
    }
  }
  build_csr(g.tensor_offsets_[n], tensor_consumer, g.consumer_offsets_, g.consumers_);
  g.num_edges_ = g.consumers_.size();
  build_csr(n, succ_pairs, g.succ_offsets_, g.succ_);
  build_csr(n, pred_pairs, g.pred_offsets_, g.pred_);

  // Every byte sum dplace forms (memory on a device, transfers, group-graph edges) is at most
  // this total, so bounding it keeps those int64 sums from overflowing.
  // Summed exactly, saturating at the int64 limit (the counts are not negative; a sum in doubles
  // let totals just past 2^60 through).
  int64_t total_bytes = 0;
  auto add = [&](int64_t bytes, int64_t times) {
    int64_t product = 0;
    if (__builtin_mul_overflow(bytes, times, &product) ||
        __builtin_add_overflow(total_bytes, product, &total_bytes)) {
      total_bytes = std::numeric_limits<int64_t>::max();
    }
  };
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops_[i];
    add(op.param_bytes, 1);
    add(op.temp_bytes, 1);
    for (size_t k = 0; k < op.output_bytes.size(); ++k) {
      const size_t t = g.tensor_offsets_[i] + k;
      const size_t uses = std::max<size_t>(1, g.consumer_offsets_[t + 1] - g.consumer_offsets_[t]);
      add(op.output_bytes[k], static_cast<int64_t>(uses));
    }
  }
  if (total_bytes > kMaxGraphBytes) {
    throw GraphError(fmt::format(
        "{}: the graph's byte counts add up to {}{} (parameters, temporaries, and outputs once "
        "per consumer), more than the limit of 2^60 = {}",
        source_, total_bytes == std::numeric_limits<int64_t>::max() ? "at least " : "", total_bytes,
        kMaxGraphBytes));
  }

  // Bytes accessed.
  g.bytes_accessed_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops_[i];
    if (op.bytes_accessed) {
      g.bytes_accessed_[i] = *op.bytes_accessed;
      continue;
    }
    double total = 0;
    for (const TensorRef& in : op.inputs) total += g.tensor_bytes(in);
    for (int64_t b : op.output_bytes) total += b;
    g.bytes_accessed_[i] = total;
  }

  // Kahn's algorithm, ties by op index.
  std::vector<uint32_t> indegree(n, 0);
  for (size_t i = 0; i < n; ++i) indegree[i] = g.pred_offsets_[i + 1] - g.pred_offsets_[i];
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push(i);
  }
  g.topo_order_.reserve(n);
  while (!ready.empty()) {
    const uint32_t i = ready.top();
    ready.pop();
    g.topo_order_.push_back(OpId(i));
    for (OpId s : g.successors(OpId(i))) {
      if (--indegree[s.value()] == 0) ready.push(s.value());
    }
  }
  if (g.topo_order_.size() != n) {
    // Walk predecessors among the unfinished ops until a node repeats: that is a cycle.
    uint32_t start = 0;
    while (indegree[start] == 0) ++start;
    std::vector<int64_t> seen_at(n, -1);
    std::vector<uint32_t> walk;
    uint32_t cur = start;
    while (seen_at[cur] < 0) {
      seen_at[cur] = static_cast<int64_t>(walk.size());
      walk.push_back(cur);
      for (OpId p : g.predecessors(OpId(cur))) {
        if (indegree[p.value()] > 0) {
          cur = p.value();
          break;
        }
      }
    }
    std::vector<uint32_t> cycle(walk.begin() + seen_at[cur], walk.end());
    std::reverse(cycle.begin(), cycle.end());  // producer -> consumer order
    // Start at the op that comes first in the file, so the message does not depend on the walk.
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
    std::string names;
    for (uint32_t c : cycle) names += "'" + g.ops_[c].name + "' -> ";
    names += "'" + g.ops_[cycle.front()].name + "'";
    throw GraphError(fmt::format("{}: graph has a cycle: {}", source_, names));
  }
  g.topo_rank_.resize(n);
  for (size_t r = 0; r < n; ++r) g.topo_rank_[g.topo_order_[r].value()] = r;

  // Colocation groups, numbered by first op index.
  g.group_of_.assign(n, GroupId());
  std::unordered_map<std::string, GroupId> by_name;
  std::vector<uint32_t> group_size;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops_[i];
    GroupId gid;
    if (!op.colocate.empty()) {
      auto [it, inserted] = by_name.emplace(op.colocate, GroupId::from_index(group_size.size()));
      gid = it->second;
      if (inserted) {
        group_size.push_back(0);
        g.group_names_.push_back(op.colocate);
      }
    } else {
      gid = GroupId::from_index(group_size.size());
      group_size.push_back(0);
      g.group_names_.push_back(op.name);
    }
    g.group_of_[i] = gid;
    ++group_size[gid.value()];
  }
  g.group_offsets_.assign(group_size.size() + 1, 0);
  for (size_t k = 0; k < group_size.size(); ++k) {
    g.group_offsets_[k + 1] = g.group_offsets_[k] + group_size[k];
  }
  g.group_members_.resize(n);
  std::vector<uint32_t> fill(g.group_offsets_.begin(), g.group_offsets_.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    g.group_members_[fill[g.group_of_[i].value()]++] = OpId::from_index(i);
  }
  return g;
}

}  // namespace dplace
