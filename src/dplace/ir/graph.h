// The computation-graph IR shared by every importer, placer and the simulator.
//
// A Graph is an immutable DAG of ops. Each op has one or more output tensors; an edge carries one
// tensor (producer op, output index) to a consuming op. Graphs are made with GraphBuilder, which
// validates the structure once; afterwards every accessor is O(1) and allocation-free.
//
// Invariants of a built Graph:
//  * op names are unique and non-empty; every op has >= 1 output;
//  * every input refers to an existing op and output index, and the graph is acyclic;
//  * topo_order() is Kahn's algorithm with ties broken by op index (file order), and is the
//    deterministic "rank" the simulator uses for tie-breaks (docs/simulator.md);
//  * every op belongs to exactly one colocation group: ops sharing a `colocate` name form one
//    group, an op without one is a singleton group; groups are numbered by their first op's
//    index.
//
// Thread safety: a built Graph is immutable and safe to share between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dplace/core/ids.h"
#include "dplace/core/json.h"

namespace dplace {

enum class Phase : uint8_t { kUnspecified, kForward, kBackward, kUpdate };

// "forward", "backward", "update", or "" for kUnspecified.
std::string_view phase_name(Phase phase);
// Inverse of phase_name; nullopt for an unknown word.
std::optional<Phase> parse_phase(std::string_view word);

// One output of one op.
struct TensorRef {
  OpId op;
  uint32_t output = 0;
  friend bool operator==(const TensorRef&, const TensorRef&) = default;
};

// A measured time overriding the cost model on one device name or device kind.
struct TimeOverride {
  std::string device;  // a device name ("/gpu:0") or kind ("gpu")
  double time_s = 0;
};

// Upper limits GraphBuilder::build enforces, so that no cost or step time can become infinite
// or absurd: a zettaFLOP per op (a million times a large step's matmul), bytes_accessed as byte
// counts elsewhere, and 11.6 days for a measured time.
inline constexpr double kMaxOpFlops = 1e21;
inline constexpr double kMaxOpBytesAccessed = 9e18;
inline constexpr double kMaxOpSeconds = 1e6;
// The most bytes a graph may add up to (parameters, temporaries, and outputs once per consumer):
// 2^60, an exabyte, so that no sum of byte counts overflows int64.
inline constexpr int64_t kMaxGraphBytes = int64_t{1} << 60;

struct Op {
  std::string name;
  std::string type;                         // op type, e.g. "MatMul"; may be empty
  std::vector<TensorRef> inputs;            // in argument order; may repeat a tensor
  std::vector<int64_t> output_bytes = {0};  // one entry per output; size >= 1
  double flops = 0;                         // a multiply-add counts 2
  std::optional<double> bytes_accessed;     // memory traffic; absent means inputs + outputs
  int64_t param_bytes = 0;                  // resident all step on the op's device
  int64_t temp_bytes = 0;                   // scratch held while the op runs
  std::string colocate;                     // colocation group name; empty: none
  std::vector<std::string> devices;         // allowed device kinds or names; empty: any device
  Phase phase = Phase::kUnspecified;
  std::vector<TimeOverride> time_s;  // measured times; see cost/cost_model.h
  Json extra;                        // unknown fields from the file, kept for round-trips
};

class Graph {
 public:
  Graph() = default;

  const std::string& name() const { return name_; }
  size_t num_ops() const { return ops_.size(); }
  const Op& op(OpId id) const { return ops_[id.value()]; }
  std::span<const Op> ops() const { return ops_; }
  std::optional<OpId> find_op(std::string_view name) const;

  size_t num_outputs(OpId id) const { return ops_[id.value()].output_bytes.size(); }
  int64_t tensor_bytes(TensorRef t) const { return ops_[t.op.value()].output_bytes[t.output]; }
  // Memory traffic of the op: its bytes_accessed, or the sum of its input and output bytes.
  double bytes_accessed(OpId id) const { return bytes_accessed_[id.value()]; }

  // Distinct consumer ops of one tensor, ascending by op index.
  std::span<const OpId> consumers(TensorRef t) const;
  // Distinct ops consuming any output of `id` / producing any input of `id`, ascending.
  std::span<const OpId> successors(OpId id) const;
  std::span<const OpId> predecessors(OpId id) const;
  // The bytes of `from`'s outputs that `to` reads, each tensor once; 0 when `to` reads none.
  int64_t bytes_between(OpId from, OpId to) const;
  // Number of (tensor, consumer op) pairs: the edges of the dataflow graph.
  size_t num_edges() const { return num_edges_; }

  std::span<const OpId> topo_order() const { return topo_order_; }
  uint32_t topo_rank(OpId id) const { return topo_rank_[id.value()]; }

  size_t num_groups() const { return group_offsets_.size() - 1; }
  GroupId group_of(OpId id) const { return group_of_[id.value()]; }
  // Ops of a group, ascending by op index.
  std::span<const OpId> group_ops(GroupId g) const;
  // The `colocate` name, or the op's own name for a singleton group.
  const std::string& group_name(GroupId g) const { return group_names_[g.value()]; }

  // Totals, for `dplace info`.
  double total_flops() const;
  int64_t total_param_bytes() const;
  int64_t total_output_bytes() const;

 private:
  friend class GraphBuilder;

  std::string name_;
  std::vector<Op> ops_;
  std::unordered_map<std::string, OpId> index_;
  std::vector<double> bytes_accessed_;
  // Tensor t = (op, k) has flat index tensor_offsets_[op] + k.
  std::vector<uint32_t> tensor_offsets_;
  std::vector<uint32_t> consumer_offsets_;  // per flat tensor, into consumers_
  std::vector<OpId> consumers_;
  std::vector<uint32_t> succ_offsets_;
  std::vector<OpId> succ_;
  std::vector<uint32_t> pred_offsets_;
  std::vector<OpId> pred_;
  size_t num_edges_ = 0;
  std::vector<OpId> topo_order_;
  std::vector<uint32_t> topo_rank_;
  std::vector<GroupId> group_of_;
  std::vector<uint32_t> group_offsets_ = {0};
  std::vector<OpId> group_members_;
  std::vector<std::string> group_names_;
};

// Builds and validates a Graph. Usage:
//   GraphBuilder b("tiny", "tiny.json");
//   OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {4096}});
//   b.add_op({.name = "y", .type = "Relu", .inputs = {{x, 0}}, .flops = 1024});
//   Graph g = std::move(b).build();
// Inputs may refer to ops added later (files need not be in topological order); build() checks
// every reference. `source` names the file (or model) in error messages.
class GraphBuilder {
 public:
  GraphBuilder(std::string graph_name, std::string source);

  // Returns the id the op will have in the built graph (its insertion index).
  OpId add_op(Op op);
  size_t num_ops() const { return ops_.size(); }
  Op& mutable_op(OpId id) { return ops_[id.value()]; }

  // Validates and freezes. Throws GraphError "<source>: op '<name>': <problem>" for: an empty or
  // duplicate name, an input naming a missing op or output index, an op without outputs, a
  // negative or non-finite number, a number above its limit (kMaxOpFlops, kMaxOpBytesAccessed,
  // kMaxOpSeconds, kMaxGraphBytes for the graph's byte total), and a cycle (the message lists the
  // ops on one cycle in order).
  Graph build() &&;

 private:
  std::string name_;
  std::string source_;
  std::vector<Op> ops_;
};

}  // namespace dplace
