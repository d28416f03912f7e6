// Shape rules for ONNX's sequence ops (onnx_op_rules.h lists them), which follow the operator
// reference (opset 11 and later). A sequence's ONNX type says only what its elements are made of;
// these rules also carry how many elements it has and each one's shape, which dplace needs for
// the bytes a sequence holds and for the shapes of the tensors taken out of it.
//
// Exporters write sequences for splits whose pieces are used one by one: PyTorch's exporters lower
// split with a list of sizes, and in some exports chunk and unbind, to SplitToSequence followed by
// SequenceAt at constant positions.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dplace/io/onnx_common.h"
#include "dplace/io/onnx_op_rules.h"

namespace dplace::onnx_detail {
namespace {

// More tensors in one sequence than any model splits into; a damaged file's dimension would
// otherwise make a list of billions.
constexpr int64_t kMaxSequenceLength = 1'000'000;

// The ONNX type of a sequence of `s`'s elements: their element type, and the dims they share
// (a dim they differ in is left without a value; elements of different ranks give no shape).
ox::TypeProto sequence_type(const SequenceInfo& s) {
  ox::TypeProto t;
  ox::TypeProto_Tensor* element =
      t.mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
  element->set_elem_type(s.elem_type);
  if (s.elements.empty()) return t;
  const std::vector<int64_t>& first = s.elements.front().dims;
  for (const TensorInfo& e : s.elements) {
    if (e.dims.size() != first.size()) return t;
  }
  auto* shape = element->mutable_shape();
  for (size_t i = 0; i < first.size(); ++i) {
    auto* dim = shape->add_dim();
    bool same = true;
    for (const TensorInfo& e : s.elements) same = same && e.dims[i] == first[i];
    if (same) dim->set_dim_value(first[i]);
  }
  return t;
}

void set_sequence(RuleResult& result, size_t index, SequenceInfo s) {
  if (index >= result.outputs.size()) return;
  result.outputs[index] = sequence_type(s);
  result.sequences[index] = std::move(s);
}

// Input `slot`'s elements, or an error in `result`.
const SequenceInfo* need_sequence(const RuleInputs& in, size_t slot, RuleResult& result) {
  const SequenceInfo* s = in.sequence(slot);
  if (s == nullptr && result.error.empty()) {
    result.error = slot_name(slot) +
                   " is a sequence whose tensors dplace does not know (it knows those that " +
                   kSequenceMakers + " make)";
  }
  return s;
}

// The sum of split sizes, or nullopt with an error in `result` for a negative size or an overflow.
std::optional<int64_t> sum_of_sizes(const std::vector<int64_t>& sizes, RuleResult& result) {
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) {
      result.error = "its split sizes include a negative one";
      return std::nullopt;
    }
    if (!checked_add(total, s, total, result)) return std::nullopt;
  }
  return total;
}

bool is_index_type(int32_t elem_type) {
  return elem_type == ox::TensorProto_DataType_INT32 || elem_type == ox::TensorProto_DataType_INT64;
}

// Whether every tensor of `s` has shape `dims`.
bool all_shaped_like(const SequenceInfo& s, const std::vector<int64_t>& dims) {
  for (const TensorInfo& e : s.elements) {
    if (e.dims != dims) return false;
  }
  return true;
}

// Input `slot`'s elements when it has some, or an error in `result` that says the op `does` (reads
// from, erases from ...) an empty sequence.
const SequenceInfo* need_tensors(const RuleInputs& in, size_t slot, const std::string& does,
                                 RuleResult& result) {
  const SequenceInfo* s = need_sequence(in, slot, result);
  if (s != nullptr && s->elements.empty()) {
    result.error = "it " + does + " an empty sequence";
    return nullptr;
  }
  return s;
}

// A tensor input's type and shape, or an error in `result`.
std::optional<TensorInfo> need_tensor(const RuleInputs& in, size_t slot, RuleResult& result) {
  std::optional<std::vector<int64_t>> d = need_dims(in, slot, result);
  if (!d) return std::nullopt;
  return TensorInfo{in.elem_type(slot), *d};
}

// The constant scalar position of input `slot` against a sequence of `n` elements, counted from
// the back when negative and accepted in [-n, n - 1] (or [-n, n] when `insert`); nullopt with an
// error in `result`.
std::optional<size_t> position(const RuleInputs& in, size_t slot, size_t n, bool insert,
                               RuleResult& result) {
  std::optional<std::vector<int64_t>> given = in.ints(slot);
  std::optional<std::vector<int64_t>> dims = in.dims(slot);
  if (!is_index_type(in.elem_type(slot)) || !given || given->size() != 1 || !dims ||
      !dims->empty()) {
    result.error = "its position (" + slot_name(slot) + ") is not a constant int32 or int64 scalar";
    return std::nullopt;
  }
  const int64_t p = (*given)[0];
  const auto count = static_cast<int64_t>(n);
  const int64_t last = insert ? count : count - 1;
  if (p < -count || p > last) {
    result.error = "position " + std::to_string(p) + " is out of range for a sequence of " +
                   std::to_string(n) + " tensors";
    return std::nullopt;
  }
  return static_cast<size_t>(p < 0 ? p + count : p);
}

// SplitToSequence-11: pieces of `split`'s sizes (a 1-D input), of its size with a smaller last
// one (a scalar), or of size 1 without it, when `keepdims` 0 drops the split axis.
void split_to_sequence_rule(const RuleInputs& in, RuleResult& result) {
  std::optional<TensorInfo> x = need_tensor(in, 0, result);
  if (!x) return;
  std::optional<int64_t> axis = normalize_axis(attr_int(in.node(), "axis", 0), x->dims.size());
  if (!axis) {
    result.error = "its axis is out of range for rank " + std::to_string(x->dims.size());
    return;
  }
  const int64_t length = x->dims[static_cast<size_t>(*axis)];
  const auto too_long = [&](int64_t pieces) {
    if (pieces <= kMaxSequenceLength) return false;
    result.error = "it would make " + std::to_string(pieces) + " tensors, more than " +
                   std::to_string(kMaxSequenceLength);
    return true;
  };
  std::vector<int64_t> sizes;
  bool keep_axis = true;
  if (!in.present(1)) {
    if (too_long(length)) return;
    sizes.assign(static_cast<size_t>(length), 1);
    keep_axis = attr_int(in.node(), "keepdims", 1) != 0;
  } else {
    std::optional<std::vector<int64_t>> split = in.ints(1);
    std::optional<std::vector<int64_t>> split_dims = in.dims(1);
    if (!is_index_type(in.elem_type(1)) || !split || !split_dims || split_dims->size() > 1 ||
        static_cast<int64_t>(split->size()) != (split_dims->empty() ? 1 : (*split_dims)[0])) {
      result.error = "its split (input 1) is not a constant int32 or int64 scalar or 1-D tensor";
      return;
    }
    if (split_dims->empty()) {
      const int64_t piece = (*split)[0];
      if (piece <= 0) {
        result.error = "its split size " + std::to_string(piece) + " is not positive";
        return;
      }
      const int64_t pieces = length / piece + (length % piece != 0 ? 1 : 0);
      if (too_long(pieces)) return;
      for (int64_t k = 0; k < pieces; ++k) sizes.push_back(std::min(piece, length - k * piece));
    } else {
      const std::optional<int64_t> total = sum_of_sizes(*split, result);
      if (!total) return;
      if (*total != length) {
        result.error = "its split sizes add up to " + std::to_string(*total) + ", not " +
                       std::to_string(length) + " (the split axis)";
        return;
      }
      sizes = *split;
    }
  }
  SequenceInfo out{x->elem_type, {}};
  for (int64_t size : sizes) {
    TensorInfo piece = *x;
    if (keep_axis) {
      piece.dims[static_cast<size_t>(*axis)] = size;
    } else {
      piece.dims.erase(piece.dims.begin() + *axis);
    }
    out.elements.push_back(std::move(piece));
  }
  set_sequence(result, 0, std::move(out));
}

void sequence_construct_rule(const RuleInputs& in, RuleResult& result) {
  SequenceInfo out;
  for (size_t slot = 0; slot < static_cast<size_t>(in.node().input_size()); ++slot) {
    std::optional<TensorInfo> x = need_tensor(in, slot, result);
    if (!x) return;
    if (slot > 0 && x->elem_type != out.elem_type) {
      result.error = "its inputs are of different element types";
      return;
    }
    out.elem_type = x->elem_type;
    out.elements.push_back(std::move(*x));
  }
  set_sequence(result, 0, std::move(out));
}

void sequence_empty_rule(const RuleInputs& in, RuleResult& result) {
  const int64_t dtype = attr_int(in.node(), "dtype", ox::TensorProto_DataType_FLOAT);
  if (dtype < 0 || dtype > std::numeric_limits<int32_t>::max() ||
      !is_element_type(static_cast<int32_t>(dtype))) {
    result.error = "its dtype " + std::to_string(dtype) + " is no element type";
    return;
  }
  set_sequence(result, 0, SequenceInfo{static_cast<int32_t>(dtype), {}});
}

void sequence_insert_rule(const RuleInputs& in, RuleResult& result) {
  const SequenceInfo* s = need_sequence(in, 0, result);
  std::optional<TensorInfo> x = need_tensor(in, 1, result);
  if (s == nullptr || !x) return;
  if (x->elem_type != s->elem_type) {
    result.error = "its tensor's element type differs from the sequence's";
    return;
  }
  size_t at = s->elements.size();
  if (in.present(2) && !(in.values(2) == nullptr && all_shaped_like(*s, x->dims))) {
    std::optional<size_t> p = position(in, 2, s->elements.size(), true, result);
    if (!p) return;
    at = *p;
  }  // else every tensor has one shape: where the new one goes does not matter
  SequenceInfo out = *s;
  out.elements.insert(out.elements.begin() + static_cast<std::ptrdiff_t>(at), std::move(*x));
  set_sequence(result, 0, std::move(out));
}

void sequence_erase_rule(const RuleInputs& in, RuleResult& result) {
  const SequenceInfo* s = need_tensors(in, 0, "erases from", result);
  if (s == nullptr) return;
  size_t at = s->elements.size() - 1;
  if (in.present(1) && !(in.values(1) == nullptr && all_shaped_like(*s, s->elements[0].dims))) {
    std::optional<size_t> p = position(in, 1, s->elements.size(), false, result);
    if (!p) return;
    at = *p;
  }  // else every tensor has one shape: which one goes does not matter
  SequenceInfo out = *s;
  out.elements.erase(out.elements.begin() + static_cast<std::ptrdiff_t>(at));
  set_sequence(result, 0, std::move(out));
}

// SequenceAt: the element at a constant position; at a position known only at run time, the
// shape all the elements share.
void sequence_at_rule(const RuleInputs& in, RuleResult& result) {
  const SequenceInfo* s = need_tensors(in, 0, "reads from", result);
  if (s == nullptr) return;
  if (in.values(1) == nullptr && all_shaped_like(*s, s->elements.front().dims)) {
    set_output(result, 0, s->elem_type, s->elements.front().dims);
    return;
  }
  if (in.values(1) == nullptr) {
    result.error =
        "its position (input 1) is not constant and the sequence's tensors differ in shape";
    return;
  }
  std::optional<size_t> p = position(in, 1, s->elements.size(), false, result);
  if (p) set_output(result, 0, s->elem_type, s->elements[*p].dims);
}

void sequence_length_rule(const RuleInputs& in, RuleResult& result) {
  if (need_sequence(in, 0, result) != nullptr) {
    set_output(result, 0, ox::TensorProto_DataType_INT64, {});
  }
}

// ConcatFromSequence-11: the elements joined along `axis`, or stacked on a new axis there when
// `new_axis` is 1.
void concat_from_sequence_rule(const RuleInputs& in, RuleResult& result) {
  const SequenceInfo* s = need_tensors(in, 0, "concatenates", result);
  if (s == nullptr) return;
  if (find_attr(in.node(), "axis") == nullptr) {
    result.error = "it has no axis attribute";
    return;
  }
  const int64_t new_axis = attr_int(in.node(), "new_axis", 0);
  if (new_axis != 0 && new_axis != 1) {
    result.error = "its new_axis is " + std::to_string(new_axis) + ", not 0 or 1";
    return;
  }
  const bool stack = new_axis == 1;
  const std::vector<int64_t>& first = s->elements.front().dims;
  const size_t rank = first.size() + (stack ? 1 : 0);
  std::optional<int64_t> axis = normalize_axis(attr_int(in.node(), "axis", 0), rank);
  if (!axis || (!stack && first.empty())) {
    result.error = "its axis is out of range for the sequence's tensors";
    return;
  }
  const auto a = static_cast<size_t>(*axis);
  std::vector<int64_t> out = first;
  if (stack) {
    out.insert(out.begin() + *axis, static_cast<int64_t>(s->elements.size()));
  } else {
    out[a] = 0;
  }
  for (const TensorInfo& e : s->elements) {
    bool fits = e.dims.size() == first.size();
    for (size_t i = 0; fits && i < first.size(); ++i) {
      fits = e.dims[i] == first[i] || (!stack && i == a);
    }
    if (!fits) {
      result.error = "the sequence's tensors differ in shape beyond the concatenation axis";
      return;
    }
    if (!stack && !checked_add(out[a], e.dims[a], out[a], result)) return;
  }
  set_output(result, 0, s->elem_type, out);
}

struct SequenceOp {
  const char* op;
  Rule rule;
};

constexpr SequenceOp kSequenceOps[] = {
    {"SplitToSequence", split_to_sequence_rule}, {"SequenceConstruct", sequence_construct_rule},
    {"SequenceEmpty", sequence_empty_rule},      {"SequenceInsert", sequence_insert_rule},
    {"SequenceErase", sequence_erase_rule},      {"SequenceAt", sequence_at_rule},
    {"SequenceLength", sequence_length_rule},    {"ConcatFromSequence", concat_from_sequence_rule},
};

const SequenceOp* find_sequence_op(const ox::NodeProto& node) {
  if (!canonical_domain(node.domain()).empty()) return nullptr;
  for (const SequenceOp& sequence_op : kSequenceOps) {
    if (sequence_op.op == node.op_type()) return &sequence_op;
  }
  return nullptr;
}

}  // namespace

bool is_sequence_op(const ox::NodeProto& node) { return find_sequence_op(node) != nullptr; }

RuleResult infer_sequence_op(const ox::NodeProto& node, const std::vector<NodeInput>& inputs) {
  RuleResult result;
  result.outputs.resize(static_cast<size_t>(node.output_size()));
  result.sequences.resize(static_cast<size_t>(node.output_size()));
  find_sequence_op(node)->rule(RuleInputs(node, inputs), result);
  return result;
}

}  // namespace dplace::onnx_detail
