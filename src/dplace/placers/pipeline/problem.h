// The pipeline-partitioning problem of Tarnawski et al., "Efficient Algorithms for Device
// Placement of DNN Graph Operators" (NeurIPS 2020), generalised from {k accelerators, l CPU
// cores} to any number of device types.
//
// Cost model (exactly the paper's, docs/pipeline.md):
//  * Devices come in types; all devices of one type are identical. A node has one time per type
//    (kInfiniteTime: it may not run there) and a size in bytes.
//  * The load of a device is the sum of its nodes' times plus, on a type that pays communication
//    (accelerators; not CPU cores, whose data already sits in host memory), the cost of every
//    tensor that crosses the boundary of its node set: a tensor crosses when its producer or any of
//    its consumers is inside and another of them is outside. Each crossing tensor is paid once
//    per device, whatever the number of edges that carry it.
//  * A device of a capped type holds at most memory_cap_bytes of node sizes.
//  * Nodes with the same colour are co-located. Backward nodes (isBackwardNode, or dplace ops of
//    phase backward/update) follow their colour class and do not constrain contiguity.
//  * Throughput objective: the maximum load over devices (time per sample in a pipeline).
//
// A PipelineProblem made from a dplace Graph has one node per op, in OpId order.
//
// Thread safety: plain values; the functions are pure.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/core/ids.h"
#include "dplace/cost/cost_model.h"
#include "dplace/ir/graph.h"

namespace dplace {

inline constexpr double kUncappedBytes = std::numeric_limits<double>::infinity();

struct PipelineDeviceType {
  std::string name;  // e.g. "accel", "cpu", "gpu"
  int count = 0;     // devices of this type
  double memory_cap_bytes = kUncappedBytes;
  bool pays_communication = true;
  // One name per device of the type (size == count), e.g. "/accel:0".
  std::vector<std::string> device_names;
  // The cluster devices behind them (size == count), when made from a Cluster; else empty.
  std::vector<DeviceId> cluster_devices;
};

struct PipelineNode {
  std::string name;
  std::vector<double> time_s;  // per device type; kInfiniteTime when not allowed
  double size_bytes = 0;
  bool backward = false;
  int64_t colour = -1;       // colour class; -1: the node is alone in its class
  int64_t external_id = -1;  // id in the source file (dnn-partitioning "id"), -1 if none
};

struct PipelineTensor {
  uint32_t producer = 0;
  std::vector<uint32_t> consumers;  // distinct node indices, none equal to producer
  std::vector<double> comm_s;       // per device type; read only for paying types
};

struct PipelineProblem {
  std::string name;
  std::vector<PipelineDeviceType> types;
  std::vector<PipelineNode> nodes;
  std::vector<PipelineTensor> tensors;
  std::vector<std::string> warnings;  // one line each

  int num_devices() const;
  // Global device index d in [0, num_devices()): type 0's devices first, then type 1's, ...
  int type_of_device(int device) const;
  const std::string& device_name(int device) const;
  int first_device_of_type(int type) const;
};

// Builds the problem for a dplace graph on a cluster. Devices with the same kind, memory and
// time for every op (per the CostTable) form one type; CPU devices pay no communication. A
// tensor's cost on a paying type is op.extra["comm_cost_s"] when the producer has one (graphs read
// from dnn-partitioning files), else the transfer time of its bytes over the link between the
// type's first device and the first CPU device (or, with no CPU, another device). Colours are the
// graph's colocation groups; phase backward/update marks backward nodes. Node size is
// param_bytes + temp_bytes. REQUIRES: costs built from graph and cluster.
PipelineProblem pipeline_problem_from_graph(const Graph& graph, const Cluster& cluster,
                                            const CostTable& costs);

// Checks the structural invariants (sizes of per-type vectors, index ranges, no empty type list).
// Throws ConfigError naming the first problem.
void validate_pipeline_problem(const PipelineProblem& problem);

// One device's share of an assignment.
struct PipelineDeviceLoad {
  double load_s = 0;     // compute_s + comm_s
  double compute_s = 0;  // sum of node times on this device's type
  double comm_s = 0;     // crossing tensors (0 on types that pay no communication)
  double memory_bytes = 0;
  std::vector<uint32_t> nodes;  // ascending
};

struct PipelineEvaluation {
  std::vector<PipelineDeviceLoad> devices;  // indexed by global device
  double max_load_s = 0;
  // Empty when the assignment respects allowed types, memory caps and colours; otherwise one line
  // naming the first violation.
  std::string violation;
  bool contiguous = false;  // see is_contiguous_assignment
};

// The distinct devices a tensor touches under an assignment (its producer's and its consumers'),
// ascending, into `devices` (cleared first). The tensor crosses devices when there are two or more.
void devices_of_tensor(const PipelineTensor& tensor, const std::vector<int>& device_of_node,
                       std::vector<int>& devices);

// The paper's throughput cost of an assignment node -> global device.
// REQUIRES: device_of_node.size() == nodes.size(), every entry in [0, num_devices()).
PipelineEvaluation evaluate_pipeline(const PipelineProblem& problem,
                                     const std::vector<int>& device_of_node);

// Whether the assignment is contiguous in the paper's sense: the forward parts of the devices can
// be ordered so that each is the difference of two consecutive ideals of the (colour-contracted)
// forward DAG, i.e. the device quotient of the unit DAG (units.h) is acyclic. Colour classes must
// be respected (false otherwise).
bool is_contiguous_assignment(const PipelineProblem& problem,
                              const std::vector<int>& device_of_node);

}  // namespace dplace
