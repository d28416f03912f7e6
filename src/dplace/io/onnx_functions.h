// Model-local ONNX functions (ModelProto.functions), inlined before the importer reads the graph.
//
// Exporters write a module or a library op as a function once and call it from the graph: PyTorch's
// TorchScript exporter with export_modules_as_functions, its earlier dynamo exporter (the torchlib
// functions), onnxscript. A call is a node whose (domain, op_type, overload) names such a function.
// dplace places ops, so each call is replaced by the function's body, as onnxruntime does when it
// loads the model:
//   - the body's nodes take the call's place, in order, named "<call>/<node>" (an unnamed body node
//     "<call>/<OpType>_<k>", k its place in the body; an unnamed call "<Function>_<n>");
//   - the function's inputs and outputs become the call's actual ones (a missing optional input
//     stays missing; an output the call leaves out gets a name of its own); every other name the
//     body defines, in subgraphs too, is prefixed "<call>/", made unique against the model's names;
//   - an attribute that refers to one of the function's (ref_attr_name) takes the call's value,
//     else the function's default (FunctionProto.attribute_proto, IR 9), else is dropped;
//   - calls inside bodies and inside subgraphs (If/Loop/Scan) are inlined too, recursively;
//   - the domains the bodies use join the model's opset imports, at the functions' versions.
// This libonnx (1.12) predates the IR 9-10 fields (attribute defaults, overloads); they are read
// from the messages' unknown fields.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace dplace::onnx_detail {

// Where a node of the main graph after inlining comes from.
struct NodeOrigin {
  int file_index = -1;   // its index in the file's main graph; -1 for a node of a function body
  std::string function;  // for a body's node: the innermost function, "<domain>.<name>" (the
                         // domain left out when empty), ":<overload>" added when it has one
};

// Inlines every call of a model-local function in `model`, clears model.functions, and returns
// one NodeOrigin per node of the resulting main graph. A function no node calls is not read.
// Throws FormatError, prefixed "<path>: ", for two functions of one key; for a function that is
// called and whose body defines a name twice or reads one it does not define, whose output no
// body node produces, whose attribute default does not parse, that calls itself (directly or
// not), or whose body uses a domain at another version than the model (or an earlier function)
// imports; for a call with more inputs or outputs than its function takes; for calls nested more
// than 64 deep; and for calls that would expand to more than two million nodes.
std::vector<NodeOrigin> inline_local_functions(::ONNX_NAMESPACE::ModelProto& model,
                                               const std::string& path);

}  // namespace dplace::onnx_detail
