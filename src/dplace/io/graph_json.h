// dplace.graph/1 reading and writing (every field in docs/formats.md).
//
// Reading:
//  * `inputs` entries name a producer: a bare op name is its output 0, "op:k" is output k. An
//    entry that is exactly the name of an op always means that op's output 0, so op names may
//    themselves contain ':'.
//  * `output_bytes` is a number (one output) or a non-empty list; absent means one output of 0
//    bytes.
//  * Fields the format does not define are kept, in Op::extra, and written back unchanged.
//  * Errors are one line: "<file>: op '<name>': field '<field>': <problem>" for bad fields,
//    "<file>: op '<name>': input '<text>': no op named '<x>'" for an unknown producer, and the
//    GraphBuilder messages ("<file>: op 'x': duplicate op name", "<file>: graph has a cycle: ...")
//    for structural problems. Field problems throw FormatError, structural ones GraphError.
//
// Writing emits one op per line, in graph order, so files diff well and round-trip exactly
// (doubles are printed with enough digits to read back bit-identical).
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "dplace/core/json.h"
#include "dplace/ir/graph.h"

namespace dplace {

inline constexpr const char* kGraphFormat = "dplace.graph/1";

// Parses a dplace.graph/1 document; `source` names it in errors and gives the default graph name
// (its file stem) when the document has no `name`.
Graph read_graph_json(const Json& doc, const std::string& source);
// Reads a file; errors name `path`.
Graph read_graph_file(const std::string& path);

Json graph_to_json(const Graph& graph);
// Throws FormatError naming `path` when it cannot be written.
void write_graph_file(const Graph& graph, const std::string& path);

}  // namespace dplace
