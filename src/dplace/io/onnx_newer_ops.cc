// Shape rules for the ONNX ops of the default domain newer than this libonnx (onnx_op_rules.h
// lists them). Each follows the op's definition in the ONNX operator reference at the version
// named beside it.

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dplace/io/onnx_common.h"
#include "dplace/io/onnx_op_rules.h"

namespace dplace::onnx_detail {
namespace {

// Reduce*-18: axes is an optional int64 input; without it (or with it empty) every axis is reduced
// unless noop_with_empty_axes is 1, which makes the op an identity.
void reduce_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  std::vector<int64_t> axes;
  if (in.present(1)) {
    std::optional<std::vector<int64_t>> given = in.ints(1);
    if (!given) {
      result.error = "its axes (input 1) are not constant";
      return;
    }
    axes = *given;
  }
  const bool keepdims = attr_int(in.node(), "keepdims", 1) != 0;
  if (axes.empty()) {
    if (attr_int(in.node(), "noop_with_empty_axes", 0) != 0) {
      set_output(result, 0, in.elem_type(0), *d);
      return;
    }
    axes = every_axis(d->size());
  }
  std::optional<std::vector<int64_t>> reduced = normalize_axes(axes, d->size(), result);
  if (!reduced) return;
  std::vector<int64_t> out;
  for (size_t i = 0; i < d->size(); ++i) {
    bool is_reduced = false;
    for (int64_t a : *reduced) is_reduced = is_reduced || a == static_cast<int64_t>(i);
    if (!is_reduced) {
      out.push_back((*d)[i]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  set_output(result, 0, in.elem_type(0), out);
}

// Split-18: sizes from the `split` input, else num_outputs chunks of ceil(dim / n) with a smaller
// last one, else equal parts, one per output.
void split_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  std::optional<int64_t> axis = normalize_axis(attr_int(in.node(), "axis", 0), d->size());
  if (!axis) {
    result.error = "attribute 'axis' is out of range for rank " + std::to_string(d->size());
    return;
  }
  const int64_t dim = (*d)[static_cast<size_t>(*axis)];
  const auto outputs = static_cast<int64_t>(in.node().output_size());
  std::vector<int64_t> sizes;
  if (in.present(1) && find_attr(in.node(), "num_outputs") != nullptr) {
    result.error = "it gives both split sizes (input 1) and attribute 'num_outputs'";
    return;
  }
  if (in.present(1)) {
    std::optional<std::vector<int64_t>> given = in.ints(1);
    if (!given) {
      result.error = "its split sizes (input 1) are not constant";
      return;
    }
    sizes = *given;
  } else if (find_attr(in.node(), "num_outputs") != nullptr) {
    const int64_t n = attr_int(in.node(), "num_outputs", 0);
    if (n <= 0 || n != outputs) {
      result.error = "attribute 'num_outputs' is " + std::to_string(n) + " but the node has " +
                     std::to_string(outputs) + " outputs";
      return;
    }
    const int64_t chunk = dim / n + (dim % n != 0 ? 1 : 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t start = 0;
      if (!checked_mul(i, chunk, start, result)) return;
      sizes.push_back(std::min(chunk, dim - start));
    }
  } else {
    if (outputs <= 0 || dim % outputs != 0) {
      result.error = "dimension " + std::to_string(dim) + " does not split into " +
                     std::to_string(outputs) + " equal parts";
      return;
    }
    sizes.assign(static_cast<size_t>(outputs), dim / outputs);
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) {
      result.error = "dimension " + std::to_string(dim) + " cannot be split into " +
                     std::to_string(sizes.size()) + " parts";
      return;
    }
    if (!checked_add(total, s, total, result)) return;
  }
  if (static_cast<int64_t>(sizes.size()) != outputs || total != dim) {
    result.error = "split sizes do not add up to dimension " + std::to_string(dim) + " over " +
                   std::to_string(outputs) + " outputs";
    return;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> out = *d;
    out[static_cast<size_t>(*axis)] = sizes[i];
    set_output(result, i, in.elem_type(0), out);
  }
}

// Pad-18: pads (input 1) hold the begin values of every padded axis, then the end values; the
// padded axes are `axes` (input 3) or all of them.
void pad_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  std::optional<std::vector<int64_t>> pads = in.ints(1);
  if (!pads) {
    result.error = "its pads (input 1) are not constant";
    return;
  }
  std::vector<int64_t> axes;
  if (in.present(3)) {
    std::optional<std::vector<int64_t>> given = in.ints(3);
    if (!given) {
      result.error = "its axes (input 3) are not constant";
      return;
    }
    axes = *given;
  } else {
    axes = every_axis(d->size());
  }
  std::optional<std::vector<int64_t>> padded = normalize_axes(axes, d->size(), result);
  if (!padded) return;
  if (pads->size() != 2 * padded->size()) {
    result.error = "it has " + std::to_string(pads->size()) + " pads for " +
                   std::to_string(padded->size()) + " axes (expected twice as many)";
    return;
  }
  std::vector<int64_t> out = *d;
  for (size_t i = 0; i < padded->size(); ++i) {
    int64_t& dim = out[static_cast<size_t>((*padded)[i])];
    if (!checked_add(dim, (*pads)[i], dim, result) ||
        !checked_add(dim, (*pads)[i + padded->size()], dim, result)) {
      return;
    }
    if (dim < 0) {
      result.error = "padding makes axis " + std::to_string((*padded)[i]) + " negative";
      return;
    }
  }
  set_output(result, 0, in.elem_type(0), out);
}

// Resize-18: scales (input 2) or sizes (input 3), not both, for the axes in attribute `axes`
// (default all); with sizes, keep_aspect_ratio_policy not_larger/not_smaller scales every resized
// axis by the smallest/largest of the ratios. As in ONNX's own shape inference, sizes from scales
// and ratios are computed in single precision (floor(10 * 0.7f) is 7, where doubles give 6); roi
// (tf_crop_and_resize) does not change the shape.
void resize_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  std::vector<int64_t> axes = attr_ints(in.node(), "axes");
  if (axes.empty()) axes = every_axis(d->size());
  std::optional<std::vector<int64_t>> resized = normalize_axes(axes, d->size(), result);
  if (!resized) return;
  const std::vector<double>* scales = in.values(2);
  std::optional<std::vector<int64_t>> sizes = in.ints(3);
  if (sizes && sizes->empty()) sizes.reset();
  if (scales != nullptr && scales->empty()) scales = nullptr;
  if (sizes && scales != nullptr) {
    result.error = "it gives both scales (input 2) and sizes (input 3)";
    return;
  }
  const std::string policy = attr_string(in.node(), "keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
    result.error = "attribute 'keep_aspect_ratio_policy' is '" + policy + "'";
    return;
  }
  const std::vector<int64_t>* given = sizes ? &*sizes : nullptr;
  const size_t count = sizes ? sizes->size() : scales != nullptr ? scales->size() : 0;
  if (given == nullptr && scales == nullptr) {
    result.error = "neither its scales (input 2) nor its sizes (input 3) are constant";
    return;
  }
  if (count != resized->size()) {
    result.error = "it has " + std::to_string(count) + (sizes ? " sizes" : " scales") + " for " +
                   std::to_string(resized->size()) + " axes";
    return;
  }
  if (scales != nullptr && policy != "stretch") {
    result.error = "keep_aspect_ratio_policy '" + policy + "' applies to sizes, not scales";
    return;
  }
  // Per resized axis, the factor its size is multiplied by (then floored, or rounded for a kept
  // aspect ratio), or the size itself.
  std::vector<float> factors;
  if (scales != nullptr) {
    for (double scale : *scales) factors.push_back(static_cast<float>(scale));
  } else if (policy != "stretch") {
    std::optional<float> scale;
    for (size_t i = 0; i < count; ++i) {
      const int64_t from = (*d)[static_cast<size_t>((*resized)[i])];
      if (from == 0) continue;
      const float ratio = static_cast<float>((*sizes)[i]) / static_cast<float>(from);
      if (!scale || (policy == "not_larger" ? ratio < *scale : ratio > *scale)) scale = ratio;
    }
    factors.assign(count, scale.value_or(1.0F));
  }
  std::vector<int64_t> out = *d;
  for (size_t i = 0; i < count; ++i) {
    int64_t& size = out[static_cast<size_t>((*resized)[i])];
    if (factors.empty()) {
      size = (*sizes)[i];
      continue;
    }
    const float factor = factors[i];
    const float scaled = scales != nullptr ? std::floor(static_cast<float>(size) * factor)
                                           : std::round(static_cast<float>(size) * factor);
    if (!(factor > 0) || !(scaled < 9.0e15F)) {
      result.error = "scale " + std::to_string(factor) + " is not a positive size factor";
      return;
    }
    size = static_cast<int64_t>(scaled);
  }
  set_output(result, 0, in.elem_type(0), out);
}

// AveragePool-19 and LpPool-18: pooling windows with dilations, pads or auto_pad, and ceil_mode
// (where a window that would start past the input and its begin padding is dropped).
void pool_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  if (d->size() < 3) {
    result.error = "input 0 has rank " + std::to_string(d->size()) + ", expected at least 3";
    return;
  }
  const size_t spatial = d->size() - 2;
  const std::vector<int64_t> kernel = attr_ints(in.node(), "kernel_shape");
  std::vector<int64_t> strides = attr_ints(in.node(), "strides");
  std::vector<int64_t> dilations = attr_ints(in.node(), "dilations");
  std::vector<int64_t> pads = attr_ints(in.node(), "pads");
  if (strides.empty()) strides.assign(spatial, 1);
  if (dilations.empty()) dilations.assign(spatial, 1);
  if (pads.empty()) pads.assign(2 * spatial, 0);
  if (kernel.size() != spatial || strides.size() != spatial || dilations.size() != spatial ||
      pads.size() != 2 * spatial) {
    result.error = "kernel_shape, strides, dilations or pads do not match the " +
                   std::to_string(spatial) + " spatial axes";
    return;
  }
  const std::string auto_pad = attr_string(in.node(), "auto_pad", "NOTSET");
  const bool ceil_mode = attr_int(in.node(), "ceil_mode", 0) != 0;
  std::vector<int64_t> out = {(*d)[0], (*d)[1]};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t size = (*d)[i + 2];
    if (kernel[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0 ||
        pads[i + spatial] < 0) {
      result.error = "kernel_shape, strides, dilations or pads has a bad value";
      return;
    }
    int64_t window = 0;  // (kernel - 1) * dilation + 1
    if (!checked_mul(kernel[i] - 1, dilations[i], window, result) ||
        !checked_add(window, 1, window, result)) {
      return;
    }
    const int64_t stride = strides[i];
    int64_t n = 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      n = size / stride + (size % stride != 0 ? 1 : 0);
    } else {
      const int64_t begin = auto_pad == "VALID" ? 0 : pads[i];
      const int64_t end = auto_pad == "VALID" ? 0 : pads[i + spatial];
      int64_t reach = 0;   // size + begin: where the end padding starts
      int64_t padded = 0;  // size + begin + end
      if (!checked_add(size, begin, reach, result) || !checked_add(reach, end, padded, result)) {
        return;
      }
      const int64_t span = padded - window;
      if (span < 0) {
        result.error = "the pooling window is larger than the padded input";
        return;
      }
      n = span / stride + (ceil_mode && span % stride != 0 ? 1 : 0) + 1;
      // In ceil mode a last window that would start in the end padding is dropped.
      if (ceil_mode && n - 1 >= reach / stride + (reach % stride != 0 ? 1 : 0)) --n;
    }
    out.push_back(n);
  }
  set_output(result, 0, in.elem_type(0), out);
}

// Output 0 of a conversion: `dims` with element type `type`, which must be known and name a type.
void set_converted_output(const std::vector<int64_t>& dims, int32_t type, RuleResult& result) {
  if (type == 0) {
    result.error = "its output type is unknown";
  } else if (!is_element_type(type)) {
    result.error = "element type " + std::to_string(type) + " is not an ONNX tensor type";
  } else {
    set_output(result, 0, type, dims);
  }
}

// Cast-19 (saturate) and CastLike-19: the input's shape, the type named by `to` or input 1.
void cast_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  const int32_t to = in.node().op_type() == "CastLike"
                         ? in.elem_type(1)
                         : static_cast<int32_t>(attr_int(in.node(), "to", 0));
  set_converted_output(*d, to, result);
}

// QuantizeLinear-19/21/23: x's shape; the type of the zero point, else output_dtype, else uint8.
// DequantizeLinear-19/21/23: x's shape; output_dtype, else the scale's type.
void quantize_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  const auto output_dtype = static_cast<int32_t>(attr_int(in.node(), "output_dtype", 0));
  int32_t type = 0;
  if (in.node().op_type() == "QuantizeLinear") {
    type = in.present(2)       ? in.elem_type(2)
           : output_dtype != 0 ? output_dtype
                               : static_cast<int32_t>(ox::TensorProto_DataType_UINT8);
  } else {
    type = output_dtype != 0 ? output_dtype : in.elem_type(1);
  }
  set_converted_output(*d, type, result);
}

// BitwiseAnd/Or/Xor-18: numpy broadcasting of inputs 0 and 1.
void broadcast_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> a = need_dims(in, 0, result);
  std::optional<std::vector<int64_t>> b = need_dims(in, 1, result);
  if (!a || !b) return;
  if (std::optional<std::vector<int64_t>> out = broadcast_dims(*a, *b, result)) {
    set_output(result, 0, in.elem_type(0), *out);
  }
}

// CenterCropPad-18: the axes in attribute `axes` (default all) take the sizes of input 1.
void center_crop_pad_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  std::optional<std::vector<int64_t>> shape = in.ints(1);
  if (!shape) {
    result.error = "its shape (input 1) is not constant";
    return;
  }
  std::vector<int64_t> axes = attr_ints(in.node(), "axes");
  if (axes.empty()) axes = every_axis(d->size());
  std::optional<std::vector<int64_t>> cropped = normalize_axes(axes, d->size(), result);
  if (!cropped) return;
  if (shape->size() != cropped->size()) {
    result.error = "it has " + std::to_string(shape->size()) + " sizes for " +
                   std::to_string(cropped->size()) + " axes";
    return;
  }
  std::vector<int64_t> out = *d;
  for (size_t i = 0; i < cropped->size(); ++i) {
    if ((*shape)[i] < 0) {
      result.error = "size " + std::to_string((*shape)[i]) + " is negative";
      return;
    }
    out[static_cast<size_t>((*cropped)[i])] = (*shape)[i];
  }
  set_output(result, 0, in.elem_type(0), out);
}

// DeformConv-19: X (N, C, spatial), W (oC, C/group, kernel), offset (N, 2 * offset_group *
// prod(kernel), out spatial): the output is (N, oC, out spatial).
void deform_conv_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> x = need_dims(in, 0, result);
  std::optional<std::vector<int64_t>> w = need_dims(in, 1, result);
  std::optional<std::vector<int64_t>> offset = need_dims(in, 2, result);
  if (!x || !w || !offset) return;
  if (x->size() < 3 || w->size() != x->size() || offset->size() != x->size()) {
    result.error = "X, W and offset must have one rank of at least 3";
    return;
  }
  std::vector<int64_t> out = {(*x)[0], (*w)[0]};
  out.insert(out.end(), offset->begin() + 2, offset->end());
  set_output(result, 0, in.elem_type(0), out);
}

// Attention-23: Q, K, V as (batch, heads, sequence, head size) or, with q_num_heads and
// kv_num_heads, as (batch, sequence, heads x head size); past_key and past_value (inputs 4, 5) are
// (batch, kv heads, past sequence, head size). Outputs: Y in Q's layout with V's head size,
// present_key and present_value over past + new sequence, and the attention scores.
void attention_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> q = need_dims(in, 0, result);
  std::optional<std::vector<int64_t>> k = need_dims(in, 1, result);
  std::optional<std::vector<int64_t>> v = need_dims(in, 2, result);
  if (!q || !k || !v) return;
  const size_t rank = q->size();
  if ((rank != 3 && rank != 4) || k->size() != rank || v->size() != rank) {
    result.error = "Q, K and V must all have rank 3 or all rank 4";
    return;
  }
  int64_t batch = (*q)[0], q_heads = 0, q_seq = 0, head = 0, kv_heads = 0, kv_seq = 0, v_head = 0;
  if (rank == 4) {
    q_heads = (*q)[1], q_seq = (*q)[2], head = (*q)[3];
    kv_heads = (*k)[1], kv_seq = (*k)[2], v_head = (*v)[3];
  } else {
    q_heads = attr_int(in.node(), "q_num_heads", 0);
    kv_heads = attr_int(in.node(), "kv_num_heads", 0);
    if (q_heads <= 0 || kv_heads <= 0 || (*q)[2] % q_heads != 0 || (*v)[2] % kv_heads != 0) {
      result.error =
          "3-D inputs need attributes q_num_heads and kv_num_heads dividing the hidden sizes";
      return;
    }
    q_seq = (*q)[1], head = (*q)[2] / q_heads;
    kv_seq = (*k)[1], v_head = (*v)[2] / kv_heads;
  }
  std::optional<int64_t> past = past_length(in, 4, result);
  if (!past) return;
  int64_t keys = 0, q_hidden = 0;  // past + new sequence; Y's last dimension in 3-D
  if (!checked_add(*past, kv_seq, keys, result) ||
      !checked_mul(q_heads, v_head, q_hidden, result)) {
    return;
  }
  // Y and the scores take Q's type; the present caches their past's, else K's and V's.
  const int32_t type = in.elem_type(0);
  if (rank == 4) {
    set_output(result, 0, type, {batch, q_heads, q_seq, v_head});
  } else {
    set_output(result, 0, type, {batch, q_seq, q_hidden});
  }
  set_output(result, 1, in.elem_type(in.present(4) ? 4 : 1), {batch, kv_heads, keys, head});
  set_output(result, 2, in.elem_type(in.present(5) ? 5 : 2), {batch, kv_heads, keys, v_head});
  set_output(result, 3, type, {batch, q_heads, q_seq, keys});
}

struct NewerOp {
  std::string_view op;
  int since;  // the first opset whose definition libonnx 1.12 does not have
  Rule rule;
  int min_inputs, max_inputs;
  std::string_view attributes;  // the names the newest definition has, separated by spaces
};

constexpr std::string_view kReduce = "keepdims noop_with_empty_axes";

constexpr NewerOp kNewerOps[] = {
    {"ReduceL1", 18, reduce_rule, 1, 2, kReduce},
    {"ReduceL2", 18, reduce_rule, 1, 2, kReduce},
    {"ReduceLogSum", 18, reduce_rule, 1, 2, kReduce},
    {"ReduceLogSumExp", 18, reduce_rule, 1, 2, kReduce},
    {"ReduceMax", 18, reduce_rule, 1, 2, kReduce},
    {"ReduceMean", 18, reduce_rule, 1, 2, kReduce},
    {"ReduceMin", 18, reduce_rule, 1, 2, kReduce},
    {"ReduceProd", 18, reduce_rule, 1, 2, kReduce},
    {"ReduceSumSquare", 18, reduce_rule, 1, 2, kReduce},
    {"Split", 18, split_rule, 1, 2, "axis num_outputs"},
    {"Pad", 18, pad_rule, 2, 4, "mode"},
    {"Resize", 18, resize_rule, 1, 4,
     "antialias axes coordinate_transformation_mode cubic_coeff_a exclude_outside "
     "extrapolation_value keep_aspect_ratio_policy mode nearest_mode"},
    {"LpPool", 18, pool_rule, 1, 1, "auto_pad ceil_mode dilations kernel_shape p pads strides"},
    {"AveragePool", 19, pool_rule, 1, 1,
     "auto_pad ceil_mode count_include_pad dilations kernel_shape pads strides"},
    {"Cast", 19, cast_rule, 1, 1, "round_mode saturate to"},
    {"CastLike", 19, cast_rule, 2, 2, "round_mode saturate"},
    {"QuantizeLinear", 19, quantize_rule, 2, 3, "axis block_size output_dtype precision saturate"},
    {"DequantizeLinear", 19, quantize_rule, 2, 3, "axis block_size output_dtype"},
    {"GroupNormalization", 18, same_shape_rule, 3, 3, "epsilon num_groups stash_type"},
    {"BitwiseNot", 18, same_shape_rule, 1, 1, ""},
    {"Mish", 18, same_shape_rule, 1, 1, ""},
    {"BitwiseAnd", 18, broadcast_rule, 2, 2, ""},
    {"BitwiseOr", 18, broadcast_rule, 2, 2, ""},
    {"BitwiseXor", 18, broadcast_rule, 2, 2, ""},
    {"CenterCropPad", 18, center_crop_pad_rule, 2, 2, "axes"},
    {"DeformConv", 19, deform_conv_rule, 3, 5,
     "dilations group kernel_shape offset_group pads strides"},
    {"Gelu", 20, same_shape_rule, 1, 1, "approximate"},
    {"Attention", 23, attention_rule, 3, 7,
     "is_causal kv_num_heads q_num_heads qk_matmul_output_mode scale softcap "
     "softmax_precision"},
    {"RMSNormalization", 23, same_shape_rule, 2, 2, "axis epsilon stash_type"},
    {"RotaryEmbedding", 23, same_shape_rule, 3, 4, "interleaved num_heads rotary_embedding_dim"},
    {"Swish", 24, same_shape_rule, 1, 1, "alpha"},
    {"TensorScatter", 24, same_shape_rule, 2, 3, "axis mode"},
};

// What libonnx's schema->Verify checks of a node it knows: the number of inputs and that every
// attribute belongs to the op. "" when the node is well formed.
std::string check_signature(const NewerOp& newer, const ox::NodeProto& node) {
  const std::string name = std::string(newer.op) + "-" + std::to_string(newer.since);
  const int inputs = node.input_size();
  if (inputs < newer.min_inputs || inputs > newer.max_inputs) {
    return "it has " + std::to_string(inputs) + " inputs; " + name + " takes " +
           std::to_string(newer.min_inputs) +
           (newer.max_inputs > newer.min_inputs ? " to " + std::to_string(newer.max_inputs) : "");
  }
  for (int slot = 0; slot < newer.min_inputs; ++slot) {
    if (node.input(slot).empty()) return "its required input " + std::to_string(slot) + " is empty";
  }
  for (const auto& a : node.attribute()) {
    bool known = false;
    std::string_view rest = newer.attributes;
    while (!known && !rest.empty()) {
      const size_t space = rest.find(' ');
      known = rest.substr(0, space) == a.name();
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
    if (!known) return "attribute '" + a.name() + "' is not one of " + name + "'s";
  }
  return "";
}

}  // namespace

std::optional<RuleResult> infer_newer_op(const ox::NodeProto& node, int opset,
                                         const std::vector<NodeInput>& inputs) {
  for (const NewerOp& newer : kNewerOps) {
    if (newer.op != node.op_type() || opset < newer.since) continue;
    RuleResult result;
    result.outputs.resize(static_cast<size_t>(node.output_size()));
    result.error = check_signature(newer, node);
    if (result.error.empty()) newer.rule(RuleInputs(node, inputs), result);
    return result;
  }
  return std::nullopt;
}

}  // namespace dplace::onnx_detail
