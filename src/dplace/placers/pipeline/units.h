// Units: the atoms that the pipeline solvers place.
//
// build_unit_dag turns a PipelineProblem into the DAG whose ideals define contiguous splits, the
// way the paper's reference implementation prepares its input:
//  1. Nodes of one colour form a class (a node without colour is its own class).
//  2. Forward edges between classes (both endpoints forward nodes) are the class DAG's edges.
//  3. A class with only backward nodes ("orphan", e.g. a gradient accumulator with no forward
//     counterpart) gets mirrored edges: for every backward edge a -> b with an orphan endpoint, an
//     edge class(b) -> class(a), so the orphan is placed as if it were the forward node of its
//     backward part.
//  4. Strongly connected components of that class graph (cycles made by colours) are fused.
// The result is a DAG of units; each unit is the union of its classes' forward and backward
// nodes, and a device's set is a union of units. Communication is kept per original tensor: a
// tensor touches the set of units holding its producer and consumers, and crosses a device's set
// when it touches units on both sides of it; tensors inside one unit never cross.
//
// colour_classes() is steps 1 only (for the non-contiguous ILP, which needs no DAG).
//
// Thread safety: plain values; the functions are pure.
#pragma once

#include <cstdint>
#include <vector>

#include "dplace/placers/pipeline/problem.h"

namespace dplace {

struct UnitTensor {
  uint32_t producer_unit = 0;
  std::vector<uint32_t> units;  // distinct, size >= 2, includes producer_unit
  std::vector<double> comm_s;   // per device type (0 for types that pay no communication)
};

struct UnitDag {
  size_t num_units = 0;
  std::vector<uint32_t> unit_of_node;
  std::vector<std::vector<uint32_t>> nodes_of_unit;  // ascending
  std::vector<std::vector<uint32_t>> succ;           // distinct, ascending
  std::vector<std::vector<uint32_t>> pred;           // distinct, ascending
  std::vector<uint32_t> topo_order;                  // Kahn, ties by unit index
  std::vector<std::vector<double>> time_s;           // [unit][type]; infinite when not allowed
  std::vector<double> size_bytes;
  std::vector<UnitTensor> tensors;                     // tensors touching >= 2 units
  std::vector<std::vector<uint32_t>> tensors_of_unit;  // indices into tensors
  size_t num_types = 0;
};

// Units are numbered by their first node's index.
UnitDag build_unit_dag(const PipelineProblem& problem);

// A topological order of the units that finishes one branch before starting the next (a stack
// of ready units; among ready units the lowest index first), unlike Kahn's order in topo_order,
// which interleaves parallel branches.
std::vector<uint32_t> depth_first_topological_order(const UnitDag& dag);

// The device of every node, from a device per unit (nodes follow their unit).
std::vector<int> device_of_nodes(const UnitDag& dag, const std::vector<int>& device_of_unit);

// Class index per node for colour classes only (step 1), numbered by first node; and the count.
struct ColourClasses {
  std::vector<uint32_t> class_of_node;
  size_t num_classes = 0;
};
ColourClasses colour_classes(const PipelineProblem& problem);

}  // namespace dplace
