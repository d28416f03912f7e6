// Output types of ONNX ops in models newer than this libonnx. Debian 12's libonnx 1.12 knows the
// default domain up to opset 17; PyTorch's exporters and ONNX's own tools now write opset 18 to 23.
// For an op whose signature changed after 17, libonnx checks and infers the node against its older
// definition and fails (ReduceMean-18 takes its axes as an input, which ReduceMean-13 does not
// accept) or errs (Split-18's num_outputs); an op added after 17 has no schema at all. This file
// infers those nodes' output types itself, from the newer definitions:
//
//   changed:  Reduce{L1,L2,LogSum,LogSumExp,Max,Mean,Min,Prod,SumSquare} (18: axes as an input,
//             noop_with_empty_axes), Split (18: num_outputs), Pad (18: axes), Resize (18: axes,
//             keep_aspect_ratio_policy, antialias), LpPool (18) and AveragePool (19): dilations
//             and ceil_mode, Cast and CastLike (19: saturate), QuantizeLinear and DequantizeLinear
//             (19 to 23: block quantization, output_dtype);
//   added:    GroupNormalization, BitwiseAnd/Or/Xor/Not, CenterCropPad, Mish (18), DeformConv (19),
//             Gelu (20), Attention, RMSNormalization, RotaryEmbedding (23), Swish, TensorScatter
//             (24).
//
// Ops that changed after 17 only in the element types they accept (Reshape, Shape, Squeeze, ...)
// are read correctly by their older definition and are left to libonnx.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

namespace dplace::onnx_detail {

// One input of a node as the importer knows it.
struct NodeInput {
  const ::ONNX_NAMESPACE::TypeProto* type = nullptr;  // nullptr: absent, or its type is unknown
  const std::vector<double>* values = nullptr;        // a constant input's values, when known
};

struct NewerOpTypes {
  // One per node output; a TypeProto with no value where the output could not be inferred.
  std::vector<::ONNX_NAMESPACE::TypeProto> outputs;
  std::string error;  // why an output could not be inferred; "" when every one was
};

// The output types of `node`, a node of the default domain in a model of ONNX opset `opset`, when
// one of the ops above at a version newer than 17; nullopt when libonnx's own inference reads it
// (every op at opset <= 17). inputs: one per node input, in order.
std::optional<NewerOpTypes> infer_newer_op(const ::ONNX_NAMESPACE::NodeProto& node, int opset,
                                           const std::vector<NodeInput>& inputs);

}  // namespace dplace::onnx_detail
