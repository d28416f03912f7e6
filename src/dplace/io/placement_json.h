// dplace.placement/1 reading and writing (docs/formats.md):
//   { "format": "dplace.placement/1", "graph": "tiny", "cluster": "paper-k80x2",
//     "assignment": { "x": "/cpu:0", "mm": "/gpu:0", "y": "/gpu:0" } }
//
// `graph` and `cluster` record what the placement was made for; they are informational, not
// checked against the graph and cluster it is read with (a renamed file is still usable), but a
// name that differs is added to `warnings` when given ("<file>: made for cluster 'a', read with
// cluster 'b'"), since a placement for another cluster whose device names happen to exist reads
// without an error. The
// assignment must name every op of the graph exactly once, each with a device of the cluster.
// Whether the placement is valid (allowed kinds, colocation, links) is placement_problem()'s job.
//
// Errors are one line and start with the file: "<file>: assignment: op 'y' has no device",
// "<file>: assignment: op 'mm': unknown device '/gpu:7' (devices of cluster 'c': /cpu:0, /gpu:0)",
// "<file>: assignment: unknown op 'zz' (not in graph 'tiny')". All throw FormatError.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/core/json.h"
#include "dplace/ir/graph.h"
#include "dplace/sim/placement.h"

namespace dplace {

inline constexpr const char* kPlacementFormat = "dplace.placement/1";

// `source` names the document in errors.
Placement read_placement_json(const Json& doc, const std::string& source, const Graph& graph,
                              const Cluster& cluster, std::vector<std::string>* warnings = nullptr);
Placement read_placement_file(const std::string& path, const Graph& graph, const Cluster& cluster,
                              std::vector<std::string>* warnings = nullptr);

// REQUIRES: placement.device_of_op.size() == graph.num_ops(), every id valid for the cluster.
Json placement_to_json(const Graph& graph, const Cluster& cluster, const Placement& placement);
// One op per line, in graph order. Throws FormatError naming `path` when it cannot be written.
void write_placement_file(const Graph& graph, const Cluster& cluster, const Placement& placement,
                          const std::string& path);

}  // namespace dplace
