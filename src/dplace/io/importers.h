// Reading graphs from every supported file format, with the format detected from the content.
//
//   dplace.graph/1 JSON            graph_json.h
//   dnn-partitioning JSON          (Tarnawski et al.; detected by its "nodes"/"edges"/"maxFPGAs")
//   PipeDream graph.txt profile    (lines "nodeN -- ... -- forward_compute_time=...")
//   ONNX model (.onnx, protobuf)   (only when built with DPLACE_WITH_ONNX)
//
// Some formats imply a cluster (dnn-partitioning files carry k accelerators, l CPU cores and a
// memory cap); it is used when the user gives no --cluster.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/ir/graph.h"

namespace dplace {

struct ImportOptions {
  // Values for symbolic (dynamic) dimensions of ONNX inputs, from --dim name=value.
  std::map<std::string, int64_t> dims;
  // Expand into forward + backward + update. nullopt: the format's default (ONNX: inference;
  // profiles that carry backward times: training).
  std::optional<bool> training;
};

struct LoadedGraph {
  Graph graph;
  std::optional<Cluster> implied_cluster;
  std::vector<std::string> warnings;  // one line each, printed by the CLI on stderr
  std::string format;                 // "dplace.graph/1", "dnn-partitioning", "pipedream", "onnx"
};

// Detects the format from the file's content and reads it. Throws FormatError naming the file for
// a missing, unreadable, unrecognised or malformed file.
LoadedGraph load_graph_file(const std::string& path, const ImportOptions& options);

// The individual readers (each throws FormatError / GraphError naming the file).
LoadedGraph read_dnn_partitioning_file(const std::string& path, const ImportOptions& options);
LoadedGraph read_pipedream_file(const std::string& path, const ImportOptions& options);
LoadedGraph read_onnx_file(const std::string& path, const ImportOptions& options);

}  // namespace dplace
