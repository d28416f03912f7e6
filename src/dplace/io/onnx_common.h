// Tensor types, attribute readers and graph walks shared by the ONNX importer's translation units
// (onnx_import.cc, onnx_newer_ops.cc, onnx_contrib_ops.cc, onnx_functions.cc). Internal to the io
// module: no other module includes an ONNX header.
//
// Element types are ONNX's TensorProto.DataType numbers. This libonnx (1.12) names them up to 16
// (BFLOAT16); the numbers newer ONNX releases added (float8: 17-20, 4-bit integers: 21-22, float4:
// 23) are sized here too, so that a newer model's tensors count the bytes they hold.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dplace::onnx_detail {

namespace ox = ::ONNX_NAMESPACE;

// The element types newer than this libonnx's enum.
constexpr int32_t kFloat8E4M3FN = 17;
constexpr int32_t kFloat8E4M3FNUZ = 18;
constexpr int32_t kFloat8E5M2 = 19;
constexpr int32_t kFloat8E5M2FNUZ = 20;
constexpr int32_t kUint4 = 21;
constexpr int32_t kInt4 = 22;
constexpr int32_t kFloat4E2M1 = 23;

// Whole bytes per element of the types whose values dplace decodes and folds; 0 for the others
// (strings, undefined, and the float8/4-bit types, whose values are never evaluated).
inline int64_t element_bytes(int32_t elem_type) {
  switch (elem_type) {
    case ox::TensorProto_DataType_FLOAT:
    case ox::TensorProto_DataType_INT32:
    case ox::TensorProto_DataType_UINT32:
      return 4;
    case ox::TensorProto_DataType_UINT8:
    case ox::TensorProto_DataType_INT8:
    case ox::TensorProto_DataType_BOOL:
      return 1;
    case ox::TensorProto_DataType_UINT16:
    case ox::TensorProto_DataType_INT16:
    case ox::TensorProto_DataType_FLOAT16:
    case ox::TensorProto_DataType_BFLOAT16:
      return 2;
    case ox::TensorProto_DataType_INT64:
    case ox::TensorProto_DataType_DOUBLE:
    case ox::TensorProto_DataType_UINT64:
    case ox::TensorProto_DataType_COMPLEX64:
      return 8;
    case ox::TensorProto_DataType_COMPLEX128:
      return 16;
    default:
      return 0;  // STRING, UNDEFINED, and the types below
  }
}

// Bits per element of every type with a fixed size (the 4-bit types are packed two to a byte);
// 0 for strings and unknown types.
inline int64_t element_bits(int32_t elem_type) {
  switch (elem_type) {
    case kFloat8E4M3FN:
    case kFloat8E4M3FNUZ:
    case kFloat8E5M2:
    case kFloat8E5M2FNUZ:
      return 8;
    case kUint4:
    case kInt4:
    case kFloat4E2M1:
      return 4;
    default:
      return 8 * element_bytes(elem_type);
  }
}

// Whether `elem_type` names a tensor element type (every type with a size, and strings).
inline bool is_element_type(int32_t elem_type) {
  return element_bits(elem_type) > 0 || elem_type == ox::TensorProto_DataType_STRING;
}

inline bool is_integer_type(int32_t elem_type) {
  switch (elem_type) {
    case ox::TensorProto_DataType_UINT8:
    case ox::TensorProto_DataType_INT8:
    case ox::TensorProto_DataType_UINT16:
    case ox::TensorProto_DataType_INT16:
    case ox::TensorProto_DataType_INT32:
    case ox::TensorProto_DataType_INT64:
    case ox::TensorProto_DataType_UINT32:
    case ox::TensorProto_DataType_UINT64:
    case ox::TensorProto_DataType_BOOL:
      return true;
    default:
      return false;
  }
}

// Dimensions come from the file and may be anything, so products saturate instead of overflowing:
// a zero dimension gives 0, a negative one -1 (callers reject it), and a product beyond int64's
// range gives INT64_MAX (callers' size limits reject it).
inline int64_t saturating_mul(int64_t a, int64_t b) {  // REQUIRES: a, b >= 0
  int64_t n = 0;
  return __builtin_mul_overflow(a, b, &n) ? std::numeric_limits<int64_t>::max() : n;
}
inline int64_t product(const std::vector<int64_t>& dims) {
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return 0;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    n = saturating_mul(n, d);
  }
  return n;
}

// A tensor whose element type and every dimension are known.
struct TensorInfo {
  int32_t elem_type = 0;
  std::vector<int64_t> dims;
  double elements() const {
    double n = 1;
    for (int64_t d : dims) n *= static_cast<double>(d);
    return n;
  }
  // Bytes the tensor holds (4-bit types rounded up to whole bytes); -1 for a negative dimension.
  int64_t bytes() const {
    const int64_t n = product(dims);
    if (n < 0) return n;
    const int64_t bits = saturating_mul(n, element_bits(elem_type));
    return bits / 8 + (bits % 8 != 0 ? 1 : 0);
  }
};

inline std::optional<TensorInfo> known_tensor(const ox::TypeProto& type) {
  if (!type.has_tensor_type()) return std::nullopt;
  const auto& t = type.tensor_type();
  if (t.elem_type() == 0 || !t.has_shape()) return std::nullopt;
  TensorInfo info;
  info.elem_type = t.elem_type();
  for (const auto& d : t.shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0) return std::nullopt;
    info.dims.push_back(d.dim_value());
  }
  return info;
}

inline ox::TypeProto tensor_type(int32_t elem_type, const std::vector<int64_t>& dims) {
  ox::TypeProto type;
  auto* t = type.mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  return type;
}

// The axis in [0, rank) that `axis` (negative: counted from the end) names; nullopt when out of
// range.
inline std::optional<int64_t> normalize_axis(int64_t axis, size_t rank) {
  auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return std::nullopt;
  return axis < 0 ? axis + r : axis;
}

inline const ox::AttributeProto* find_attr(const ox::NodeProto& node, std::string_view name) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
inline int64_t attr_int(const ox::NodeProto& node, std::string_view name, int64_t fallback) {
  const auto* a = find_attr(node, name);
  return a != nullptr && a->type() == ox::AttributeProto_AttributeType_INT ? a->i() : fallback;
}
inline std::vector<int64_t> attr_ints(const ox::NodeProto& node, std::string_view name) {
  const auto* a = find_attr(node, name);
  if (a == nullptr) return {};
  return {a->ints().begin(), a->ints().end()};
}
inline std::string attr_string(const ox::NodeProto& node, std::string_view name,
                               std::string fallback) {
  const auto* a = find_attr(node, name);
  return a != nullptr && a->type() == ox::AttributeProto_AttributeType_STRING ? a->s() : fallback;
}

// A node's or opset import's domain with ONNX's alias for the default domain, "ai.onnx", as "".
inline std::string canonical_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

// Calls visit(graph) for each graph attribute `a` holds (`g`, and each of `graphs`).
template <typename Visit>
void visit_attribute_graphs(const ox::AttributeProto& a, Visit&& visit) {
  if (a.has_g()) visit(a.g());
  for (const auto& g : a.graphs()) visit(g);
}
template <typename Visit>
void visit_attribute_graphs(ox::AttributeProto& a, Visit&& visit) {
  if (a.has_g()) visit(*a.mutable_g());
  for (auto& g : *a.mutable_graphs()) visit(g);
}

// Calls visit(graph) for each subgraph of `node` (an If's branches, a Loop's body ...).
template <typename Visit>
void visit_subgraphs(const ox::NodeProto& node, Visit&& visit) {
  for (const auto& a : node.attribute()) visit_attribute_graphs(a, visit);
}
template <typename Visit>
void visit_subgraphs(ox::NodeProto& node, Visit&& visit) {
  for (auto& a : *node.mutable_attribute()) visit_attribute_graphs(a, visit);
}

// Calls visit(name) for each name `g` defines at its own level: its inputs, initializers, sparse
// initializers and its nodes' non-empty outputs (not the names its nodes' subgraphs define).
template <typename Visit>
void visit_defined_names(const ox::GraphProto& g, Visit&& visit) {
  for (const auto& in : g.input()) visit(in.name());
  for (const auto& t : g.initializer()) visit(t.name());
  for (const auto& s : g.sparse_initializer()) visit(s.values().name());
  for (const auto& node : g.node()) {
    for (const std::string& out : node.output()) {
      if (!out.empty()) visit(out);
    }
  }
}

}  // namespace dplace::onnx_detail
