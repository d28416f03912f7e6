// Shape rules for ONNX ops that this libonnx cannot infer. Debian 12's libonnx 1.12 knows the
// default domain up to opset 17, and none of onnxruntime's contrib ops (domain com.microsoft),
// while PyTorch's exporters and ONNX's tools write opset 18 to 23, and onnxruntime's transformer
// optimizer and model builder write fused contrib ops. The importer asks these rules first; each
// follows the op's definition (the ONNX operator reference, or onnxruntime's contrib-op schema and
// its shape inference) at the version named beside it.
//
// onnx_newer_ops.cc, ops of the default domain whose signature changed after 17 (libonnx would
// check the node against its older definition and fail: ReduceMean-18 takes its axes as an input,
// which ReduceMean-13 does not accept) or that were added since:
//   changed:  Reduce{L1,L2,LogSum,LogSumExp,Max,Mean,Min,Prod,SumSquare} (18: axes as an input,
//             noop_with_empty_axes), Split (18: num_outputs), Pad (18: axes), Resize (18: axes,
//             keep_aspect_ratio_policy, antialias), LpPool (18) and AveragePool (19): dilations
//             and ceil_mode, Cast and CastLike (19: saturate), QuantizeLinear and DequantizeLinear
//             (19 to 23: block quantization, output_dtype);
//   added:    GroupNormalization, BitwiseAnd/Or/Xor/Not, CenterCropPad, Mish (18), DeformConv (19),
//             Gelu (20), Attention, RMSNormalization, RotaryEmbedding (23), Swish, TensorScatter
//             (24).
// Ops that changed after 17 only in the element types they accept (Reshape, Shape, Squeeze, ...)
// are read correctly by their older definition and are left to libonnx.
//
// onnx_contrib_ops.cc, onnxruntime's fused ops: see infer_contrib_op below.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dplace/io/onnx_common.h"

namespace dplace::onnx_detail {

// A sequence value whose elements dplace knows: ONNX types give a sequence's element type, not
// its length or each element's shape.
struct SequenceInfo {
  int32_t elem_type = 0;
  std::vector<TensorInfo> elements;
};

// One input of a node as the importer knows it.
struct NodeInput {
  const ox::TypeProto* type = nullptr;          // nullptr: absent, or its type is unknown
  const std::vector<double>* values = nullptr;  // a constant input's values, when known
  const SequenceInfo* sequence = nullptr;       // a sequence input's elements, when known
};

struct RuleResult {
  // One per node output; a TypeProto with no value where the output could not be inferred.
  std::vector<ox::TypeProto> outputs;
  // The sequence rules' outputs that are sequences (empty for the other rules, or one per output).
  std::vector<std::optional<SequenceInfo>> sequences;
  std::string error;  // why an output could not be inferred; "" when every one was
};

// The output types of `node`, a node of the default domain in a model of ONNX opset `opset`, when
// one of the ops above at a version newer than 17; nullopt when libonnx's own inference reads it
// (every op at opset <= 17). inputs: one per node input, in order.
std::optional<RuleResult> infer_newer_op(const ox::NodeProto& node, int opset,
                                         const std::vector<NodeInput>& inputs);

// The output types of `node` when it is one of onnxruntime's contrib ops listed in
// docs/importers.md (domain com.microsoft, and SimplifiedLayerNormalization, which onnxruntime
// registers in the default domain); nullopt for any other node.
std::optional<RuleResult> infer_contrib_op(const ox::NodeProto& node,
                                           const std::vector<NodeInput>& inputs);

// The ops that make a sequence dplace knows the tensors of, for messages.
inline constexpr const char* kSequenceMakers =
    "SplitToSequence, SequenceConstruct, SequenceEmpty, SequenceInsert and SequenceErase";

// Whether `node` is one of ONNX's sequence ops that infer_sequence_op reads: SplitToSequence,
// SequenceConstruct, SequenceEmpty, SequenceInsert, SequenceErase, SequenceAt, SequenceLength,
// ConcatFromSequence (default domain).
bool is_sequence_op(const ox::NodeProto& node);

// The output types of sequence op `node` (onnx_sequence_ops.cc); a sequence output's elements are
// in `sequences`, and every sequence input's must be known. REQUIRES: is_sequence_op(node), and
// the node passed its ONNX schema's Verify (input and output counts, attribute types).
RuleResult infer_sequence_op(const ox::NodeProto& node, const std::vector<NodeInput>& inputs);

// ---------------------------------------------------------------------------------------------
// What the rules share.

// What a rule reads: the node and its inputs. A rule sets the outputs it can infer and, when it
// cannot, says why in `result.error` (the importer adds the node and output to the message).
class RuleInputs {
 public:
  RuleInputs(const ox::NodeProto& node, const std::vector<NodeInput>& inputs)
      : node_(node), inputs_(inputs) {}

  const ox::NodeProto& node() const { return node_; }
  bool present(size_t slot) const {
    return slot < inputs_.size() && slot < static_cast<size_t>(node_.input_size()) &&
           !node_.input(static_cast<int>(slot)).empty();
  }
  // Element type of input `slot`, 0 when unknown or absent.
  int32_t elem_type(size_t slot) const {
    if (!present(slot) || inputs_[slot].type == nullptr) return 0;
    const ox::TypeProto& t = *inputs_[slot].type;
    return t.has_tensor_type() ? t.tensor_type().elem_type() : 0;
  }
  // Every dimension of input `slot`, when all are known.
  std::optional<std::vector<int64_t>> dims(size_t slot) const {
    if (!present(slot) || inputs_[slot].type == nullptr) return std::nullopt;
    const ox::TypeProto& t = *inputs_[slot].type;
    if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return std::nullopt;
    std::vector<int64_t> out;
    for (const auto& d : t.tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0) return std::nullopt;
      out.push_back(d.dim_value());
    }
    return out;
  }
  // The values of constant input `slot` as integers (beyond int64's range: its limits), when
  // known and all integral.
  std::optional<std::vector<int64_t>> ints(size_t slot) const {
    if (!present(slot) || inputs_[slot].values == nullptr) return std::nullopt;
    constexpr double kLimit = 9223372036854775807.0;  // 2^63, the first double beyond int64
    std::vector<int64_t> out;
    for (double v : *inputs_[slot].values) {
      if (std::isnan(v) || v != std::trunc(v)) return std::nullopt;
      out.push_back(v >= kLimit    ? std::numeric_limits<int64_t>::max()
                    : v <= -kLimit ? std::numeric_limits<int64_t>::min()
                                   : static_cast<int64_t>(v));
    }
    return out;
  }
  const std::vector<double>* values(size_t slot) const {
    return present(slot) ? inputs_[slot].values : nullptr;
  }
  const SequenceInfo* sequence(size_t slot) const {
    return present(slot) ? inputs_[slot].sequence : nullptr;
  }

 private:
  const ox::NodeProto& node_;
  const std::vector<NodeInput>& inputs_;
};

inline void set_output(RuleResult& result, size_t index, int32_t elem_type,
                       const std::vector<int64_t>& dims) {
  if (index < result.outputs.size()) result.outputs[index] = tensor_type(elem_type, dims);
}

// Sizes come from the file and may be anything: a sum or product that leaves int64 is an error in
// `result`, not a wrap-around.
inline bool checked_add(int64_t a, int64_t b, int64_t& sum, RuleResult& result) {
  if (!__builtin_add_overflow(a, b, &sum)) return true;
  result.error = "its sizes overflow 64-bit integers";
  return false;
}
inline bool checked_mul(int64_t a, int64_t b, int64_t& product, RuleResult& result) {
  if (!__builtin_mul_overflow(a, b, &product)) return true;
  result.error = "its sizes overflow 64-bit integers";
  return false;
}

inline std::string slot_name(size_t slot) { return "input " + std::to_string(slot); }

// Input `slot`'s dims, or an error in `result`.
inline std::optional<std::vector<int64_t>> need_dims(const RuleInputs& in, size_t slot,
                                                     RuleResult& result) {
  std::optional<std::vector<int64_t>> d = in.dims(slot);
  if (!d && result.error.empty()) result.error = "the shape of " + slot_name(slot) + " is unknown";
  return d;
}

// Axes normalised against `rank`, or an error in `result`.
inline std::optional<std::vector<int64_t>> normalize_axes(const std::vector<int64_t>& axes,
                                                          size_t rank, RuleResult& result) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    std::optional<int64_t> n = normalize_axis(a, rank);
    if (!n) {
      result.error =
          "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank);
      return std::nullopt;
    }
    for (int64_t seen : out) {
      if (seen == *n) {
        result.error = "axis " + std::to_string(a) + " is given twice";
        return std::nullopt;
      }
    }
    out.push_back(*n);
  }
  return out;
}

// Every axis of a tensor of rank `rank`: 0, 1, ..., rank - 1.
inline std::vector<int64_t> every_axis(size_t rank) {
  std::vector<int64_t> axes(rank);
  for (size_t i = 0; i < rank; ++i) axes[i] = static_cast<int64_t>(i);
  return axes;
}

// The length of a past key or value cache (input `slot`, rank 4: batch, heads, length, size), 0
// without one, or nullopt with an error in `result`.
inline std::optional<int64_t> past_length(const RuleInputs& in, size_t slot, RuleResult& result) {
  if (!in.present(slot)) return 0;
  std::optional<std::vector<int64_t>> past = need_dims(in, slot, result);
  if (!past) return std::nullopt;
  if (past->size() != 4) {
    result.error = "the past key and value caches must have rank 4";
    return std::nullopt;
  }
  return (*past)[2];
}

// A shape rule: sets the outputs of `in.node()` it can infer, or says in `result.error` why not.
using Rule = void (*)(const RuleInputs& in, RuleResult& result);

// Numpy broadcasting of two shapes, or an error in `result`.
inline std::optional<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& a,
                                                          const std::vector<int64_t>& b,
                                                          RuleResult& result) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t x = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t y = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (x != y && x != 1 && y != 1) {
      result.error =
          "dimensions " + std::to_string(x) + " and " + std::to_string(y) + " do not broadcast";
      return std::nullopt;
    }
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// Output 0 has input 0's type and shape.
inline void same_shape_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (d) set_output(result, 0, in.elem_type(0), *d);
}

}  // namespace dplace::onnx_detail
