// Shape rules for onnxruntime's contrib ops (onnx_op_rules.h): the fused ops its transformer
// optimizer writes into BERT- and GPT-style models (SkipLayerNormalization,
// EmbedLayerNormalization, Attention, MultiHeadAttention, BiasAdd, FastGelu, ...) and those its
// model builder writes into quantized language models (GroupQueryAttention, MatMulNBits,
// RotaryEmbedding, SkipSimplifiedLayerNormalization, ...). Each follows the op's schema and shape
// inference in onnxruntime's contrib-op definitions (version 1 of domain com.microsoft); where
// onnxruntime leaves an output's shape to run time, the rule says what it takes and
// docs/importers.md repeats it.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dplace/io/onnx_common.h"
#include "dplace/io/onnx_op_rules.h"

namespace dplace::onnx_detail {
namespace {

// SkipLayerNormalization and SkipSimplifiedLayerNormalization: output 0 and the sum of input, skip
// and bias (output 3) have the input's shape; mean and inverse standard deviation (outputs 1, 2)
// are float, one per normalised row.
void skip_layer_norm_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  if (d->empty()) {
    result.error = "input 0 is a scalar";
    return;
  }
  std::vector<int64_t> rows = *d;
  rows.back() = 1;
  set_output(result, 0, in.elem_type(0), *d);
  set_output(result, 1, ox::TensorProto_DataType_FLOAT, rows);
  set_output(result, 2, ox::TensorProto_DataType_FLOAT, rows);
  set_output(result, 3, in.elem_type(0), *d);
}

// SimplifiedLayerNormalization (RMS normalisation over the axes from `axis`, default -1): Y has the
// input's shape, the inverse standard deviation (output 1) is float with those axes of size 1.
void simplified_layer_norm_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, 0, result);
  if (!d) return;
  std::optional<int64_t> axis = normalize_axis(attr_int(in.node(), "axis", -1), d->size());
  if (!axis) {
    result.error = "attribute 'axis' is out of range for rank " + std::to_string(d->size());
    return;
  }
  std::vector<int64_t> rows = *d;
  for (size_t i = static_cast<size_t>(*axis); i < rows.size(); ++i) rows[i] = 1;
  set_output(result, 0, in.elem_type(0), *d);
  set_output(result, 1, ox::TensorProto_DataType_FLOAT, rows);
}

// EmbedLayerNormalization: input_ids (batch, sequence) -> output and embedding_sum (batch,
// sequence, hidden) of the word embedding's type and width, and mask_index (batch), int32.
void embed_layer_norm_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> ids = need_dims(in, 0, result);
  std::optional<std::vector<int64_t>> words = need_dims(in, 2, result);
  if (!ids || !words) return;
  if (ids->size() != 2 || words->size() != 2) {
    result.error = "input_ids and word_embedding must have rank 2";
    return;
  }
  const std::vector<int64_t> out = {(*ids)[0], (*ids)[1], (*words)[1]};
  set_output(result, 0, in.elem_type(2), out);
  set_output(result, 1, ox::TensorProto_DataType_INT32, {(*ids)[0]});
  set_output(result, 2, in.elem_type(2), out);
}

// Attention (com.microsoft): input (batch, sequence, input hidden) projected by the merged Q/K/V
// weights (input hidden, hidden + hidden + v_hidden); output (batch, sequence, v_hidden), v_hidden
// from qkv_hidden_sizes, else a third of the bias or of the weights' width. present (output 1)
// extends past (2, batch, heads, past sequence, head size) by the sequence, or is past itself
// with past_present_share_buffer; without past it is (2, batch, heads, sequence, head size).
void ms_attention_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> x = need_dims(in, 0, result);
  if (!x) return;
  if (x->size() != 3) {
    result.error = "input 0 must have rank 3";
    return;
  }
  const std::vector<int64_t> sizes = attr_ints(in.node(), "qkv_hidden_sizes");
  int64_t hidden = 0, v_hidden = 0;
  if (sizes.size() == 3) {
    hidden = sizes[0], v_hidden = sizes[2];
  } else if (std::optional<std::vector<int64_t>> width = in.present(2) ? in.dims(2) : in.dims(1)) {
    if (width->empty()) {
      result.error = "the bias or weights have no dimensions";
      return;
    }
    hidden = v_hidden = width->back() / 3;
  } else {
    result.error = "the shapes of the bias and weights are unknown";
    return;
  }
  const int64_t batch = (*x)[0], sequence = (*x)[1];
  // The output takes the bias's type, as onnxruntime infers it (the input's without a bias).
  set_output(result, 0, in.elem_type(in.present(2) ? 2 : 0), {batch, sequence, v_hidden});
  const int64_t heads = attr_int(in.node(), "num_heads", 0);
  if (in.present(4)) {
    std::optional<std::vector<int64_t>> past = need_dims(in, 4, result);
    if (!past) return;
    if (past->size() != 5) {
      result.error = "past must have rank 5";
      return;
    }
    std::vector<int64_t> present = *past;
    if (attr_int(in.node(), "past_present_share_buffer", 0) == 0 &&
        !checked_add(present[3], sequence, present[3], result)) {
      return;
    }
    set_output(result, 1, in.elem_type(0), present);
  } else if (heads > 0 && hidden % heads == 0) {
    set_output(result, 1, in.elem_type(0), {2, batch, heads, sequence, hidden / heads});
  } else if (result.outputs.size() > 1) {
    result.error = "attribute 'num_heads' does not divide the hidden size";
  }
}

// Outputs 1 to 3 of MultiHeadAttention and GroupQueryAttention: the present key and value caches
// of `keys` positions, (batch, kv heads, keys, head size) in the past cache's type (inputs
// past_slot and past_slot + 1) or else the query's, and the attention scores (batch, heads,
// sequence, keys) in the query's type.
void set_caches_and_scores(const RuleInputs& in, size_t past_slot, int64_t batch, int64_t heads,
                           int64_t kv_heads, int64_t sequence, int64_t keys, int64_t head,
                           int64_t v_head, RuleResult& result) {
  for (size_t k = 0; k < 2; ++k) {
    const size_t slot = past_slot + k;
    set_output(result, 1 + k, in.elem_type(in.present(slot) ? slot : 0),
               {batch, kv_heads, keys, k == 0 ? head : v_head});
  }
  set_output(result, 3, in.elem_type(0), {batch, heads, sequence, keys});
}

// MultiHeadAttention: query (batch, sequence, hidden), key and value (batch, keys, hidden) or
// (batch, heads, keys, head size); or query packed with K and V (batch, sequence, heads, 3, head
// size); or key packed with V (batch, keys, heads, 2, head size) and no value. Output (batch,
// sequence, v_hidden). The present caches (outputs 1, 2) extend past_key/past_value (inputs 6, 7)
// by the new keys, or are the past itself when they share its buffer (past_sequence_length, input
// 8, given; or attribute past_present_share_buffer in older versions).
void multi_head_attention_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> q = need_dims(in, 0, result);
  if (!q) return;
  const int64_t heads = attr_int(in.node(), "num_heads", 0);
  if (heads <= 0) {
    result.error = "attribute 'num_heads' must be positive";
    return;
  }
  if (q->size() != 3 && q->size() != 5) {
    result.error = "query must have rank 3 or 5";
    return;
  }
  const int64_t batch = (*q)[0], sequence = (*q)[1];
  int64_t keys = sequence, hidden = 0, v_hidden = 0;
  if (q->size() == 5) {  // packed Q, K and V
    if (!checked_mul((*q)[2], (*q)[4], hidden, result)) return;
    v_hidden = hidden;
  } else if (in.present(2)) {
    std::optional<std::vector<int64_t>> v = need_dims(in, 2, result);
    if (!v) return;
    if (v->size() == 3) {
      keys = (*v)[1], v_hidden = (*v)[2];
    } else if (v->size() == 4) {
      keys = (*v)[2];
      if (!checked_mul((*v)[1], (*v)[3], v_hidden, result)) return;
    } else {
      result.error = "value must have rank 3 or 4";
      return;
    }
    hidden = (*q)[2];
  } else {  // key packed with value
    std::optional<std::vector<int64_t>> k = need_dims(in, 1, result);
    if (!k) return;
    if (k->size() != 5) {
      result.error = "without a value input, key must be packed as (batch, keys, heads, 2, size)";
      return;
    }
    keys = (*k)[1], hidden = (*q)[2];
    if (!checked_mul((*k)[2], (*k)[4], v_hidden, result)) return;
  }
  set_output(result, 0, in.elem_type(0), {batch, sequence, v_hidden});
  std::optional<int64_t> past = past_length(in, 6, result);
  if (!past) return;
  const bool shared = in.present(8) || attr_int(in.node(), "past_present_share_buffer", 0) != 0;
  int64_t total = keys;
  if (in.present(6)) {
    if (shared) {
      total = *past;
    } else if (!checked_add(*past, keys, total, result)) {
      return;
    }
  }
  set_caches_and_scores(in, 6, batch, heads, heads, sequence, total, hidden / heads,
                        v_hidden / heads, result);
}

// GroupQueryAttention: query (batch, sequence, heads x head size) and key/value (batch, sequence,
// kv heads x head size), or the three packed in the query (batch, sequence, (heads + 2 kv heads) x
// head size) with no key and value; output (batch, sequence, heads x head size). The present
// caches (outputs 1, 2) hold max(past length, total_sequence_length) positions when input 6 is
// constant, as onnxruntime infers, else the past's length (the past and present share a buffer);
// without a past, or with an empty one, the new sequence's.
void group_query_attention_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> q = need_dims(in, 0, result);
  if (!q) return;
  const int64_t heads = attr_int(in.node(), "num_heads", 0);
  const int64_t kv_heads = attr_int(in.node(), "kv_num_heads", 0);
  const bool packed = !in.present(1) && !in.present(2);
  int64_t parts = heads;  // head-size slices of the query's last axis
  if (packed) {
    int64_t kv_parts = 0;
    if (!checked_mul(2, std::max<int64_t>(kv_heads, 0), kv_parts, result) ||
        !checked_add(heads, kv_parts, parts, result)) {
      return;
    }
  }
  if (q->size() != 3 || heads <= 0 || kv_heads <= 0 || (*q)[2] % parts != 0) {
    result.error = "query must have rank 3, and num_heads and kv_num_heads must divide its width";
    return;
  }
  const int64_t head = (*q)[2] / parts;
  int64_t sequence = (*q)[1], keys = sequence;
  set_output(result, 0, in.elem_type(0), {(*q)[0], sequence, heads * head});
  std::optional<int64_t> past = past_length(in, 3, result);
  if (!past) return;
  if (*past > 0) {
    keys = *past;
    if (std::optional<std::vector<int64_t>> total = in.ints(6); total && total->size() == 1) {
      keys = std::max(keys, (*total)[0]);
    }
  }
  set_caches_and_scores(in, 3, (*q)[0], heads, kv_heads, sequence, keys, head, head, result);
}

// MatMulNBits: A (..., K) times a block-quantized (N, K) weight: (..., N), N from attribute N.
void matmul_nbits_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> a = need_dims(in, 0, result);
  if (!a) return;
  const int64_t n = attr_int(in.node(), "N", -1);
  if (a->empty() || n < 0) {
    result.error = "A must have a rank of at least 1 and attribute 'N' must be given";
    return;
  }
  std::vector<int64_t> out = *a;
  out.back() = n;
  set_output(result, 0, in.elem_type(0), out);
}

// FusedMatMul: numpy's matmul of A and B, each transposed in its last two axes by transA/transB.
void fused_matmul_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<std::vector<int64_t>> a = need_dims(in, 0, result);
  std::optional<std::vector<int64_t>> b = need_dims(in, 1, result);
  if (!a || !b) return;
  if (attr_int(in.node(), "transBatchA", 0) != 0 || attr_int(in.node(), "transBatchB", 0) != 0) {
    result.error = "transBatchA and transBatchB are not read";
    return;
  }
  if (a->size() < 2 || b->size() < 2) {
    result.error = "A and B must have rank 2 or more";
    return;
  }
  if (attr_int(in.node(), "transA", 0) != 0) std::swap((*a)[a->size() - 2], a->back());
  if (attr_int(in.node(), "transB", 0) != 0) std::swap((*b)[b->size() - 2], b->back());
  if (a->back() != (*b)[b->size() - 2]) {
    result.error = "the inner dimensions " + std::to_string(a->back()) + " and " +
                   std::to_string((*b)[b->size() - 2]) + " differ";
    return;
  }
  // The batch axes broadcast; the matrix axes multiply.
  std::optional<std::vector<int64_t>> out =
      broadcast_dims({a->begin(), a->end() - 2}, {b->begin(), b->end() - 2}, result);
  if (!out) return;
  out->push_back((*a)[a->size() - 2]);
  out->push_back(b->back());
  set_output(result, 0, in.elem_type(0), *out);
}

struct ContribOp {
  std::string_view domain;  // "*": any domain (activations that several runtimes define)
  std::string_view op;
  Rule rule;
  int min_inputs;  // the inputs up to the last one the schema requires
};

constexpr std::string_view kMicrosoft = "com.microsoft";

constexpr ContribOp kContribOps[] = {
    {"*", "FastGelu", same_shape_rule, 1},
    {"*", "BiasGelu", same_shape_rule, 2},
    {"*", "QuickGelu", same_shape_rule, 1},
    {"*", "Gelu", same_shape_rule, 1},
    {"*", "Mish", same_shape_rule, 1},
    {kMicrosoft, "BiasAdd", same_shape_rule, 3},
    {kMicrosoft, "RotaryEmbedding", same_shape_rule, 4},
    {kMicrosoft, "SkipLayerNormalization", skip_layer_norm_rule, 3},
    {kMicrosoft, "SkipSimplifiedLayerNormalization", skip_layer_norm_rule, 3},
    {kMicrosoft, "SimplifiedLayerNormalization", simplified_layer_norm_rule, 2},
    {"", "SimplifiedLayerNormalization", simplified_layer_norm_rule, 2},
    {kMicrosoft, "EmbedLayerNormalization", embed_layer_norm_rule, 6},
    {kMicrosoft, "Attention", ms_attention_rule, 2},
    {kMicrosoft, "MultiHeadAttention", multi_head_attention_rule, 1},
    {kMicrosoft, "GroupQueryAttention", group_query_attention_rule, 7},
    {kMicrosoft, "MatMulNBits", matmul_nbits_rule, 3},
    {kMicrosoft, "FusedMatMul", fused_matmul_rule, 2},
};

}  // namespace

std::optional<RuleResult> infer_contrib_op(const ox::NodeProto& node,
                                           const std::vector<NodeInput>& inputs) {
  const std::string domain = canonical_domain(node.domain());
  for (const ContribOp& contrib : kContribOps) {
    if (contrib.op != node.op_type() || (contrib.domain != "*" && contrib.domain != domain)) {
      continue;
    }
    RuleResult result;
    result.outputs.resize(static_cast<size_t>(node.output_size()));
    if (node.input_size() < contrib.min_inputs || node.input(0).empty()) {
      result.error = "it has " + std::to_string(node.input_size()) + " inputs; " +
                     std::string(contrib.op) + " takes at least " +
                     std::to_string(contrib.min_inputs);
    } else {
      contrib.rule(RuleInputs(node, inputs), result);
    }
    return result;
  }
  return std::nullopt;
}

}  // namespace dplace::onnx_detail
