// Graphviz DOT pictures of a graph and its placement, in the style of the placement figures of
// Mirhoseini et al. 2017: ops as boxes filled with their device's colour (a fixed palette, with a
// legend), colocation groups drawn as dashed `subgraph cluster_*` boxes (only groups of more than
// one op), tensors as edges labelled with their size, and edges that cross devices drawn thicker.
//
// Big graphs are collapsed so that the picture stays readable and Graphviz stays fast (at most
// `max_nodes` nodes; pictures of more than 150 nodes also cap dot's layout passes):
//  1. num_ops <= max_nodes: one node per op, unless there are more than 150 ops and some of them
//     share a colocation group;
//  2. else, if num_groups <= max_nodes: one node per colocation group ("name (N ops)").
//  3. else one node per (name scope, device): the scope is the op name up to its d-th '/', with the
//     largest d that gives at most max_nodes nodes (d = 0 puts all ops of a device in one node).
// In collapsed pictures an edge joins two nodes when any tensor flows between their ops; its label
// is the total size of those tensors (each tensor counted once per consuming node). A node whose
// ops sit on several devices is filled with the first op's colour and drawn with a dashed border.
//
// Names longer than 200 bytes (ops, groups, scopes, devices, the graph) are cut to 200 and end in
// "..." in the labels, within Graphviz's limit on a quoted string.
//
// Output format follows the path: ".svg", ".png" and ".pdf" are rendered by running Graphviz
// `dot -T<format>` on a temporary DOT file (ConfigError when `dot` is not on PATH); any other
// extension (".dot", ".gv") gets the DOT text itself.
//
// Thread safety: pure functions (rendering runs a child process).
#pragma once

#include <cstddef>
#include <string>

#include "dplace/cluster/cluster.h"
#include "dplace/ir/graph.h"
#include "dplace/sim/placement.h"

namespace dplace {

struct DotOptions {
  // Default: true. Label edges with tensor sizes ("4 KiB").
  bool edge_labels = true;
  // Default: 400. Most nodes before the picture is collapsed (see the file comment). >= 1.
  // Graphviz lays out a few hundred nodes in seconds but took over a minute for the 585 ops of
  // resnet50's training graph, so the default keeps rendered pictures at group level.
  size_t max_nodes = 400;
  // Default: "dot". The Graphviz program used to render .svg/.png/.pdf (looked up on PATH unless
  // it contains '/').
  std::string dot_program = "dot";
};

// The DOT text. `cluster` and `placement` may be null (then ops are not coloured); a placement
// REQUIRES a cluster and device_of_op.size() == graph.num_ops().
std::string graph_to_dot(const Graph& graph, const Cluster* cluster, const Placement* placement,
                         const DotOptions& options = {});

// Writes DOT text, or a rendered picture when `path` ends in .svg/.png/.pdf. Throws FormatError
// naming `path` when it cannot be written, and ConfigError when Graphviz is missing or fails.
void write_dot(const Graph& graph, const Cluster& cluster, const Placement* placement,
               const std::string& path, const DotOptions& options = {});

// Human-readable byte count: "512 B", "4 KiB", "1.5 MiB", "12 GiB".
std::string format_bytes(double bytes);

}  // namespace dplace
