// Reader for the JSON workloads of Tarnawski et al., "Efficient Algorithms for Device Placement of
// DNN Graph Operators" (NeurIPS 2020), as published with their code (msr-fiddle/dnn-partitioning).
//
// A file is one object:
//   { "maxSizePerFPGA": bytes, "maxFPGAs": k, "maxCPUs": l,
//     "nodes": [ { "id", "supportedOnFpga" (bool or 0/1), "cpuLatency", "fpgaLatency",
//                  "isBackwardNode" (bool or 0/1), "colorClass"?, "size"?, "name"?, "layerId"? } ],
//     "edges": [ { "sourceId", "destId", "cost", "size"? } ] }
// "FPGA" means any accelerator. `cost` is the time to move the source's output between accelerator
// and CPU memory; it must be equal on all out-edges of one source (it belongs to the tensor).
//
// Two views of a file:
//  * DnnPartitioningFile: the file as written (ids, latencies in the file's unit), lossless.
//  * The dplace Graph + implied Cluster (read_dnn_partitioning_file in importers.h):
//      op name       `name` when present and unique in the file, else "node<id>";
//      time_s        {"accel": fpgaLatency, "gpu": fpgaLatency, "cpu": cpuLatency} * 1e-3
//                    (the files' time unit reads as milliseconds; dplace works in seconds);
//      devices       ["cpu"] when supportedOnFpga is false, else empty (any device);
//      param_bytes   `size` (bytes the node occupies on an accelerator), rounded up to a whole
//                    byte (a warning says when any was not whole);
//      output_bytes  the largest `size` of the node's out-edges (0 without out-edges);
//      colocate      "cc<colorClass>" when the node has a colour class;
//      phase         backward when isBackwardNode, else forward;
//      extra         {"dnn_id": id, "comm_cost_s": cost * 1e-3 (nodes with out-edges),
//                     "layer_id": layerId (when present)}.
//    Every edge becomes an input of its destination (output 0 of its source).
//    The implied cluster "<stem>-implied" has k devices "/accel:i" (kind accel, memory
//    maxSizePerFPGA rounded down; below one byte is an error when k > 0) and l devices "/cpu:i"
//    (kind cpu, memory uncapped = 2^50 bytes), with links accel<->cpu of bandwidth sum(edge size) /
//    sum(edge cost) (one crossing, as in the paper), accel<->accel of half that bandwidth (through
//    host memory: out, then in) and cpu<->cpu effectively free (shared memory). Compute figures of
//    the implied devices are nominal: every op carries measured times, so the cost model never uses
//    them.
//
// Errors: FormatError "<file>: node <id>: field '<f>': <problem>" or
// "<file>: edge <i> (<src> -> <dst>): ..." for a missing field, a wrong type, a negative number, a
// duplicate node id, an edge naming an unknown node or a source whose out-edges disagree on cost.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dplace/core/json.h"
#include "dplace/io/importers.h"

namespace dplace {

// True when the JSON value looks like a dnn-partitioning workload: an object with "nodes",
// "edges" and "maxFPGAs" (and without a "format" field of its own).
bool is_dnn_partitioning_json(const Json& value);

struct DnnPartitioningNode {
  int64_t id = 0;
  std::string name;  // empty when the file has none
  bool supported_on_accel = true;
  double cpu_latency = 0;    // file unit (ms)
  double accel_latency = 0;  // file unit (ms)
  bool is_backward = false;
  std::optional<int64_t> color_class;
  double size_bytes = 0;
  std::optional<int64_t> layer_id;
};

struct DnnPartitioningEdge {
  int64_t source_id = 0;
  int64_t dest_id = 0;
  double cost = 0;  // file unit (ms)
  std::optional<double> size_bytes;
};

struct DnnPartitioningFile {
  std::string source;  // path, for messages
  double max_size_per_accel_bytes = 0;
  int max_accels = 0;
  int max_cpus = 0;
  std::vector<DnnPartitioningNode> nodes;  // file order
  std::vector<DnnPartitioningEdge> edges;  // file order
};

// Parses and validates a file already read as JSON; `source` names it in errors.
DnnPartitioningFile parse_dnn_partitioning(const Json& value, const std::string& source);
// Reads and parses a file.
DnnPartitioningFile read_dnn_partitioning_raw(const std::string& path);
// The dplace view of a parsed file (see the file comment). Throws GraphError for a cycle.
LoadedGraph dnn_partitioning_to_graph(const DnnPartitioningFile& file);

// The file unit -> seconds factor used for time_s and comm_cost_s.
inline constexpr double kDnnPartitioningSecondsPerUnit = 1e-3;

// An expert split in the authors' output format:
//   { "cpus": [ { "nodes": [ids] } ], "fpgas": [ { "nodes": [ids] } ], ... }
// Other fields ("load", "maxLoad") are ignored.
struct DnnPartitioningSplit {
  std::vector<std::vector<int64_t>> cpus;
  std::vector<std::vector<int64_t>> accels;
};
DnnPartitioningSplit read_dnn_partitioning_split(const std::string& path);

}  // namespace dplace
