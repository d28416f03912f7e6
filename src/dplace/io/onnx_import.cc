// The ONNX importer (docs/importers.md describes what each ONNX construct becomes and the cost
// formula of every op type).
//
// Pipeline:
//  1. The file is memory-mapped and its protobuf wire format is copied into a small buffer without
//     the payload of large initializers (raw_data and the typed data fields); only their names,
//     dims and dtypes are kept. A 100 MB model is therefore never copied or even read in full, and
//     weights stored as external data whose file is absent read the same way.
//  2. The buffer is parsed into an onnx::ModelProto; the graph is indexed and checked (every input
//     name resolves, no name is produced twice, nodes form a DAG).
//  3. Graph inputs are split into data inputs (become "Input" ops) and weights (graph inputs that
//     are initializers, or are used only in weight slots such as Conv's W). Symbolic dims of data
//     inputs are set from ImportOptions::dims; an unset one is an error naming it.
//  4. Nodes are visited in topological order. Each runs ONNX's own type-and-shape inference
//     function (schema->GetTypeAndShapeInferenceFunction()) with the known input types and the
//     values of constant tensors; ops this libonnx does not know (newer than opset 17, or
//     onnxruntime's contrib ops) use dplace's own rules instead (onnx_op_rules.h). Nodes whose
//     inputs are all constants (Constant, Shape, shape arithmetic, Identity of a weight) are
//     folded: they become no op, and small integer/float results are evaluated here so that shapes
//     computed in the graph (Reshape after Shape->Gather->Concat, Slice with computed ends) are
//     known downstream. Identity, Dropout, Reshape, Flatten, Squeeze and Unsqueeze of a runtime
//     tensor are aliases: no op, their consumers read the producer's tensor. Every other node
//     becomes one op with flops and bytes from the formulas below.
//  5. Each initializer's bytes are charged once, to the first op (in topological order) that reads
//     it directly or through folded nodes; a small integer initializer that no weight slot reads
//     is a constant (shape, axes, indices), not a weight.
//  6. With ImportOptions::training, the forward graph is expanded by expand_training
//     (ir/training.h) into forward + backward + optimizer update ops, as the built-in models are.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
// <sys/mman.h> defines MAP_TYPE, which onnx/defs/parser.h uses as an enumerator name.
#undef MAP_TYPE

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/io/importers.h"
#include "dplace/io/onnx_common.h"
#include "dplace/io/onnx_functions.h"
#include "dplace/io/onnx_op_rules.h"
#include "dplace/ir/training.h"

namespace dplace {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace): the importer's own helpers

// Initializer payloads larger than this are not copied out of the file: only shape-like tensors
// (small integer vectors) are ever needed by shape inference.
constexpr size_t kMaxKeptPayloadBytes = 4096;
// Constant nodes holding at least this many bytes count as weights (small ones are shape and
// scalar constants).
constexpr int64_t kMinConstantWeightBytes = 1024;
// Constant tensors up to this many elements are evaluated when folding.
constexpr int64_t kMaxFoldElements = int64_t{1} << 16;
// The tensors all sequence values may hold together (each sequence op copies its input's list).
constexpr int64_t kMaxSequenceTensors = 1'000'000;

// ---------------------------------------------------------------------------------------------
// Reading the file.

// A read-only memory map of a whole file. Throws FormatError for a missing, unreadable or empty
// file.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw FormatError(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw FormatError(path + ": not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) {
      ::close(fd);
      throw FormatError(path + ": empty file, not an ONNX model");
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int mmap_errno = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw FormatError(path + ": cannot map: " + std::strerror(mmap_errno));
    data_ = static_cast<const char*>(p);
  }
  ~MappedFile() { ::munmap(const_cast<char*>(data_), size_); }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return {data_, size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// Copies a serialized ModelProto, leaving out the payload of every tensor whose data fields
// together exceed kMaxKeptPayloadBytes: initializers, sparse initializers and tensor-valued node
// attributes (Constant values), in the main graph, in model-local functions' bodies and in
// subgraphs. Walks the protobuf wire format directly (field numbers from onnx.proto:
// ModelProto.graph 7, functions 25; FunctionProto.node 7; GraphProto.node 1, initializer 5,
// sparse_initializer 15; NodeProto.attribute 5; AttributeProto.t 5, g 6, graphs 10, tensors 11,
// sparse_tensor 22, sparse_tensors 23; SparseTensorProto.values 1, indices 2; TensorProto data
// fields 4-7 and 9-11), so skipped payloads are never touched. Throws FormatError for malformed
// wire data.
class WireFilter {
 public:
  WireFilter(std::string_view file, const std::string& path) : file_(file), path_(path) {}

  std::string filtered_model() {
    std::string out;
    filter_message(0, file_.size(), Level::kModel, 0, out);
    return out;
  }

 private:
  enum class Level { kModel, kGraph, kFunction, kNode, kAttribute, kSparseTensor, kTensor };
  static constexpr int kMaxDepth = 64;  // nested subgraphs

  // The message type of field `number` inside a `parent` message, when it is one to filter.
  static std::optional<Level> child_level(Level parent, uint32_t number) {
    switch (parent) {
      case Level::kModel:
        if (number == 7) return Level::kGraph;
        if (number == 25) return Level::kFunction;
        break;
      case Level::kFunction:
        if (number == 7) return Level::kNode;
        break;
      case Level::kGraph:
        if (number == 1) return Level::kNode;
        if (number == 5) return Level::kTensor;
        if (number == 15) return Level::kSparseTensor;
        break;
      case Level::kNode:
        if (number == 5) return Level::kAttribute;
        break;
      case Level::kAttribute:
        if (number == 5 || number == 11) return Level::kTensor;
        if (number == 6 || number == 10) return Level::kGraph;
        if (number == 22 || number == 23) return Level::kSparseTensor;
        break;
      case Level::kSparseTensor:
        if (number == 1 || number == 2) return Level::kTensor;
        break;
      case Level::kTensor:
        break;
    }
    return std::nullopt;
  }

  struct Field {
    uint32_t number = 0;
    uint32_t wire_type = 0;
    size_t begin = 0;          // first byte of the tag
    size_t payload_begin = 0;  // first byte after the length prefix (wire type 2)
    size_t end = 0;            // one past the last byte
  };

  [[noreturn]] void malformed(const std::string& what, size_t offset) const {
    throw FormatError(path_ + ": not a valid ONNX model (truncated or not protobuf): " + what +
                      " at byte " + std::to_string(offset));
  }

  uint64_t read_varint(size_t& pos, size_t limit) const {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= limit) malformed("truncated varint", pos);
      auto byte = static_cast<uint8_t>(file_[pos++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    malformed("varint longer than 10 bytes", pos);
  }

  Field read_field(size_t pos, size_t limit) const {
    Field f;
    f.begin = pos;
    uint64_t tag = read_varint(pos, limit);
    f.number = static_cast<uint32_t>(tag >> 3);
    f.wire_type = static_cast<uint32_t>(tag & 7);
    if (f.number == 0 || (tag >> 3) > 0x1fffffff) malformed("invalid field number", f.begin);
    switch (f.wire_type) {
      case 0:
        read_varint(pos, limit);
        break;
      case 1:
        if (limit - pos < 8) malformed("truncated 64-bit field", pos);
        pos += 8;
        break;
      case 2: {
        uint64_t length = read_varint(pos, limit);
        if (length > limit - pos) {
          malformed("field " + std::to_string(f.number) + " of " + std::to_string(length) +
                        " bytes overruns its message",
                    f.begin);
        }
        f.payload_begin = pos;
        pos += static_cast<size_t>(length);
        break;
      }
      case 5:
        if (limit - pos < 4) malformed("truncated 32-bit field", pos);
        pos += 4;
        break;
      default:
        malformed("invalid wire type " + std::to_string(f.wire_type), f.begin);
    }
    f.end = pos;
    return f;
  }

  static void write_varint(uint64_t value, std::string& out) {
    while (value >= 0x80) {
      out.push_back(static_cast<char>((value & 0x7f) | 0x80));
      value >>= 7;
    }
    out.push_back(static_cast<char>(value));
  }

  void append_raw(const Field& f, std::string& out) const {
    out.append(file_.substr(f.begin, f.end - f.begin));
  }

  void append_filtered(const Field& f, Level level, int depth, std::string& out) {
    if (depth > kMaxDepth) malformed("messages nested too deeply", f.begin);
    std::string body;
    filter_message(f.payload_begin, f.end, level, depth, body);
    write_varint((uint64_t{f.number} << 3) | 2, out);
    write_varint(body.size(), out);
    out += body;
  }

  static bool is_tensor_payload(uint32_t number) {
    return (number >= 4 && number <= 7) || (number >= 9 && number <= 11);
  }

  void filter_message(size_t begin, size_t end, Level level, int depth, std::string& out) {
    bool drop_payload = false;
    if (level == Level::kTensor) {
      size_t payload_bytes = 0;
      for (size_t pos = begin; pos < end;) {
        Field f = read_field(pos, end);
        if (is_tensor_payload(f.number)) payload_bytes += f.end - f.begin;
        pos = f.end;
      }
      drop_payload = payload_bytes > kMaxKeptPayloadBytes;
    }
    for (size_t pos = begin; pos < end;) {
      Field f = read_field(pos, end);
      pos = f.end;
      std::optional<Level> child =
          f.wire_type == 2 ? child_level(level, f.number) : std::optional<Level>();
      if (child) {
        append_filtered(f, *child, depth + 1, out);
      } else if (drop_payload && is_tensor_payload(f.number)) {
        continue;
      } else {
        append_raw(f, out);
      }
    }
  }

  std::string_view file_;
  const std::string& path_;
};

// ---------------------------------------------------------------------------------------------
// Tensor types (the rest are in onnx_common.h).

// "tensor", "sequence", "map", "optional" or "sparse tensor", for messages.
std::string type_kind(const ox::TypeProto& type) {
  switch (type.value_case()) {
    case ox::TypeProto::kTensorType:
      return "tensor";
    case ox::TypeProto::kSequenceType:
      return "sequence";
    case ox::TypeProto::kMapType:
      return "map";
    case ox::TypeProto::kOptionalType:
      return "optional";
    case ox::TypeProto::kSparseTensorType:
      return "sparse tensor";
    default:
      return "value of unknown kind";
  }
}

// Why a runtime tensor's type, known to be a tensor or of no kind, is not usable.
std::string describe_unknown_tensor(const ox::TypeProto& type) {
  if (!type.has_tensor_type()) return "it is not a tensor (maps and optionals are not supported)";
  const auto& t = type.tensor_type();
  if (t.elem_type() == 0) return "its element type could not be inferred";
  if (!t.has_shape()) return "its shape could not be inferred";
  for (int i = 0; i < t.shape().dim_size(); ++i) {
    const auto& d = t.shape().dim(i);
    if (!d.has_dim_value()) {
      return "dimension " + std::to_string(i) + " could not be inferred" +
             (d.has_dim_param() ? " (symbolic '" + d.dim_param() + "')" : "");
    }
    if (d.dim_value() < 0) return "dimension " + std::to_string(i) + " is negative";
  }
  return "unknown";
}

// Why a runtime tensor's type is not usable, for error messages. `reason` is what inference said
// (or ""), added in parentheses.
std::string describe_unknown(const ox::TypeProto& type, const std::string& reason) {
  const std::string why = reason.empty() ? "" : " (" + reason + ")";
  if (type.value_case() == ox::TypeProto::VALUE_NOT_SET) {
    return "its type could not be inferred" + why;
  }
  if (type.has_sequence_type()) {
    return "it is a sequence whose tensors dplace does not know" +
           (reason.empty() ? " (it knows those that " + std::string(kSequenceMakers) + " make)"
                           : why);
  }
  return describe_unknown_tensor(type) + why;
}

// The inferred type, completed by the declared one where inference left something unknown.
ox::TypeProto merge_types(const ox::TypeProto* declared, const ox::TypeProto& inferred) {
  if (declared == nullptr || declared->value_case() == ox::TypeProto::VALUE_NOT_SET) {
    return inferred;
  }
  if (inferred.value_case() == ox::TypeProto::VALUE_NOT_SET) return *declared;
  if (!inferred.has_tensor_type() || !declared->has_tensor_type()) return inferred;
  ox::TypeProto merged = inferred;
  auto* m = merged.mutable_tensor_type();
  const auto& d = declared->tensor_type();
  if (m->elem_type() == 0) m->set_elem_type(d.elem_type());
  if (!m->has_shape()) {
    if (d.has_shape()) *m->mutable_shape() = d.shape();
  } else if (d.has_shape() && d.shape().dim_size() == m->shape().dim_size()) {
    for (int i = 0; i < m->shape().dim_size(); ++i) {
      auto* dim = m->mutable_shape()->mutable_dim(i);
      if (!dim->has_dim_value() && d.shape().dim(i).has_dim_value()) {
        dim->set_dim_value(d.shape().dim(i).dim_value());
      }
    }
  }
  return merged;
}

// ---------------------------------------------------------------------------------------------
// Attributes.

bool has_graph_attribute(const ox::NodeProto& node) {
  for (const auto& a : node.attribute()) {
    if (a.type() == ox::AttributeProto_AttributeType_GRAPH ||
        a.type() == ox::AttributeProto_AttributeType_GRAPHS || a.has_g() || a.graphs_size() > 0) {
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Constant folding: small tensors evaluated with every element held as a double (exact for the
// integers shapes are made of).

struct Literal {
  int32_t elem_type = 0;
  std::vector<int64_t> dims;
  std::vector<double> values;
};

int64_t to_int64(double v) {
  if (!(v > -9.2e18)) return std::numeric_limits<int64_t>::min();
  if (!(v < 9.2e18)) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(v);
}

// Rounds a value the way a tensor of elem_type stores it.
double to_element(double v, int32_t elem_type) {
  if (elem_type == ox::TensorProto_DataType_BOOL) return v != 0 ? 1 : 0;
  if (is_integer_type(elem_type)) return std::isfinite(v) ? std::trunc(v) : 0;
  if (elem_type == ox::TensorProto_DataType_FLOAT) return static_cast<float>(v);
  return v;
}

template <typename T>
void decode_raw(const std::string& raw, std::vector<double>& out) {
  size_t n = raw.size() / sizeof(T);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(v);
  }
}

// The value of a stored tensor, when it is small, inline and of a numeric type.
std::optional<Literal> literal_from_tensor(const ox::TensorProto& t) {
  if (t.data_location() == ox::TensorProto_DataLocation_EXTERNAL) return std::nullopt;
  Literal lit;
  lit.elem_type = t.data_type();
  for (int64_t d : t.dims()) {
    if (d < 0) return std::nullopt;
    lit.dims.push_back(d);
  }
  int64_t n = product(lit.dims);
  if (n > kMaxFoldElements) return std::nullopt;
  const int64_t size = element_bytes(lit.elem_type);
  if (size == 0 || lit.elem_type == ox::TensorProto_DataType_FLOAT16 ||
      lit.elem_type == ox::TensorProto_DataType_BFLOAT16 ||
      lit.elem_type == ox::TensorProto_DataType_COMPLEX64 ||
      lit.elem_type == ox::TensorProto_DataType_COMPLEX128) {
    return std::nullopt;
  }
  if (!t.raw_data().empty()) {
    if (static_cast<int64_t>(t.raw_data().size()) != n * size) return std::nullopt;
    switch (lit.elem_type) {
      case ox::TensorProto_DataType_FLOAT:
        decode_raw<float>(t.raw_data(), lit.values);
        break;
      case ox::TensorProto_DataType_DOUBLE:
        decode_raw<double>(t.raw_data(), lit.values);
        break;
      case ox::TensorProto_DataType_UINT8:
      case ox::TensorProto_DataType_BOOL:
        decode_raw<uint8_t>(t.raw_data(), lit.values);
        break;
      case ox::TensorProto_DataType_INT8:
        decode_raw<int8_t>(t.raw_data(), lit.values);
        break;
      case ox::TensorProto_DataType_UINT16:
        decode_raw<uint16_t>(t.raw_data(), lit.values);
        break;
      case ox::TensorProto_DataType_INT16:
        decode_raw<int16_t>(t.raw_data(), lit.values);
        break;
      case ox::TensorProto_DataType_INT32:
        decode_raw<int32_t>(t.raw_data(), lit.values);
        break;
      case ox::TensorProto_DataType_UINT32:
        decode_raw<uint32_t>(t.raw_data(), lit.values);
        break;
      case ox::TensorProto_DataType_INT64:
        decode_raw<int64_t>(t.raw_data(), lit.values);
        break;
      case ox::TensorProto_DataType_UINT64:
        decode_raw<uint64_t>(t.raw_data(), lit.values);
        break;
      default:
        return std::nullopt;
    }
    return lit;
  }
  switch (lit.elem_type) {
    case ox::TensorProto_DataType_FLOAT:
      lit.values.assign(t.float_data().begin(), t.float_data().end());
      break;
    case ox::TensorProto_DataType_DOUBLE:
      lit.values.assign(t.double_data().begin(), t.double_data().end());
      break;
    case ox::TensorProto_DataType_INT64:
      for (int64_t v : t.int64_data()) lit.values.push_back(static_cast<double>(v));
      break;
    case ox::TensorProto_DataType_UINT32:
    case ox::TensorProto_DataType_UINT64:
      for (uint64_t v : t.uint64_data()) lit.values.push_back(static_cast<double>(v));
      break;
    default:
      lit.values.assign(t.int32_data().begin(), t.int32_data().end());
      break;
  }
  if (static_cast<int64_t>(lit.values.size()) != n) return std::nullopt;
  return lit;
}

std::unique_ptr<ox::TensorProto> tensor_from_literal(const Literal& lit) {
  auto t = std::make_unique<ox::TensorProto>();
  t->set_data_type(lit.elem_type);
  for (int64_t d : lit.dims) t->add_dims(d);
  for (double v : lit.values) {
    switch (lit.elem_type) {
      case ox::TensorProto_DataType_FLOAT:
        t->add_float_data(static_cast<float>(v));
        break;
      case ox::TensorProto_DataType_DOUBLE:
        t->add_double_data(v);
        break;
      case ox::TensorProto_DataType_INT64:
        t->add_int64_data(to_int64(v));
        break;
      case ox::TensorProto_DataType_UINT32:
      case ox::TensorProto_DataType_UINT64:
        t->add_uint64_data(static_cast<uint64_t>(std::max<int64_t>(0, to_int64(v))));
        break;
      default:
        t->add_int32_data(static_cast<int32_t>(to_int64(v)));
        break;
    }
  }
  return t;
}

Literal scalar_literal(int32_t elem_type, double v) { return {elem_type, {}, {v}}; }

// Row-major strides of dims.
// Row-major strides of a literal's dims (>= 0). They can exceed int64 only for a tensor with a
// zero dimension, which no loop indexes, so they saturate.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = saturating_mul(s[i], dims[i]);
  return s;
}

// Numpy-style broadcast of n inputs; f maps the n input elements of one output position to the
// output element. nullopt when the shapes do not broadcast or the result is too large.
std::optional<Literal> broadcast_map(const std::vector<const Literal*>& in, int32_t out_type,
                                     const std::function<double(const double*)>& f) {
  size_t rank = 0;
  for (const Literal* l : in) rank = std::max(rank, l->dims.size());
  std::vector<int64_t> out_dims(rank, 1);
  for (const Literal* l : in) {
    size_t offset = rank - l->dims.size();
    for (size_t i = 0; i < l->dims.size(); ++i) {
      int64_t d = l->dims[i];
      int64_t& o = out_dims[offset + i];
      if (d == o || d == 1) continue;
      if (o != 1) return std::nullopt;
      o = d;
    }
  }
  // A zero-size dim wins over 1.
  for (const Literal* l : in) {
    size_t offset = rank - l->dims.size();
    for (size_t i = 0; i < l->dims.size(); ++i) {
      if (l->dims[i] == 0) out_dims[offset + i] = 0;
    }
  }
  int64_t total = product(out_dims);
  if (total > kMaxFoldElements) return std::nullopt;
  // Per input, the stride of each output axis (0 where the input broadcasts).
  std::vector<std::vector<int64_t>> strides;
  for (const Literal* l : in) {
    std::vector<int64_t> own = strides_of(l->dims);
    std::vector<int64_t> s(rank, 0);
    size_t offset = rank - l->dims.size();
    for (size_t i = 0; i < l->dims.size(); ++i) s[offset + i] = l->dims[i] == 1 ? 0 : own[i];
    strides.push_back(std::move(s));
  }
  Literal out{out_type, out_dims, {}};
  out.values.resize(static_cast<size_t>(total));
  std::vector<int64_t> index(rank, 0);
  std::vector<double> args(in.size());
  for (int64_t k = 0; k < total; ++k) {
    for (size_t j = 0; j < in.size(); ++j) {
      int64_t flat = 0;
      for (size_t a = 0; a < rank; ++a) flat += index[a] * strides[j][a];
      args[j] = in[j]->values[static_cast<size_t>(flat)];
    }
    out.values[static_cast<size_t>(k)] = to_element(f(args.data()), out_type);
    for (size_t a = rank; a-- > 0;) {
      if (++index[a] < out_dims[a]) break;
      index[a] = 0;
    }
  }
  return out;
}

std::vector<int64_t> literal_ints(const Literal& lit) {
  std::vector<int64_t> v;
  v.reserve(lit.values.size());
  for (double x : lit.values) v.push_back(to_int64(x));
  return v;
}

// Evaluates output 0 of a folded node from its inputs' values. `in[i]` is nullptr when input i is
// absent or its value is unknown; `in_types[i]` likewise for types. nullopt when the op is not
// supported here or an input value is missing.
std::optional<Literal> evaluate(const ox::NodeProto& node, int opset,
                                const std::vector<const Literal*>& in,
                                const std::vector<const ox::TypeProto*>& in_types) {
  const std::string& op = node.op_type();
  auto need = [&](size_t count) {
    if (in.size() < count) return false;
    for (size_t i = 0; i < count; ++i) {
      if (in[i] == nullptr) return false;
    }
    return true;
  };
  auto optional_input = [&](size_t i) -> const Literal* { return i < in.size() ? in[i] : nullptr; };
  auto optional_present = [&](size_t i) {
    return i < static_cast<size_t>(node.input_size()) && !node.input(static_cast<int>(i)).empty();
  };

  if (op == "Constant") {
    for (const auto& a : node.attribute()) {
      if (a.name() == "value") return literal_from_tensor(a.t());
      if (a.name() == "value_float") return scalar_literal(ox::TensorProto_DataType_FLOAT, a.f());
      if (a.name() == "value_int") {
        return scalar_literal(ox::TensorProto_DataType_INT64, static_cast<double>(a.i()));
      }
      if (a.name() == "value_floats") {
        Literal l{ox::TensorProto_DataType_FLOAT, {a.floats_size()}, {}};
        l.values.assign(a.floats().begin(), a.floats().end());
        return l;
      }
      if (a.name() == "value_ints") {
        Literal l{ox::TensorProto_DataType_INT64, {a.ints_size()}, {}};
        for (int64_t v : a.ints()) l.values.push_back(static_cast<double>(v));
        return l;
      }
    }
    return std::nullopt;
  }
  if (op == "Shape" || op == "Size") {
    if (in_types.empty() || in_types[0] == nullptr) return std::nullopt;
    std::optional<TensorInfo> t = known_tensor(*in_types[0]);
    if (!t) return std::nullopt;
    if (op == "Size") {
      return scalar_literal(ox::TensorProto_DataType_INT64, static_cast<double>(product(t->dims)));
    }
    auto rank = static_cast<int64_t>(t->dims.size());
    int64_t start = attr_int(node, "start", 0);
    int64_t end = attr_int(node, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    Literal l{ox::TensorProto_DataType_INT64, {end - start}, {}};
    for (int64_t i = start; i < end; ++i) l.values.push_back(static_cast<double>(t->dims[i]));
    return l;
  }
  if (op == "Identity") return need(1) ? std::optional<Literal>(*in[0]) : std::nullopt;
  if (op == "Cast") {
    if (!need(1)) return std::nullopt;
    Literal l = *in[0];
    l.elem_type = static_cast<int32_t>(attr_int(node, "to", 0));
    if (element_bytes(l.elem_type) == 0) return std::nullopt;
    for (double& v : l.values) v = to_element(v, l.elem_type);
    return l;
  }
  if (op == "Reshape") {
    if (!need(2)) return std::nullopt;
    std::vector<int64_t> shape = literal_ints(*in[1]);
    bool allow_zero = attr_int(node, "allowzero", 0) != 0;
    int infer_at = -1;
    int64_t known = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && !allow_zero) {
        if (i >= in[0]->dims.size()) return std::nullopt;
        shape[i] = in[0]->dims[i];
      }
      if (shape[i] == -1) {
        if (infer_at >= 0) return std::nullopt;
        infer_at = static_cast<int>(i);
      } else if (shape[i] < 0) {
        return std::nullopt;
      } else if (__builtin_mul_overflow(known, shape[i], &known)) {
        return std::nullopt;
      }
    }
    auto total = static_cast<int64_t>(in[0]->values.size());
    if (infer_at >= 0) {
      if (known == 0 || total % known != 0) return std::nullopt;
      shape[static_cast<size_t>(infer_at)] = total / known;
    }
    if (product(shape) != total) return std::nullopt;
    Literal l = *in[0];
    l.dims = shape;
    return l;
  }
  if (op == "Flatten") {
    if (!need(1)) return std::nullopt;
    auto rank = static_cast<int64_t>(in[0]->dims.size());
    int64_t axis = attr_int(node, "axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) return std::nullopt;
    std::vector<int64_t> head(in[0]->dims.begin(), in[0]->dims.begin() + axis);
    std::vector<int64_t> tail(in[0]->dims.begin() + axis, in[0]->dims.end());
    Literal l = *in[0];
    l.dims = {product(head), product(tail)};
    return l;
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    if (!need(1)) return std::nullopt;
    std::vector<int64_t> axes;
    if (opset >= 13) {
      if (optional_present(1)) {
        if (optional_input(1) == nullptr) return std::nullopt;
        axes = literal_ints(*in[1]);
      }
    } else {
      axes = attr_ints(node, "axes");
    }
    Literal l = *in[0];
    if (op == "Squeeze") {
      std::vector<int64_t> dims;
      std::set<int64_t> drop;
      for (int64_t a : axes) {
        auto n = normalize_axis(a, l.dims.size());
        if (!n || l.dims[static_cast<size_t>(*n)] != 1) return std::nullopt;
        drop.insert(*n);
      }
      for (size_t i = 0; i < l.dims.size(); ++i) {
        bool squeeze = axes.empty() ? l.dims[i] == 1 : drop.count(static_cast<int64_t>(i)) > 0;
        if (!squeeze) dims.push_back(l.dims[i]);
      }
      l.dims = dims;
      return l;
    }
    size_t out_rank = l.dims.size() + axes.size();
    std::set<int64_t> insert;
    for (int64_t a : axes) {
      auto n = normalize_axis(a, out_rank);
      if (!n || !insert.insert(*n).second) return std::nullopt;
    }
    std::vector<int64_t> dims;
    size_t next = 0;
    for (size_t i = 0; i < out_rank; ++i) {
      if (insert.count(static_cast<int64_t>(i)) > 0) {
        dims.push_back(1);
      } else {
        dims.push_back(l.dims[next++]);
      }
    }
    l.dims = dims;
    return l;
  }
  if (op == "Concat") {
    if (in.empty()) return std::nullopt;
    for (const Literal* l : in) {
      if (l == nullptr) return std::nullopt;
    }
    size_t rank = in[0]->dims.size();
    auto axis = normalize_axis(attr_int(node, "axis", 0), rank);
    if (!axis) return std::nullopt;
    auto a = static_cast<size_t>(*axis);
    Literal out{in[0]->elem_type, in[0]->dims, {}};
    out.dims[a] = 0;
    for (const Literal* l : in) {
      if (l->dims.size() != rank) return std::nullopt;
      for (size_t i = 0; i < rank; ++i) {
        if (i != a && l->dims[i] != in[0]->dims[i]) return std::nullopt;
      }
      if (__builtin_add_overflow(out.dims[a], l->dims[a], &out.dims[a])) return std::nullopt;
    }
    if (product(out.dims) > kMaxFoldElements) return std::nullopt;
    std::vector<int64_t> head(in[0]->dims.begin(), in[0]->dims.begin() + *axis);
    int64_t outer = product(head);
    for (int64_t o = 0; o < outer; ++o) {
      for (const Literal* l : in) {
        std::vector<int64_t> tail(l->dims.begin() + *axis, l->dims.end());
        int64_t block = product(tail);
        auto begin = l->values.begin() + o * block;
        out.values.insert(out.values.end(), begin, begin + block);
      }
    }
    return out;
  }
  if (op == "Gather") {
    if (!need(2)) return std::nullopt;
    const Literal& data = *in[0];
    auto axis = normalize_axis(attr_int(node, "axis", 0), data.dims.size());
    if (!axis) return std::nullopt;
    auto a = static_cast<size_t>(*axis);
    std::vector<int64_t> idx = literal_ints(*in[1]);
    int64_t extent = data.dims[a];
    for (int64_t& i : idx) {
      if (i < 0) i += extent;
      if (i < 0 || i >= extent) return std::nullopt;
    }
    Literal out{data.elem_type, {}, {}};
    out.dims.assign(data.dims.begin(), data.dims.begin() + *axis);
    out.dims.insert(out.dims.end(), in[1]->dims.begin(), in[1]->dims.end());
    out.dims.insert(out.dims.end(), data.dims.begin() + *axis + 1, data.dims.end());
    if (product(out.dims) > kMaxFoldElements) return std::nullopt;
    std::vector<int64_t> head(data.dims.begin(), data.dims.begin() + *axis);
    std::vector<int64_t> tail(data.dims.begin() + *axis + 1, data.dims.end());
    int64_t outer = product(head), inner = product(tail);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i : idx) {
        auto begin = data.values.begin() + (o * extent + i) * inner;
        out.values.insert(out.values.end(), begin, begin + inner);
      }
    }
    return out;
  }
  if (op == "Slice") {
    if (!need(1)) return std::nullopt;
    const Literal& data = *in[0];
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset >= 10) {
      if (!need(3)) return std::nullopt;
      starts = literal_ints(*in[1]);
      ends = literal_ints(*in[2]);
      if (optional_present(3)) {
        if (optional_input(3) == nullptr) return std::nullopt;
        axes = literal_ints(*in[3]);
      }
      if (optional_present(4)) {
        if (optional_input(4) == nullptr) return std::nullopt;
        steps = literal_ints(*in[4]);
      }
    } else {
      starts = attr_ints(node, "starts");
      ends = attr_ints(node, "ends");
      axes = attr_ints(node, "axes");
    }
    if (starts.size() != ends.size()) return std::nullopt;
    if (axes.empty()) {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size()) return std::nullopt;
    size_t rank = data.dims.size();
    std::vector<int64_t> first(rank, 0), step(rank, 1), out_dims = data.dims;
    for (size_t k = 0; k < starts.size(); ++k) {
      auto axis = normalize_axis(axes[k], rank);
      if (!axis || steps[k] == 0) return std::nullopt;
      auto a = static_cast<size_t>(*axis);
      int64_t d = data.dims[a], s = starts[k], e = ends[k];
      // A step longer than the axis takes one element, as a step of d + 1 does (and cannot
      // overflow below).
      const int64_t st = std::clamp<int64_t>(steps[k], -(d + 1), d + 1);
      if (s < 0) s += d;
      if (e < 0) e += d;
      if (st > 0) {
        s = std::clamp<int64_t>(s, 0, d);
        e = std::clamp<int64_t>(e, 0, d);
        out_dims[a] = e > s ? (e - s + st - 1) / st : 0;
      } else {
        s = std::clamp<int64_t>(s, -1, d - 1);
        e = std::clamp<int64_t>(e, -1, d - 1);
        out_dims[a] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
      }
      first[a] = s;
      step[a] = st;
    }
    int64_t total = product(out_dims);
    if (total > kMaxFoldElements) return std::nullopt;
    std::vector<int64_t> in_strides = strides_of(data.dims);
    Literal out{data.elem_type, out_dims, {}};
    std::vector<int64_t> index(rank, 0);
    for (int64_t k = 0; k < total; ++k) {
      int64_t flat = 0;
      for (size_t a = 0; a < rank; ++a) flat += (first[a] + index[a] * step[a]) * in_strides[a];
      out.values.push_back(data.values[static_cast<size_t>(flat)]);
      for (size_t a = rank; a-- > 0;) {
        if (++index[a] < out_dims[a]) break;
        index[a] = 0;
      }
    }
    return out;
  }
  if (op == "ConstantOfShape") {
    if (!need(1)) return std::nullopt;
    Literal out{ox::TensorProto_DataType_FLOAT, literal_ints(*in[0]), {}};
    double fill = 0;
    if (const auto* a = find_attr(node, "value"); a != nullptr) {
      std::optional<Literal> v = literal_from_tensor(a->t());
      if (!v || v->values.size() != 1) return std::nullopt;
      out.elem_type = v->elem_type;
      fill = v->values[0];
    }
    for (int64_t d : out.dims) {
      if (d < 0) return std::nullopt;
    }
    int64_t total = product(out.dims);
    if (total > kMaxFoldElements) return std::nullopt;
    out.values.assign(static_cast<size_t>(total), fill);
    return out;
  }
  if (op == "Range") {
    if (!need(3)) return std::nullopt;
    if (in[0]->values.size() != 1 || in[1]->values.size() != 1 || in[2]->values.size() != 1) {
      return std::nullopt;
    }
    double start = in[0]->values[0], limit = in[1]->values[0], delta = in[2]->values[0];
    if (delta == 0) return std::nullopt;
    double count = std::max(std::ceil((limit - start) / delta), 0.0);
    if (count > static_cast<double>(kMaxFoldElements)) return std::nullopt;
    Literal out{in[0]->elem_type, {static_cast<int64_t>(count)}, {}};
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
      out.values.push_back(to_element(start + static_cast<double>(i) * delta, out.elem_type));
    }
    return out;
  }
  if (op == "Expand") {
    if (!need(2)) return std::nullopt;
    std::vector<int64_t> shape = literal_ints(*in[1]);
    for (int64_t d : shape) {
      if (d < 0) return std::nullopt;
    }
    if (product(shape) > kMaxFoldElements) return std::nullopt;
    Literal ones{in[0]->elem_type, shape, std::vector<double>(static_cast<size_t>(product(shape)))};
    return broadcast_map({in[0], &ones}, in[0]->elem_type, [](const double* v) { return v[0]; });
  }
  if (op == "Transpose") {
    if (!need(1)) return std::nullopt;
    const Literal& data = *in[0];
    size_t rank = data.dims.size();
    std::vector<int64_t> perm = attr_ints(node, "perm");
    if (perm.empty()) {
      for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
    }
    if (perm.size() != rank) return std::nullopt;
    std::vector<int64_t> in_strides = strides_of(data.dims), out_dims(rank), src_stride(rank);
    std::vector<bool> seen(rank, false);
    for (size_t i = 0; i < rank; ++i) {
      auto p = normalize_axis(perm[i], rank);
      if (!p || seen[static_cast<size_t>(*p)]) return std::nullopt;  // not a permutation
      seen[static_cast<size_t>(*p)] = true;
      out_dims[i] = data.dims[static_cast<size_t>(*p)];
      src_stride[i] = in_strides[static_cast<size_t>(*p)];
    }
    Literal out{data.elem_type, out_dims, {}};
    std::vector<int64_t> index(rank, 0);
    int64_t total = product(out_dims);
    for (int64_t k = 0; k < total; ++k) {
      int64_t flat = 0;
      for (size_t a = 0; a < rank; ++a) flat += index[a] * src_stride[a];
      out.values.push_back(data.values[static_cast<size_t>(flat)]);
      for (size_t a = rank; a-- > 0;) {
        if (++index[a] < out_dims[a]) break;
        index[a] = 0;
      }
    }
    return out;
  }

  // Elementwise arithmetic, comparison and logic, with broadcasting.
  using Fn = std::function<double(const double*)>;
  static const std::unordered_map<std::string, std::pair<int, Fn>> kElementwise = {
      {"Add", {2, [](const double* v) { return v[0] + v[1]; }}},
      {"Sub", {2, [](const double* v) { return v[0] - v[1]; }}},
      {"Mul", {2, [](const double* v) { return v[0] * v[1]; }}},
      {"Div", {2, [](const double* v) { return v[1] == 0 ? 0.0 : v[0] / v[1]; }}},
      {"Pow", {2, [](const double* v) { return std::pow(v[0], v[1]); }}},
      {"Neg", {1, [](const double* v) { return -v[0]; }}},
      {"Abs", {1, [](const double* v) { return std::fabs(v[0]); }}},
      {"Floor", {1, [](const double* v) { return std::floor(v[0]); }}},
      {"Ceil", {1, [](const double* v) { return std::ceil(v[0]); }}},
      {"Sqrt", {1, [](const double* v) { return std::sqrt(v[0]); }}},
      {"Reciprocal", {1, [](const double* v) { return v[0] == 0 ? 0.0 : 1.0 / v[0]; }}},
      {"Equal", {2, [](const double* v) { return v[0] == v[1] ? 1.0 : 0.0; }}},
      {"Less", {2, [](const double* v) { return v[0] < v[1] ? 1.0 : 0.0; }}},
      {"LessOrEqual", {2, [](const double* v) { return v[0] <= v[1] ? 1.0 : 0.0; }}},
      {"Greater", {2, [](const double* v) { return v[0] > v[1] ? 1.0 : 0.0; }}},
      {"GreaterOrEqual", {2, [](const double* v) { return v[0] >= v[1] ? 1.0 : 0.0; }}},
      {"Not", {1, [](const double* v) { return v[0] == 0 ? 1.0 : 0.0; }}},
      {"And", {2, [](const double* v) { return v[0] != 0 && v[1] != 0 ? 1.0 : 0.0; }}},
      {"Or", {2, [](const double* v) { return v[0] != 0 || v[1] != 0 ? 1.0 : 0.0; }}},
      {"Where", {3, [](const double* v) { return v[0] != 0 ? v[1] : v[2]; }}},
  };
  if (auto it = kElementwise.find(op); it != kElementwise.end()) {
    auto arity = static_cast<size_t>(it->second.first);
    if (!need(arity)) return std::nullopt;
    std::vector<const Literal*> args(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(arity));
    int32_t out_type = in[0]->elem_type;
    static const std::unordered_set<std::string> kPredicates = {
        "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or"};
    if (kPredicates.count(op) > 0) out_type = ox::TensorProto_DataType_BOOL;
    if (op == "Where") out_type = in[1]->elem_type;
    Fn fn = it->second.second;
    if (op == "Div" && is_integer_type(out_type)) {
      fn = [](const double* v) { return v[1] == 0 ? 0.0 : std::trunc(v[0] / v[1]); };
    }
    return broadcast_map(args, out_type, fn);
  }
  if (op == "Min" || op == "Max" || op == "Sum" || op == "Mean") {
    if (in.empty()) return std::nullopt;
    for (const Literal* l : in) {
      if (l == nullptr) return std::nullopt;
    }
    size_t n = in.size();
    Fn fn;
    if (op == "Min") fn = [n](const double* v) { return *std::min_element(v, v + n); };
    if (op == "Max") fn = [n](const double* v) { return *std::max_element(v, v + n); };
    if (op == "Sum" || op == "Mean") {
      bool mean = op == "Mean";
      fn = [n, mean](const double* v) {
        double s = 0;
        for (size_t i = 0; i < n; ++i) s += v[i];
        return mean ? s / static_cast<double>(n) : s;
      };
    }
    return broadcast_map(in, in[0]->elem_type, fn);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Cost formulas (docs/importers.md lists them). flops counts a multiply-add as 2.

struct CostInputs {
  const ox::NodeProto& node;
  std::vector<std::optional<TensorInfo>> in;   // nullopt: absent or unknown
  std::vector<std::optional<TensorInfo>> out;  // nullopt: absent (unnamed optional output)
  double read_bytes = 0;                       // every input with a known type
  double written_bytes = 0;

  // Input or output i, nullopt when absent, unknown or past the end.
  const std::optional<TensorInfo>& input(size_t i) const { return i < in.size() ? in[i] : kNone; }
  const std::optional<TensorInfo>& output(size_t i) const {
    return i < out.size() ? out[i] : kNone;
  }
  // Whether the node names input i.
  bool present(size_t i) const {
    return i < static_cast<size_t>(node.input_size()) && !node.input(static_cast<int>(i)).empty();
  }
  static inline const std::optional<TensorInfo> kNone;
};

struct CostEstimate {
  bool has_formula = false;
  double flops = 0;
  std::optional<double> bytes_accessed;  // nullopt: read_bytes + written_bytes
};

// Ops costed at `per` flops per element of output 0.
const std::unordered_map<std::string, double>& elementwise_flops() {
  static const std::unordered_map<std::string, double> kTable = {
      // Arithmetic, activations, comparisons and logic: one flop per output element.
      {"Add", 1},
      {"Sub", 1},
      {"Mul", 1},
      {"Div", 1},
      {"Pow", 1},
      {"Mod", 1},
      {"Neg", 1},
      {"Abs", 1},
      {"Reciprocal", 1},
      {"Sqrt", 1},
      {"Exp", 1},
      {"Log", 1},
      {"Erf", 1},
      {"Relu", 1},
      {"LeakyRelu", 1},
      {"PRelu", 1},
      {"Elu", 1},
      {"Selu", 1},
      {"Celu", 1},
      {"Sigmoid", 1},
      {"HardSigmoid", 1},
      {"HardSwish", 1},
      {"Tanh", 1},
      {"Softplus", 1},
      {"Softsign", 1},
      {"ThresholdedRelu", 1},
      {"Mish", 1},
      {"Clip", 1},
      {"Floor", 1},
      {"Ceil", 1},
      {"Round", 1},
      {"Sign", 1},
      {"Sin", 1},
      {"Cos", 1},
      {"Tan", 1},
      {"Asin", 1},
      {"Acos", 1},
      {"Atan", 1},
      {"Sinh", 1},
      {"Cosh", 1},
      {"Asinh", 1},
      {"Acosh", 1},
      {"Atanh", 1},
      {"Equal", 1},
      {"Less", 1},
      {"LessOrEqual", 1},
      {"Greater", 1},
      {"GreaterOrEqual", 1},
      {"Not", 1},
      {"And", 1},
      {"Or", 1},
      {"Xor", 1},
      {"Where", 1},
      {"IsNaN", 1},
      {"IsInf", 1},
      {"BitShift", 1},
      {"Dropout", 1},
      {"QuantizeLinear", 2},
      {"DequantizeLinear", 2},
      {"CumSum", 1},
      // Gelu (opset 20 and common contrib forms): its erf form is 5 elementwise steps.
      {"Gelu", 5},
      {"FastGelu", 5},
      {"BiasGelu", 6},
      {"QuickGelu", 5},
      // Swish (opset 24): x * sigmoid(alpha * x); RotaryEmbedding (23): x * cos + rotate(x) * sin.
      {"Swish", 2},
      {"RotaryEmbedding", 3},
      {"BitwiseAnd", 1},
      {"BitwiseOr", 1},
      {"BitwiseXor", 1},
      {"BitwiseNot", 1},
      // Normalisation: BatchNormalization (inference) is a scale and a shift per element; the
      // statistics-computing ones are mean, subtract, square, variance, normalise, scale, shift.
      {"BatchNormalization", 2},
      {"LayerNormalization", 7},
      {"InstanceNormalization", 7},
      {"GroupNormalization", 7},
      // RMSNormalization (23) and onnxruntime's SimplifiedLayerNormalization: square, mean,
      // normalise, scale.
      {"RMSNormalization", 4},
      {"SimplifiedLayerNormalization", 4},
      // onnxruntime's BiasAdd: X + bias + skip.
      {"BiasAdd", 2},
      {"MeanVarianceNormalization", 6},
      {"LpNormalization", 3},
      // Softmax: max, subtract, exp, sum, divide.
      {"Softmax", 5},
      {"LogSoftmax", 5},
      {"Hardmax", 1},
  };
  return kTable;
}

// Ops that only move or re-lay data: no flops, cost by bytes accessed.
const std::unordered_set<std::string>& data_movement_ops() {
  static const std::unordered_set<std::string> kSet = {"Transpose",
                                                       "Concat",
                                                       "Split",
                                                       "Slice",
                                                       "Gather",
                                                       "GatherElements",
                                                       "GatherND",
                                                       "Pad",
                                                       "Tile",
                                                       "Expand",
                                                       "Cast",
                                                       "CastLike",
                                                       "DepthToSpace",
                                                       "SpaceToDepth",
                                                       "ScatterND",
                                                       "ScatterElements",
                                                       "Scatter",
                                                       "Compress",
                                                       "OneHot",
                                                       "Trilu",
                                                       "ReverseSequence",
                                                       "Range",
                                                       "ConstantOfShape",
                                                       "NonZero",
                                                       "Identity",
                                                       "Reshape",
                                                       "Flatten",
                                                       "Squeeze",
                                                       "Unsqueeze",
                                                       "EyeLike",
                                                       "SequenceAt",
                                                       "SplitToSequence",
                                                       "SequenceConstruct",
                                                       "SequenceEmpty",
                                                       "SequenceInsert",
                                                       "SequenceErase",
                                                       "ConcatFromSequence",
                                                       "Upsample",
                                                       "Resize",
                                                       "CenterCropPad",
                                                       "TensorScatter"};
  return kSet;
}

// Costs of onnxruntime's fused contrib ops (domain com.microsoft) whose work is not one flop count
// per output element; nullopt for the others. Attention's key length is the present cache's when
// the node has one (with a shared buffer, its full length: an upper bound).
std::optional<CostEstimate> estimate_contrib_cost(const CostInputs& c) {
  const std::string& op = c.node.op_type();
  auto in = [&c](size_t i) -> const std::optional<TensorInfo>& { return c.input(i); };
  auto out = [&c](size_t i) -> const std::optional<TensorInfo>& { return c.output(i); };
  auto present = [&c](size_t i) { return c.present(i); };
  const std::optional<TensorInfo>& y = c.output(0);
  auto dim = [](const std::optional<TensorInfo>& t, size_t i) {
    return static_cast<double>(t->dims[i]);
  };
  // Q K^T and the weighted sum of V over every score, scaling and softmax (6 flops a score) and a
  // mask (1).
  auto attention = [](double scores, double head, double v_head, bool masked) {
    return 2 * scores * (head + v_head) + (masked ? 7 : 6) * scores;
  };
  CostEstimate cost;
  if (op == "SkipLayerNormalization" || op == "SkipSimplifiedLayerNormalization") {
    // The skip and bias additions, then layer (7 flops an element) or RMS (4) normalisation.
    if (!y) return cost;
    const bool layer_norm = op == "SkipLayerNormalization";
    double per = (layer_norm ? 7 : 4) + 1 + (present(layer_norm ? 4 : 3) ? 1 : 0);
    cost.flops = per * y->elements();
  } else if (op == "EmbedLayerNormalization") {
    // Word, position (and segment) rows gathered and added, then layer normalisation; only the
    // gathered rows of the tables are read.
    if (!y || !in(0)) return cost;
    double tables = present(1) ? 3 : 2;
    cost.flops = (tables - 1 + 7) * y->elements();
    cost.bytes_accessed = (tables + 1) * static_cast<double>(y->bytes()) +
                          static_cast<double>(in(0)->bytes()) * (present(1) ? 2 : 1);
  } else if (op == "Attention") {
    const auto& x = in(0);
    const auto& w = in(1);
    const double heads = static_cast<double>(attr_int(c.node, "num_heads", 0));
    // (Shapes a model's value_info gave, where the rule could not, may have other ranks.)
    if (!y || !x || !w || y->dims.size() != 3 || x->dims.size() != 3 || w->dims.size() != 2 ||
        heads <= 0) {
      return cost;
    }
    std::vector<int64_t> sizes = attr_ints(c.node, "qkv_hidden_sizes");
    double hidden = sizes.size() == 3 ? static_cast<double>(sizes[0]) : dim(w, 1) / 3;
    double v_hidden = dim(y, 2);
    double batch = dim(x, 0), sequence = dim(x, 1);
    double keys = out(1) && out(1)->dims.size() == 5 ? dim(out(1), 3) : sequence;
    bool masked = present(3) || attr_int(c.node, "unidirectional", 0) != 0;
    cost.flops =
        2 * batch * sequence * dim(x, 2) * dim(w, 1) +
        (present(2) ? batch * sequence * dim(w, 1) : 0) +
        attention(batch * heads * sequence * keys, hidden / heads, v_hidden / heads, masked);
  } else if (op == "MultiHeadAttention" || op == "GroupQueryAttention") {
    const auto& q = in(0);
    const double heads = static_cast<double>(attr_int(c.node, "num_heads", 0));
    if (!y || !q || y->dims.size() != 3 || (q->dims.size() != 3 && q->dims.size() != 5) ||
        heads <= 0) {
      return cost;
    }
    double batch = dim(q, 0), sequence = dim(q, 1);
    double head = q->dims.size() == 5 ? dim(q, 4) : dim(q, 2) / heads;
    if (op == "GroupQueryAttention" && !present(1) && !present(2)) {  // Q, K and V packed
      const double kv_heads = static_cast<double>(attr_int(c.node, "kv_num_heads", 0));
      if (kv_heads <= 0) return cost;
      head = dim(q, 2) / (heads + 2 * kv_heads);
    }
    double v_head = dim(y, 2) / heads;
    // The keys: the present cache's or the scores' length, else the value's or packed key's.
    double keys = sequence;
    if (out(1) && out(1)->dims.size() == 4) {
      keys = dim(out(1), 2);
    } else if (out(3) && out(3)->dims.size() == 4) {
      keys = dim(out(3), 3);
    } else if (op == "MultiHeadAttention" && in(2) && in(2)->dims.size() >= 3) {
      keys = dim(in(2), in(2)->dims.size() == 3 ? 1 : 2);
    } else if (op == "MultiHeadAttention" && in(1) && in(1)->dims.size() == 5) {
      keys = dim(in(1), 1);
    }
    bool masked = op == "GroupQueryAttention" || present(4) || present(5) ||
                  attr_int(c.node, "unidirectional", 0) != 0;
    cost.flops = attention(batch * heads * sequence * keys, head, v_head, masked);
  } else if (op == "MatMulNBits") {
    // The product, and dequantizing the (N, K) weight: a subtraction and a scaling per value.
    const double k = static_cast<double>(attr_int(c.node, "K", 0));
    const double n = static_cast<double>(attr_int(c.node, "N", 0));
    if (!y || k <= 0) return cost;
    cost.flops = 2 * y->elements() * k + 2 * n * k;
  } else if (op == "FusedMatMul") {
    const auto& a = in(0);
    if (!y || !a || a->dims.size() < 2) return cost;
    cost.flops =
        2 * y->elements() *
        dim(a, attr_int(c.node, "transA", 0) != 0 ? a->dims.size() - 2 : a->dims.size() - 1);
  } else {
    return std::nullopt;
  }
  cost.has_formula = true;
  return cost;
}

CostEstimate estimate_cost(const CostInputs& c) {
  const std::string& op = c.node.op_type();
  auto in = [&c](size_t i) -> const std::optional<TensorInfo>& { return c.input(i); };
  auto present = [&c](size_t i) { return c.present(i); };
  const std::optional<TensorInfo>& y = c.output(0);
  CostEstimate cost;

  if (op == "Conv" || op == "ConvInteger" || op == "QLinearConv") {
    size_t w_index = op == "QLinearConv" ? 3 : 1;
    const auto& w = in(w_index);
    if (!y || !w || w->dims.empty() || w->dims[0] == 0) return cost;
    double macs_per_output = w->elements() / static_cast<double>(w->dims[0]);
    cost.flops = 2 * y->elements() * macs_per_output;
    if (op == "Conv" && present(2)) cost.flops += y->elements();
    cost.has_formula = true;
    return cost;
  }
  if (op == "DeformConv") {
    // A convolution over bilinearly interpolated input samples: each of the
    // N x C x out-positions x kernel samples costs 7 flops (three lerps and the mask).
    const auto& w = in(1);
    if (!y || !w || w->dims.size() < 2 || w->dims[0] == 0) return cost;
    double macs_per_output = w->elements() / static_cast<double>(w->dims[0]);
    double positions = y->elements() / static_cast<double>(w->dims[0]);
    double group = static_cast<double>(std::max<int64_t>(1, attr_int(c.node, "group", 1)));
    cost.flops = 2 * y->elements() * macs_per_output + 7 * positions * group * macs_per_output;
    if (present(3)) cost.flops += y->elements();
    cost.has_formula = true;
    return cost;
  }
  if (op == "Attention" && canonical_domain(c.node.domain()).empty()) {
    // Opset 23: Q K^T and the weighted sum of V over every (batch, head, query, key) score, plus
    // scaling and softmax (6 flops a score) and the mask (1) when there is one.
    const auto& q = in(0);
    const auto& k = in(1);
    const auto& v = in(2);
    if (!q || !k || !v || q->dims.size() != k->dims.size() || q->dims.size() != v->dims.size() ||
        (q->dims.size() != 3 && q->dims.size() != 4)) {
      return cost;
    }
    double heads = 0, queries = 0, head = 0, keys = 0, v_head = 0;
    if (q->dims.size() == 4) {
      heads = static_cast<double>(q->dims[1]);
      queries = static_cast<double>(q->dims[2]);
      head = static_cast<double>(q->dims[3]);
      keys = static_cast<double>(k->dims[2]);
      v_head = static_cast<double>(v->dims[3]);
    } else {
      heads = static_cast<double>(attr_int(c.node, "q_num_heads", 0));
      double kv_heads = static_cast<double>(attr_int(c.node, "kv_num_heads", 0));
      if (heads <= 0 || kv_heads <= 0) return cost;
      queries = static_cast<double>(q->dims[1]);
      head = static_cast<double>(q->dims[2]) / heads;
      keys = static_cast<double>(k->dims[1]);
      v_head = static_cast<double>(v->dims[2]) / kv_heads;
    }
    if (in(4) && in(4)->dims.size() == 4) keys += static_cast<double>(in(4)->dims[2]);
    double scores = static_cast<double>(q->dims[0]) * heads * queries * keys;
    bool masked = present(3) || attr_int(c.node, "is_causal", 0) != 0;
    cost.flops = 2 * scores * (head + v_head) + (masked ? 7 : 6) * scores;
    cost.has_formula = true;
    return cost;
  }
  if (c.node.domain() == "com.microsoft") {
    if (std::optional<CostEstimate> contrib = estimate_contrib_cost(c)) return *contrib;
  }
  if (op == "ConvTranspose") {
    const auto& x = in(0);
    const auto& w = in(1);
    if (!y || !x || !w || w->dims.empty() || w->dims[0] == 0) return cost;
    double macs_per_input = w->elements() / static_cast<double>(w->dims[0]);
    cost.flops = 2 * x->elements() * macs_per_input;
    if (present(2)) cost.flops += y->elements();
    cost.has_formula = true;
    return cost;
  }
  if (op == "Gemm") {
    const auto& a = in(0);
    if (!y || !a || a->dims.size() != 2) return cost;
    double k = static_cast<double>(attr_int(c.node, "transA", 0) != 0 ? a->dims[0] : a->dims[1]);
    cost.flops = 2 * y->elements() * k;
    if (present(2)) cost.flops += y->elements();
    cost.has_formula = true;
    return cost;
  }
  if (op == "MatMul" || op == "MatMulInteger" || op == "QLinearMatMul") {
    const auto& a = in(0);
    if (!y || !a || a->dims.empty()) return cost;
    cost.flops = 2 * y->elements() * static_cast<double>(a->dims.back());
    cost.has_formula = true;
    return cost;
  }
  if (op == "LSTM" || op == "GRU" || op == "RNN") {
    const auto& x = in(0);
    const auto& w = in(1);
    if (!x || !w || x->dims.size() != 3 || w->dims.size() != 3) return cost;
    double gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
    double input_size = static_cast<double>(x->dims[2]);
    double hidden = static_cast<double>(attr_int(c.node, "hidden_size", 0));
    if (hidden <= 0) hidden = static_cast<double>(w->dims[1]) / gates;
    double steps_times_batch = x->elements() / std::max(input_size, 1.0);
    double directions = static_cast<double>(w->dims[0]);
    bool bias = present(3);
    // Elementwise work per step, batch row and direction (docs/importers.md derives these).
    double pointwise = op == "LSTM"  ? (bias ? 21 : 13)
                       : op == "GRU" ? (bias ? 17 : 11)
                                     : (bias ? 4 : 2);
    cost.flops = steps_times_batch * directions *
                 (2 * gates * hidden * (input_size + hidden) + pointwise * hidden);
    cost.has_formula = true;
    return cost;
  }
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") {
    std::vector<int64_t> kernel = attr_ints(c.node, "kernel_shape");
    if (!y || kernel.empty()) return cost;
    cost.flops = y->elements() * static_cast<double>(product(kernel));
    cost.has_formula = true;
    return cost;
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool" ||
      op == "ArgMax" || op == "ArgMin" || op == "ReduceMean" || op == "ReduceSum" ||
      op == "ReduceMax" || op == "ReduceMin" || op == "ReduceProd" || op == "ReduceL1" ||
      op == "ReduceLogSum") {
    if (!in(0)) return cost;
    // Reduce-18 with noop_with_empty_axes and no axes is an identity.
    const bool identity = attr_int(c.node, "noop_with_empty_axes", 0) != 0 && !present(1);
    cost.flops = identity ? 0 : in(0)->elements();
    cost.has_formula = true;
    return cost;
  }
  if (op == "ReduceSumSquare" || op == "ReduceL2" || op == "ReduceLogSumExp") {
    if (!in(0)) return cost;
    const bool identity = attr_int(c.node, "noop_with_empty_axes", 0) != 0 && !present(1);
    cost.flops = identity ? 0 : 2 * in(0)->elements();
    cost.has_formula = true;
    return cost;
  }
  if (op == "Resize" || op == "Upsample") {
    const auto& x = in(0);
    if (!y || !x || x->dims.size() != y->dims.size()) return cost;
    std::string mode = attr_string(c.node, "mode", "nearest");
    double per_axis = mode == "linear" || mode == "bilinear" ? 3 : mode == "cubic" ? 8 : 0;
    double resized_axes = 0;
    for (size_t i = 0; i < x->dims.size(); ++i) resized_axes += x->dims[i] != y->dims[i] ? 1 : 0;
    cost.flops = per_axis * resized_axes * y->elements();
    cost.has_formula = true;
    return cost;
  }
  if (op == "Sum" || op == "Max" || op == "Min" || op == "Mean") {
    if (!y) return cost;
    double n = 0;
    for (int i = 0; i < c.node.input_size(); ++i) n += c.node.input(i).empty() ? 0 : 1;
    cost.flops = std::max(n - 1, 1.0) * y->elements() + (op == "Mean" ? y->elements() : 0);
    cost.has_formula = true;
    return cost;
  }
  if (auto it = elementwise_flops().find(op); it != elementwise_flops().end()) {
    if (!y) return cost;
    cost.flops = it->second * y->elements();
    cost.has_formula = true;
    return cost;
  }
  if (data_movement_ops().count(op) > 0) {
    cost.has_formula = true;
    if (op == "Gather" || op == "GatherElements" || op == "GatherND" || op == "Slice" ||
        op == "SequenceAt") {
      // Reads only the selected elements (an embedding lookup does not read the whole table, nor
      // SequenceAt the whole sequence).
      double out_bytes = y ? static_cast<double>(y->bytes()) : 0;
      double index_bytes = op != "Slice" && in(1) ? static_cast<double>(in(1)->bytes()) : 0;
      cost.bytes_accessed = 2 * out_bytes + index_bytes;
    }
    return cost;
  }
  return cost;
}

// Weight slots: the inputs of each op type that hold parameters (keyed "DOMAIN:TYPE" outside the
// default domain, where a type may mean another op: onnxruntime's Attention is not ONNX's). A graph
// input without an initializer is a weight when every use of it (looking through the ops in
// kWeightPassThrough) is a weight slot.
const std::unordered_map<std::string, std::vector<int>>& weight_slots() {
  static const std::unordered_map<std::string, std::vector<int>> kSlots = {
      {"Conv", {1, 2}},
      {"ConvTranspose", {1, 2}},
      {"Gemm", {1, 2}},
      {"MatMul", {1}},
      {"BatchNormalization", {1, 2, 3, 4}},
      {"InstanceNormalization", {1, 2}},
      {"LayerNormalization", {1, 2}},
      {"GroupNormalization", {1, 2}},
      {"RMSNormalization", {1}},
      {"DeformConv", {1, 3}},
      {"SimplifiedLayerNormalization", {1}},
      {"QLinearConv", {3, 4, 5, 8}},
      {"QLinearMatMul", {3, 4, 5}},
      {"ConvInteger", {1, 3}},
      {"MatMulInteger", {1, 3}},
      {"com.microsoft:SimplifiedLayerNormalization", {1}},
      {"com.microsoft:SkipLayerNormalization", {2, 3, 4}},
      {"com.microsoft:SkipSimplifiedLayerNormalization", {2, 3}},
      {"com.microsoft:EmbedLayerNormalization", {2, 3, 4, 5, 6}},
      {"com.microsoft:Attention", {1, 2}},
      {"com.microsoft:MatMulNBits", {1, 2, 3, 4, 5}},
      {"com.microsoft:FastGelu", {1}},
      {"com.microsoft:BiasGelu", {1}},
      {"com.microsoft:BiasAdd", {1}},
      {"com.microsoft:RotaryEmbedding", {2, 3}},
      {"RotaryEmbedding", {1, 2}},
      {"com.microsoft:MultiHeadAttention", {3}},
      {"com.microsoft:GroupQueryAttention", {7, 8}},
      {"LSTM", {1, 2, 3}},
      {"GRU", {1, 2, 3}},
      {"RNN", {1, 2, 3}},
      {"Gather", {0}},
      {"PRelu", {1}}};
  return kSlots;
}
const std::unordered_set<std::string>& weight_pass_through() {
  static const std::unordered_set<std::string> kSet = {"Identity", "Reshape",         "Flatten",
                                                       "Squeeze",  "Unsqueeze",       "Transpose",
                                                       "Cast",     "DequantizeLinear"};
  return kSet;
}

// ---------------------------------------------------------------------------------------------
// The importer.

class OnnxImporter {
 public:
  OnnxImporter(std::string path, const ImportOptions& options)
      : path_(std::move(path)), options_(options) {}

  LoadedGraph run() {
    parse();
    read_opsets();
    index_graph();
    classify_graph_inputs();
    declare_value_types();
    GraphBuilder builder(graph_name(), path_);
    add_input_ops(builder);
    for (int index : topo_order_) process_node(index, builder);
    finish_warnings();
    LoadedGraph loaded{std::move(builder).build(), std::nullopt, std::move(warnings_), "onnx"};
    return loaded;
  }

 private:
  struct Param {
    std::string name;
    int64_t bytes = 0;
    bool charged = false;
  };
  struct Value {
    ox::TypeProto type;
    bool runtime = false;
    std::optional<TensorRef> tensor;       // runtime values
    std::optional<Literal> literal;        // constants of known content
    std::optional<SequenceInfo> sequence;  // sequences: their elements (infer_sequence_op)
    std::unique_ptr<ox::TensorProto> data;
    std::vector<uint32_t> params;  // constants: the parameters they derive from (sorted, unique)
  };
  struct Use {
    int node = 0;
    int slot = 0;
  };

  [[noreturn]] void fail(const std::string& message) const {
    throw FormatError(path_ + ": " + one_line(message));
  }
  // The tensor's size in bytes; fails when it exceeds a petabyte (2^50 bytes), which only a damaged
  // file's dimensions or a mistyped --dim give, and which would overflow int64 arithmetic.
  int64_t tensor_bytes(const TensorInfo& t, const std::string& what) const {
    constexpr double kMaxTensorBytes = 1125899906842624.0;  // 2^50
    const double bytes = t.elements() * static_cast<double>(element_bits(t.elem_type)) / 8;
    if (!(bytes <= kMaxTensorBytes)) {
      std::string dims;
      for (int64_t d : t.dims) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      fail(
          fmt::format("{}: shape [{}] would take {:.3g} bytes, more than 2^50; are the "
                      "dimensions (or --dim) right?",
                      what, dims, bytes));
    }
    return t.bytes();
  }
  // The bytes of a sequence's tensors together, checked as tensor_bytes checks one.
  int64_t sequence_bytes(const SequenceInfo& s, const std::string& what) const {
    int64_t total = 0;
    for (size_t i = 0; i < s.elements.size(); ++i) {
      const int64_t bytes = tensor_bytes(s.elements[i], what + ", tensor " + std::to_string(i));
      if (__builtin_add_overflow(total, bytes, &total)) fail(what + ": its tensors overflow");
    }
    // The total as a tensor of bytes, so that it meets tensor_bytes' limit as one tensor would.
    return tensor_bytes(TensorInfo{ox::TensorProto_DataType_UINT8, {total}}, what);
  }
  // "node '<name>' (<OpType>)"; an unnamed node by its place in the file (nodes of inlined function
  // bodies all have names).
  std::string node_label(const ox::NodeProto& node, int index) const {
    std::string name = node.name().empty()
                           ? "#" + std::to_string(origins_[static_cast<size_t>(index)].file_index)
                           : node.name();
    return "node '" + name + "' (" + node.op_type() + ")";
  }

  std::string graph_name() const {
    std::string stem = path_;
    if (auto slash = stem.find_last_of('/'); slash != std::string::npos) {
      stem = stem.substr(slash + 1);
    }
    if (auto dot = stem.rfind(".onnx"); dot != std::string::npos && dot > 0) {
      stem = stem.substr(0, dot);
    }
    return stem;
  }

  void parse() {
    MappedFile file(path_);
    std::string filtered = WireFilter(file.bytes(), path_).filtered_model();
    if (!model_.ParseFromArray(filtered.data(), static_cast<int>(filtered.size()))) {
      fail("not a valid ONNX model: the protobuf message does not parse as a ModelProto");
    }
    if (!model_.has_graph() || model_.graph().node_size() == 0) {
      fail("not a valid ONNX model: it has no graph nodes (truncated or not an ONNX file?)");
    }
    // onnxruntime numbers the file's unnamed nodes before it inlines functions.
    const ox::GraphProto& g = model_.graph();
    std::vector<int> ort_numbers(static_cast<size_t>(g.node_size()));
    int constants = 0;
    for (int i = 0; i < g.node_size(); ++i) {
      ort_numbers[static_cast<size_t>(i)] = i - constants;
      if (g.node(i).op_type() == "Constant") ++constants;
    }
    origins_ = inline_local_functions(model_, path_);
    if (g.node_size() == 0) fail("the graph has no nodes once its functions' calls are inlined");
    ort_numbers_.reserve(origins_.size());
    for (const NodeOrigin& o : origins_) {
      ort_numbers_.push_back(o.file_index < 0 ? -1
                                              : ort_numbers[static_cast<size_t>(o.file_index)]);
    }
  }

  void read_opsets() {
    for (const auto& o : model_.opset_import()) {
      std::string domain = canonical_domain(o.domain());
      opsets_[domain] = static_cast<int>(o.version());
    }
    if (opsets_.count("") == 0) {
      fail(
          "model declares no opset for the default ONNX domain (opset_import is missing; "
          "truncated file?)");
    }
    const auto& range = ox::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    if (auto it = range.find(""); it != range.end() && opsets_[""] > it->second.second) {
      warnings_.push_back(path_ + ": model uses ONNX opset " + std::to_string(opsets_[""]) +
                          " but this libonnx knows up to " + std::to_string(it->second.second) +
                          ": ops changed or added since are read by dplace's own rules where "
                          "docs/importers.md lists them, the others with their older definition");
    }
  }

  int opset_of(const std::string& domain) const {
    auto it = opsets_.find(canonical_domain(domain));
    return it == opsets_.end() ? 1 : it->second;
  }

  // Indexes names, checks references and SSA form, and orders nodes topologically.
  void index_graph() {
    ox::GraphProto& g = *model_.mutable_graph();
    for (int i = 0; i < g.initializer_size(); ++i) {
      const ox::TensorProto& t = g.initializer(i);
      if (t.name().empty()) fail("initializer #" + std::to_string(i) + " has no name");
      if (values_.count(t.name()) > 0) fail("initializer '" + t.name() + "' is defined twice");
      Value& v = values_[t.name()];
      std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
      for (int64_t d : dims) {
        if (d < 0) fail("initializer '" + t.name() + "': negative dimension");
      }
      v.type = tensor_type(t.data_type(), dims);
      v.literal = literal_from_tensor(t);
      const int64_t bytes =
          tensor_bytes(TensorInfo{t.data_type(), dims}, "initializer '" + t.name() + "'");
      if (is_integer_type(t.data_type()) && bytes < kMinConstantWeightBytes) {
        small_integer_initializers_.push_back({t.name(), bytes});  // decided once uses are known
      } else {
        add_param(v, t.name(), bytes);
      }
    }
    for (const auto& s : g.sparse_initializer()) {
      const std::string& name = s.values().name();
      if (name.empty()) fail("sparse initializer without a name");
      if (values_.count(name) > 0) fail("initializer '" + name + "' is defined twice");
      Value& v = values_[name];
      v.type = tensor_type(s.values().data_type(), {s.dims().begin(), s.dims().end()});
      const TensorInfo values{s.values().data_type(),
                              {s.values().dims().begin(), s.values().dims().end()}};
      const TensorInfo indices{s.indices().data_type(),
                               {s.indices().dims().begin(), s.indices().dims().end()}};
      if (product(values.dims) < 0 || product(indices.dims) < 0) {
        fail("sparse initializer '" + name + "': negative dimension");
      }
      add_param(v, name,
                tensor_bytes(values, "sparse initializer '" + name + "'") +
                    tensor_bytes(indices, "sparse initializer '" + name + "' indices"));
    }
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < g.node_size(); ++i) {
      for (const std::string& out : g.node(i).output()) {
        if (out.empty()) continue;
        if (!producer.emplace(out, i).second || values_.count(out) > 0) {
          fail(node_label(g.node(i), i) + ": output '" + out +
               "' is already produced by another node or initializer");
        }
      }
    }
    std::unordered_set<std::string> graph_inputs;
    for (const auto& in : g.input()) graph_inputs.insert(in.name());
    for (const auto& in : g.input()) {
      if (producer.count(in.name()) > 0) {
        fail("graph input '" + in.name() + "' is also produced by a node");
      }
    }
    // Kahn's algorithm over node dependencies, ties by file order.
    std::vector<std::vector<int>> successors(static_cast<size_t>(g.node_size()));
    std::vector<int> indegree(static_cast<size_t>(g.node_size()), 0);
    for (int i = 0; i < g.node_size(); ++i) {
      const ox::NodeProto& node = g.node(i);
      for (int slot = 0; slot < node.input_size(); ++slot) {
        const std::string& in = node.input(slot);
        if (in.empty()) continue;
        uses_[in].push_back({i, slot});
        if (auto it = producer.find(in); it != producer.end()) {
          successors[static_cast<size_t>(it->second)].push_back(i);
          ++indegree[static_cast<size_t>(i)];
        } else if (values_.count(in) == 0 && graph_inputs.count(in) == 0) {
          fail(node_label(node, i) + ": input '" + in +
               "' is not a graph input, an initializer or any node's output");
        }
      }
      if (has_graph_attribute(node)) {
        has_subgraphs_ = true;
        // Values of this graph that the node's subgraphs read are dependencies too.
        std::set<std::string> refs;
        visit_subgraphs(node, [&](const ox::GraphProto& sub) { collect_outer_refs(sub, refs); });
        for (const std::string& in : refs) {
          bool known = values_.count(in) > 0 || graph_inputs.count(in) > 0;
          auto it = producer.find(in);
          if (it == producer.end() && !known)
            continue;  // resolved further out, or an error ONNX reports
          implicit_inputs_[i].push_back(in);
          if (it != producer.end()) {
            successors[static_cast<size_t>(it->second)].push_back(i);
            ++indegree[static_cast<size_t>(i)];
          }
        }
      }
      std::string domain = canonical_domain(node.domain());
      if (opsets_.count(domain) == 0) {
        fail(node_label(node, i) + ": domain '" + domain +
             "' has no opset_import entry (truncated file?)");
      }
    }
    std::set<int> ready;
    for (int i = 0; i < g.node_size(); ++i) {
      if (indegree[static_cast<size_t>(i)] == 0) ready.insert(i);
    }
    while (!ready.empty()) {
      int i = *ready.begin();
      ready.erase(ready.begin());
      topo_order_.push_back(i);
      for (int s : successors[static_cast<size_t>(i)]) {
        if (--indegree[static_cast<size_t>(s)] == 0) ready.insert(s);
      }
    }
    if (topo_order_.size() != static_cast<size_t>(g.node_size())) {
      for (int i = 0; i < g.node_size(); ++i) {
        if (indegree[static_cast<size_t>(i)] > 0) {
          fail("the graph has a cycle through " + node_label(g.node(i), i));
        }
      }
    }
    for (const auto& out : g.output()) {
      if (producer.count(out.name()) == 0 && values_.count(out.name()) == 0 &&
          graph_inputs.count(out.name()) == 0) {
        fail("graph output '" + out.name() + "' is produced by no node (truncated model?)");
      }
    }
  }

  // Names a subgraph reads without defining them (recursively through nested subgraphs).
  static void collect_outer_refs(const ox::GraphProto& g, std::set<std::string>& refs) {
    std::unordered_set<std::string> defined;
    visit_defined_names(g, [&](const std::string& name) { defined.insert(name); });
    for (const auto& n : g.node()) {
      std::set<std::string> inner;
      for (const auto& in : n.input()) inner.insert(in);
      visit_subgraphs(n, [&](const ox::GraphProto& sub) { collect_outer_refs(sub, inner); });
      for (const std::string& in : inner) {
        if (!in.empty() && defined.count(in) == 0) refs.insert(in);
      }
    }
  }

  void add_param(Value& v, const std::string& name, int64_t bytes) {
    v.runtime = false;
    v.params = {static_cast<uint32_t>(params_.size())};
    params_.push_back({name, bytes, false});
  }

  static bool is_weight_slot(const ox::NodeProto& node, int slot) {
    const std::string domain = canonical_domain(node.domain());
    auto slots =
        weight_slots().find(domain.empty() ? node.op_type() : domain + ":" + node.op_type());
    return slots != weight_slots().end() &&
           std::find(slots->second.begin(), slots->second.end(), slot) != slots->second.end();
  }

  // Whether every use of `name` is a weight slot, looking through pass-through ops.
  bool used_only_as_weight(const std::string& name, int depth) {
    auto it = uses_.find(name);
    if (it == uses_.end() || it->second.empty() || depth > 16) return false;
    const ox::GraphProto& g = model_.graph();
    for (const Use& use : it->second) {
      const ox::NodeProto& node = g.node(use.node);
      if (use.slot == 0 && weight_pass_through().count(node.op_type()) > 0) {
        if (node.output_size() == 0 || !used_only_as_weight(node.output(0), depth + 1)) {
          return false;
        }
        continue;
      }
      if (!is_weight_slot(node, use.slot)) return false;
    }
    return true;
  }

  // Whether some use of constant `name` reads it as a weight: a weight slot, looking through
  // pass-through ops, or the tensor or zero point a DequantizeLinear dequantizes (a constant that
  // is dequantized is a quantized weight or bias, whatever reads the result).
  bool read_as_weight(const std::string& name, int depth) {
    auto it = uses_.find(name);
    if (it == uses_.end() || depth > 16) return false;
    const ox::GraphProto& g = model_.graph();
    for (const Use& use : it->second) {
      const ox::NodeProto& node = g.node(use.node);
      if (node.op_type() == "DequantizeLinear" && (use.slot == 0 || use.slot == 2)) return true;
      if (use.slot == 0 && weight_pass_through().count(node.op_type()) > 0) {
        if (node.output_size() > 0 && read_as_weight(node.output(0), depth + 1)) return true;
        continue;
      }
      if (is_weight_slot(node, use.slot)) return true;
    }
    return false;
  }

  // Splits graph inputs into weights (constants with a parameter) and data inputs, and sets the
  // dims of data inputs. A small integer initializer is a weight only when some use reads it as one
  // (read_as_weight: quantized weights, zero points); otherwise it is a shape, axes, index or
  // scalar constant, like a small Constant node (a ReduceMean-18's axes would otherwise be a
  // weight, trained in
  // --training with its own gradient and Adam update).
  void classify_graph_inputs() {
    for (const auto& [name, bytes] : small_integer_initializers_) {
      if (read_as_weight(name, 0)) add_param(values_[name], name, bytes);
    }
    std::vector<std::string> missing;
    std::string first_missing_input;
    for (const auto& in : model_.graph().input()) {
      if (values_.count(in.name()) > 0) continue;  // an initializer: a weight (IR < 4 style)
      std::optional<TensorInfo> static_type = known_tensor(in.type());
      if (static_type && used_only_as_weight(in.name(), 0)) {
        Value& v = values_[in.name()];
        v.type = in.type();
        add_param(v, in.name(), tensor_bytes(*static_type, "graph input '" + in.name() + "'"));
        continue;
      }
      if (!in.type().has_tensor_type()) {
        fail("graph input '" + in.name() + "' is not a tensor (only tensor inputs are supported)");
      }
      if (in.type().tensor_type().elem_type() == 0) {
        fail("graph input '" + in.name() + "' has no element type");
      }
      if (!in.type().tensor_type().has_shape()) {
        fail("graph input '" + in.name() + "' has no shape");
      }
      Value& v = values_[in.name()];
      v.runtime = true;
      v.type = in.type();
      auto* shape = v.type.mutable_tensor_type()->mutable_shape();
      for (int axis = 0; axis < shape->dim_size(); ++axis) {
        auto* dim = shape->mutable_dim(axis);
        if (dim->has_dim_value()) {
          if (dim->dim_value() < 0) {
            fail("graph input '" + in.name() + "': dimension " + std::to_string(axis) +
                 " is negative");
          }
          continue;
        }
        std::string key = dim->has_dim_param() && !dim->dim_param().empty()
                              ? dim->dim_param()
                              : in.name() + ":" + std::to_string(axis);
        auto it = options_.dims.find(key);
        if (it == options_.dims.end()) {
          if (std::find(missing.begin(), missing.end(), key) == missing.end()) {
            missing.push_back(key);
          }
          if (first_missing_input.empty()) first_missing_input = in.name();
          continue;
        }
        used_dims_.insert(key);
        dim->clear_dim_param();
        dim->set_dim_value(it->second);
      }
      data_inputs_.push_back(in.name());
    }
    if (!missing.empty()) {
      std::string names, flags;
      for (const std::string& m : missing) {
        names += (names.empty() ? "" : ", ") + m;
        flags += (flags.empty() ? "" : " ") + ("--dim " + m + "=N");
      }
      fail("input '" + first_missing_input + "': dynamic dimension" +
           (missing.size() > 1 ? "s " : " ") + names + (missing.size() > 1 ? " are" : " is") +
           " not set; give " + (missing.size() > 1 ? "them" : "it") + " with " + flags);
    }
    for (const auto& [name, value] : options_.dims) {
      if (value < 0) fail("--dim " + name + "=" + std::to_string(value) + ": negative size");
    }
    for (auto& [name, v] : values_) {
      if (v.literal) {
        v.data = tensor_from_literal(*v.literal);
        data_[name] = v.data.get();
      }
      if (v.type.value_case() != ox::TypeProto::VALUE_NOT_SET) types_[name] = &v.type;
    }
  }

  // Types the model declares for intermediate values and outputs, with --dim values applied.
  void declare_value_types() {
    auto declare = [&](const ox::ValueInfoProto& info) {
      if (values_.count(info.name()) > 0 || !info.has_type()) return;
      ox::TypeProto type = info.type();
      if (type.has_tensor_type() && type.tensor_type().has_shape()) {
        auto* shape = type.mutable_tensor_type()->mutable_shape();
        for (int i = 0; i < shape->dim_size(); ++i) {
          auto* dim = shape->mutable_dim(i);
          if (!dim->has_dim_param()) continue;
          if (auto it = options_.dims.find(dim->dim_param()); it != options_.dims.end()) {
            dim->clear_dim_param();
            dim->set_dim_value(it->second);
          }
        }
      }
      declared_[info.name()] = std::move(type);
    };
    for (const auto& info : model_.graph().value_info()) declare(info);
    for (const auto& info : model_.graph().output()) declare(info);
  }

  void add_input_ops(GraphBuilder& builder) {
    for (const std::string& name : data_inputs_) {
      Value& v = values_[name];
      std::optional<TensorInfo> info = known_tensor(v.type);
      DPLACE_CHECK(info.has_value()) << name;
      Op op;
      op.name = name;
      op.type = "Input";
      op.phase = Phase::kForward;
      op.output_bytes = {tensor_bytes(*info, "graph input '" + name + "'")};
      op.bytes_accessed = 0;
      op.extra = Json::object({{"output_shapes", Json::array({info->dims})}});
      used_names_.insert(name);
      v.tensor = TensorRef{builder.add_op(std::move(op)), 0};
    }
  }

  enum class NodeKind { kFolded, kAlias, kRuntime };

  NodeKind classify(const ox::NodeProto& node) const {
    const std::string& op = node.op_type();
    bool default_domain = canonical_domain(node.domain()).empty();
    if (has_graph_attribute(node)) return NodeKind::kRuntime;
    if (default_domain && (op == "Constant" || op == "Shape" || op == "Size")) {
      return NodeKind::kFolded;
    }
    if (default_domain && op == "SequenceLength" && node.input_size() == 1 &&
        values_.count(node.input(0)) > 0 && values_.at(node.input(0)).sequence) {
      return NodeKind::kFolded;  // its length is known
    }
    bool any_input = false, all_constant = true;
    for (const std::string& in : node.input()) {
      if (in.empty()) continue;
      any_input = true;
      if (values_.at(in).runtime) all_constant = false;
    }
    if (any_input && all_constant) return NodeKind::kFolded;
    if (default_domain && node.input_size() > 0 && !node.input(0).empty() &&
        values_.at(node.input(0)).runtime) {
      if (op == "Identity" || op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
          op == "Unsqueeze") {
        return NodeKind::kAlias;
      }
      if (op == "Dropout") {
        for (int i = 1; i < node.output_size(); ++i) {
          if (!node.output(i).empty() && uses_.count(node.output(i)) > 0) {
            return NodeKind::kRuntime;
          }
        }
        return NodeKind::kAlias;
      }
    }
    return NodeKind::kRuntime;
  }

  // Rank of input `slot` when its shape is known.
  std::optional<int> input_rank(const ox::NodeProto& node, int slot) const {
    if (slot >= node.input_size() || node.input(slot).empty()) return std::nullopt;
    auto it = types_.find(node.input(slot));
    if (it == types_.end() || !it->second->has_tensor_type() ||
        !it->second->tensor_type().has_shape()) {
      return std::nullopt;
    }
    return it->second->tensor_type().shape().dim_size();
  }

  // ONNX 1.12's inference functions index some inputs' dims and attribute lists without checking
  // them first; these checks keep a malformed model from crashing there. Returns the problem, or
  // "" when the node may be inferred.
  std::string precheck(const ox::NodeProto& node) const {
    const std::string& op = node.op_type();
    auto rank = [&](int slot) { return input_rank(node, slot); };
    auto rank_is = [&](int slot, int want) -> std::string {
      std::optional<int> r = rank(slot);
      if (r && *r != want) {
        return "input " + std::to_string(slot) + " has rank " + std::to_string(*r) + ", expected " +
               std::to_string(want);
      }
      return "";
    };
    static const std::unordered_set<std::string> kSpatial = {
        "Conv",       "ConvTranspose",     "ConvInteger",   "QLinearConv",
        "MaxPool",    "AveragePool",       "LpPool",        "MaxUnpool",
        "MaxRoiPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"};
    if (kSpatial.count(op) > 0) {
      std::optional<int> x = rank(0);
      if (x && *x < 3) return "input 0 has rank " + std::to_string(*x) + ", expected at least 3";
      int w_slot = op == "QLinearConv" ? 3 : 1;
      if (op.find("Conv") != std::string::npos && x) {
        if (std::string e = rank_is(w_slot, *x); !e.empty()) return e;
      }
      for (const char* name :
           {"kernel_shape", "strides", "dilations", "output_padding", "output_shape", "pads"}) {
        const ox::AttributeProto* a = find_attr(node, name);
        if (a == nullptr) continue;
        for (int64_t v : a->ints()) {
          bool ok = std::string_view(name) == "pads" || std::string_view(name) == "output_padding"
                        ? v >= 0
                        : v > 0;
          if (!ok) return std::string("attribute '") + name + "' has a bad value";
        }
        if (!x) continue;
        int want = (std::string_view(name) == "pads" ? 2 : 1) * (*x - 2);
        if (a->ints_size() != want) {
          return std::string("attribute '") + name + "' has " + std::to_string(a->ints_size()) +
                 " values, expected " + std::to_string(want);
        }
      }
      if (attr_int(node, "group", 1) <= 0) return "attribute 'group' must be positive";
    }
    if (op == "Gemm") {
      for (int slot : {0, 1}) {
        if (std::string e = rank_is(slot, 2); !e.empty()) return e;
      }
    }
    if (op == "LSTM" || op == "GRU" || op == "RNN") {
      for (int slot : {0, 1, 2}) {
        if (std::string e = rank_is(slot, 3); !e.empty()) return e;
      }
      if (std::string e = rank_is(3, 2); !e.empty()) return e;
      if (attr_int(node, "hidden_size", 1) <= 0) return "attribute 'hidden_size' must be positive";
    }
    if (op == "MatMul" || op == "MatMulInteger") {
      for (int slot : {0, 1}) {
        if (std::optional<int> r = rank(slot); r && *r == 0) return "scalar operand";
      }
    }
    return "";
  }

  // What is known of each input of `node`: its type and, for a constant, its values.
  std::vector<NodeInput> node_inputs(const ox::NodeProto& node) const {
    std::vector<NodeInput> inputs;
    for (const std::string& name : node.input()) {
      NodeInput input;
      if (auto t = types_.find(name); !name.empty() && t != types_.end()) input.type = t->second;
      if (auto v = values_.find(name); !name.empty() && v != values_.end()) {
        if (v->second.literal) input.values = &v->second.literal->values;
        if (v->second.sequence) input.sequence = &*v->second.sequence;
      }
      inputs.push_back(input);
    }
    return inputs;
  }

  // Runs ONNX type-and-shape inference for one node, or dplace's own rule for an op this libonnx
  // does not know (onnx_op_rules.h). Returns the output types (an empty TypeProto where nothing was
  // inferred) and sets `error` to why inference failed, saying whose inference it was.
  std::vector<ox::TypeProto> infer(ox::NodeProto& node, int index, std::string& error) {
    std::vector<ox::TypeProto> out(static_cast<size_t>(node.output_size()));
    std::string domain = canonical_domain(node.domain());
    const std::vector<NodeInput> inputs = node_inputs(node);  // what dplace's rules read
    if (is_sequence_op(node)) {
      // ONNX's schema checks the node (the op exists at the model's opset, its inputs, outputs and
      // attribute types); dplace's rule, which knows each sequence's tensors, infers.
      const ox::OpSchema* schema = ox::OpSchemaRegistry::Schema(node.op_type(), opset_of(""), "");
      if (schema == nullptr) {
        error = "ONNX opset " + std::to_string(opset_of("")) + " has no " + node.op_type();
        return out;
      }
      try {
        schema->Verify(node);
      } catch (const std::exception& e) {
        error = std::string("ONNX: ") + e.what();
        return out;
      }
      RuleResult sequence = infer_sequence_op(node, inputs);
      if (!sequence.error.empty()) error = "dplace's sequence rule: " + sequence.error;
      for (size_t i = 0; i < sequence.sequences.size(); ++i) {
        if (sequence.sequences[i] && !node.output(static_cast<int>(i)).empty()) {
          // Each sequence op copies its input's list: a long chain of SequenceInserts would hold
          // a quadratic number of tensors.
          sequence_tensors_ += static_cast<int64_t>(sequence.sequences[i]->elements.size());
          if (sequence_tensors_ > kMaxSequenceTensors) {
            fail(fmt::format("{}: the model's sequences hold more than {} tensors together",
                             node_label(node, index), kMaxSequenceTensors));
          }
          values_[node.output(static_cast<int>(i))].sequence = std::move(sequence.sequences[i]);
        }
      }
      return std::move(sequence.outputs);
    }
    if (domain.empty()) {
      std::optional<RuleResult> newer = infer_newer_op(node, opset_of(""), inputs);
      if (newer) {
        if (!newer->error.empty())
          error = "dplace's rule for opset " + std::to_string(opset_of("")) + ": " + newer->error;
        return std::move(newer->outputs);
      }
    }
    const ox::OpSchema* schema =
        ox::OpSchemaRegistry::Schema(node.op_type(), opset_of(domain), domain);
    if (schema == nullptr) {
      if (std::optional<RuleResult> contrib = infer_contrib_op(node, inputs)) {
        if (!contrib->error.empty()) error = "dplace's rule for the contrib op: " + contrib->error;
        return std::move(contrib->outputs);
      }
      error = "ONNX shape inference: ONNX has no schema for op type '" + node.op_type() + "'" +
              (domain.empty() ? "" : " in domain '" + domain + "'") +
              "; the model's value_info can give its outputs' shapes";
      return out;
    }
    if (std::string problem = precheck(node); !problem.empty()) {
      error = "ONNX shape inference: " + problem;
      return out;
    }
    if (std::string problem = sequence_misuse(node, *schema); !problem.empty()) {
      error = problem;
      return out;
    }
    try {
      schema->Verify(node);
      if (!graph_context_) {
        symbol_table_ = std::make_unique<ox::shape_inference::SymbolTableImpl>();
        graph_context_ = std::make_unique<ox::shape_inference::GraphInferenceContext>(
            types_, opsets_, symbol_table_.get(), local_functions_,
            ox::OpSchemaRegistry::Instance(), nullptr, static_cast<int>(model_.ir_version()));
      }
      ox::shape_inference::InferenceContextImpl ctx(node, types_, data_, sparse_data_, nullptr,
                                                    graph_context_.get());
      if (schema->has_type_and_shape_inference_function()) {
        schema->GetTypeAndShapeInferenceFunction()(ctx);
      } else if (schema->HasFunction()) {
        ox::shape_inference::InferShapeForFunctionNode(*schema->GetFunction(),
                                                       ox::OpSchemaRegistry::Instance(), ctx);
      }
      for (size_t i = 0; i < out.size(); ++i) out[i] = ctx.allOutputTypes_[i];
    } catch (const std::exception& e) {
      error = std::string("ONNX shape inference: ") + e.what();
    }
    return out;
  }

  // Why `node` may not read one of its inputs, a sequence, where its schema takes only tensors
  // (ONNX's inference functions would read the sequence as a tensor of no shape); "" when fine.
  std::string sequence_misuse(const ox::NodeProto& node, const ox::OpSchema& schema) const {
    const auto& formals = schema.inputs();
    for (int slot = 0; slot < node.input_size() && !formals.empty(); ++slot) {
      const std::string& name = node.input(slot);
      auto it = values_.find(name);
      if (name.empty() || it == values_.end() || !it->second.type.has_sequence_type()) continue;
      const auto& formal = formals[std::min(static_cast<size_t>(slot), formals.size() - 1)];
      bool takes_sequences = false;
      for (const auto* type : formal.GetTypes()) {
        takes_sequences = takes_sequences || type->rfind("seq(", 0) == 0;
      }
      if (!takes_sequences) {
        return "input '" + name + "' is a sequence, where " + node.op_type() + " takes tensors";
      }
    }
    return "";
  }

  // A value declared (value_info, graph output) a tensor that its node makes a sequence, or the
  // other way round, or a sequence of other tensors, is an error: the file contradicts itself.
  void check_declared_kind(const std::string& name, const ox::TypeProto& declared,
                           const ox::TypeProto& inferred) const {
    if (declared.value_case() == ox::TypeProto::VALUE_NOT_SET ||
        inferred.value_case() == ox::TypeProto::VALUE_NOT_SET) {
      return;
    }
    if (declared.value_case() != inferred.value_case()) {
      fail("'" + name + "' is declared a " + type_kind(declared) +
           " (value_info or graph output) but its node makes a " + type_kind(inferred));
    }
    if (!declared.has_sequence_type()) return;
    const auto& d = declared.sequence_type().elem_type();
    const auto& i = inferred.sequence_type().elem_type();
    if (d.has_tensor_type() && i.has_tensor_type() && d.tensor_type().elem_type() != 0 &&
        d.tensor_type().elem_type() != i.tensor_type().elem_type()) {
      fail(fmt::format(
          "'{}' is declared a sequence of element type {} (value_info or graph output) but its "
          "node makes one of element type {}",
          name, d.tensor_type().elem_type(), i.tensor_type().elem_type()));
    }
  }

  void set_output_type(const std::string& name, const ox::TypeProto& inferred) {
    Value& v = values_[name];
    auto declared = declared_.find(name);
    if (declared != declared_.end()) check_declared_kind(name, declared->second, inferred);
    v.type = merge_types(declared == declared_.end() ? nullptr : &declared->second, inferred);
    if (v.type.value_case() != ox::TypeProto::VALUE_NOT_SET) types_[name] = &v.type;
  }

  void process_node(int index, GraphBuilder& builder) {
    ox::NodeProto& node = *model_.mutable_graph()->mutable_node(index);
    NodeKind kind = classify(node);
    std::string error;
    std::vector<ox::TypeProto> inferred = infer(node, index, error);
    for (int i = 0; i < node.output_size(); ++i) {
      if (!node.output(i).empty())
        set_output_type(node.output(i), inferred[static_cast<size_t>(i)]);
    }
    if (kind == NodeKind::kFolded) {
      fold(node);
    } else if (kind == NodeKind::kAlias) {
      alias(node, index, error);
    } else {
      add_runtime_op(node, index, error, builder);
    }
  }

  void fold(const ox::NodeProto& node) {
    bool metadata = node.op_type() == "Shape" || node.op_type() == "Size";
    std::vector<uint32_t> params;
    std::vector<const Literal*> in;
    std::vector<const ox::TypeProto*> in_types;
    for (const std::string& name : node.input()) {
      if (name.empty()) {
        in.push_back(nullptr);
        in_types.push_back(nullptr);
        continue;
      }
      const Value& v = values_.at(name);
      in.push_back(v.literal ? &*v.literal : nullptr);
      in_types.push_back(v.type.value_case() == ox::TypeProto::VALUE_NOT_SET ? nullptr : &v.type);
      if (!metadata) params.insert(params.end(), v.params.begin(), v.params.end());
    }
    std::sort(params.begin(), params.end());
    params.erase(std::unique(params.begin(), params.end()), params.end());
    std::string domain = canonical_domain(node.domain());
    if (domain.empty() && node.op_type() == "Constant" && node.output_size() == 1) {
      // A large Constant is a weight stored in the graph (some exporters do this).
      const ox::AttributeProto* value = find_attr(node, "value");
      if (value != nullptr && value->has_t()) {
        const ox::TensorProto& t = value->t();
        const TensorInfo info{t.data_type(), {t.dims().begin(), t.dims().end()}};
        const int64_t bytes =
            info.bytes() < 0 ? 0 : tensor_bytes(info, "Constant '" + node.output(0) + "'");
        if (bytes >= kMinConstantWeightBytes) {
          params = {static_cast<uint32_t>(params_.size())};
          params_.push_back({node.output(0), bytes, false});
        }
      }
    }
    std::optional<Literal> result;
    if (domain.empty() && node.op_type() == "SequenceLength" && node.input_size() == 1) {
      if (const auto& sequence = values_.at(node.input(0)).sequence) {
        result = scalar_literal(ox::TensorProto_DataType_INT64,
                                static_cast<double>(sequence->elements.size()));
      }
    } else if (domain.empty() && node.output_size() >= 1) {
      result = evaluate(node, opset_of(""), in, in_types);
    }
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      Value& v = values_[node.output(i)];
      v.runtime = false;
      v.params = params;
      if (i == 0 && result) {
        v.type = tensor_type(result->elem_type, result->dims);
        types_[node.output(i)] = &v.type;
        v.literal = std::move(result);
        v.data = tensor_from_literal(*v.literal);
        data_[node.output(i)] = v.data.get();
      }
    }
  }

  void alias(const ox::NodeProto& node, int index, const std::string& error) {
    const Value& source = values_.at(node.input(0));
    if (!source.tensor) {
      fail(node_label(node, index) + ": input '" + node.input(0) + "' carries no tensor");
    }
    TensorRef tensor = *source.tensor;
    const std::string& out = node.output(0);
    if (out.empty()) return;
    Value& v = values_[out];
    v.runtime = true;
    v.tensor = tensor;
    if (!known_tensor(v.type)) {
      fail(node_label(node, index) + ": output '" + out + "': " + describe_unknown(v.type, error));
    }
    for (int i = 1; i < node.output_size(); ++i) {
      if (!node.output(i).empty()) values_[node.output(i)].runtime = true;  // unused (classify)
    }
  }

  // An unnamed node is "<OpType>_<i>", i its place among the file's nodes (inlined function bodies
  // name all their nodes).
  std::string unique_op_name(const ox::NodeProto& node, int index) {
    std::string base =
        node.name().empty()
            ? node.op_type() + "_" + std::to_string(origins_[static_cast<size_t>(index)].file_index)
            : node.name();
    std::string name = base;
    for (int k = 1; used_names_.count(name) > 0; ++k) name = base + "_" + std::to_string(k);
    used_names_.insert(name);
    return name;
  }

  // The name onnxruntime gives the node in its profiles (io/ort_profile.h): its name, else
  // "<OpType>_<i>" where i counts the file's main-graph nodes without its Constant nodes, which
  // onnxruntime turns into initializers before it numbers the others. (The nodes of inlined
  // functions get names of onnxruntime's own making, which this does not reproduce.)
  std::string onnxruntime_name(const ox::NodeProto& node, int index) const {
    if (!node.name().empty()) return node.name();
    return node.op_type() + "_" + std::to_string(ort_numbers_[static_cast<size_t>(index)]);
  }

  // Charges every parameter behind constant `v` that no earlier op was charged with to `op`.
  void charge_params(const Value& v, Op& op) {
    for (uint32_t p : v.params) {
      if (params_[p].charged) continue;
      params_[p].charged = true;
      op.param_bytes += params_[p].bytes;
    }
  }

  void add_runtime_op(const ox::NodeProto& node, int index, const std::string& error,
                      GraphBuilder& builder) {
    Op op;
    op.name = unique_op_name(node, index);
    op.type = node.op_type();
    op.phase = Phase::kForward;
    CostInputs cost_in{node, {}, {}, 0, 0};
    for (int slot = 0; slot < node.input_size(); ++slot) {
      const std::string& name = node.input(slot);
      if (name.empty()) {
        cost_in.in.emplace_back();
        continue;
      }
      const Value& v = values_.at(name);
      std::optional<TensorInfo> info = known_tensor(v.type);
      cost_in.in.push_back(info);
      if (info) {
        cost_in.read_bytes += static_cast<double>(
            tensor_bytes(*info, node_label(node, index) + ": input '" + name + "'"));
      } else if (v.sequence) {
        cost_in.read_bytes += static_cast<double>(
            sequence_bytes(*v.sequence, node_label(node, index) + ": input '" + name + "'"));
      }
      if (v.runtime) {
        if (!v.tensor) {
          fail(node_label(node, index) + ": input '" + name + "' carries no tensor");
        }
        op.inputs.push_back(*v.tensor);
        continue;
      }
      charge_params(v, op);
    }
    if (auto it = implicit_inputs_.find(index); it != implicit_inputs_.end()) {
      for (const std::string& name : it->second) {
        const Value& v = values_.at(name);
        if (v.runtime && v.tensor) {
          op.inputs.push_back(*v.tensor);
        } else if (!v.runtime) {
          charge_params(v, op);
        }
      }
    }
    op.output_bytes.clear();
    Json shapes = Json::array();
    Json sequence_shapes = Json::array();
    for (int i = 0; i < node.output_size(); ++i) sequence_shapes.push_back(nullptr);
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& name = node.output(i);
      if (name.empty()) {
        cost_in.out.emplace_back();
        op.output_bytes.push_back(0);
        shapes.push_back(nullptr);
        continue;
      }
      const Value& v = values_.at(name);
      std::optional<TensorInfo> info = known_tensor(v.type);
      if (!info && v.sequence && error.empty()) {
        // A sequence: its bytes are its tensors'; output_shapes has null, sequence_shapes them.
        const int64_t bytes =
            sequence_bytes(*v.sequence, node_label(node, index) + ": output '" + name + "'");
        cost_in.written_bytes += static_cast<double>(bytes);
        op.output_bytes.push_back(bytes);
        shapes.push_back(nullptr);
        Json elements = Json::array();
        for (const TensorInfo& e : v.sequence->elements) elements.push_back(e.dims);
        sequence_shapes[static_cast<size_t>(i)] = std::move(elements);
        cost_in.out.emplace_back();
        continue;
      }
      if (!info) {
        fail(node_label(node, index) + ": output '" + name +
             "': " + describe_unknown(v.type, error));
      }
      const int64_t bytes =
          tensor_bytes(*info, node_label(node, index) + ": output '" + name + "'");
      cost_in.written_bytes += static_cast<double>(bytes);
      op.output_bytes.push_back(bytes);
      shapes.push_back(info->dims);
      cost_in.out.push_back(std::move(info));
    }
    if (op.output_bytes.empty()) op.output_bytes.push_back(0);
    CostEstimate cost = estimate_cost(cost_in);
    if (!cost.has_formula) ++uncosted_types_[node.op_type()];
    op.flops = cost.flops;
    op.bytes_accessed = cost.bytes_accessed.value_or(cost_in.read_bytes + cost_in.written_bytes);
    op.extra = Json::object({{"output_shapes", std::move(shapes)}});
    if (std::any_of(sequence_shapes.begin(), sequence_shapes.end(),
                    [](const Json& j) { return !j.is_null(); })) {
      op.extra["sequence_shapes"] = std::move(sequence_shapes);
    }
    if (std::string ort = onnxruntime_name(node, index); ort != op.name) {
      op.extra["onnxruntime_name"] = std::move(ort);
    }
    if (const std::string& function = origins_[static_cast<size_t>(index)].function;
        !function.empty()) {
      op.extra["onnx_function"] = function;
    }
    OpId id = builder.add_op(std::move(op));
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      Value& v = values_[node.output(i)];
      v.runtime = true;
      v.tensor = TensorRef{id, static_cast<uint32_t>(i)};
    }
  }

  void finish_warnings() {
    if (!uncosted_types_.empty()) {
      std::string list;
      int ops = 0;
      for (const auto& [type, count] : uncosted_types_) {
        list += (list.empty() ? "" : ", ") + type + " (" + std::to_string(count) + ")";
        ops += count;
      }
      warnings_.push_back(path_ + ": no cost formula for op type" +
                          (uncosted_types_.size() > 1 ? "s " : " ") + list +
                          ": costed by bytes accessed only (" + std::to_string(ops) +
                          (ops > 1 ? " ops)" : " op)"));
    }
    int64_t unused_bytes = 0;
    std::string unused;
    int unused_count = 0;
    for (const Param& p : params_) {
      if (p.charged) continue;
      unused_bytes += p.bytes;
      if (++unused_count <= 3) unused += (unused.empty() ? "" : ", ") + p.name;
    }
    if (unused_count > 0) {
      warnings_.push_back(path_ + ": " + std::to_string(unused_count) + " weight" +
                          (unused_count > 1 ? "s" : "") + " (" + std::to_string(unused_bytes) +
                          " bytes) feed no op and are not counted: " + unused +
                          (unused_count > 3 ? ", ..." : ""));
    }
    for (const auto& [name, value] : options_.dims) {
      if (used_dims_.count(name) == 0) {
        warnings_.push_back(path_ + ": --dim " + name + "=" + std::to_string(value) +
                            ": no input dimension has this name");
      }
    }
    if (has_subgraphs_) {
      warnings_.push_back(path_ +
                          ": control-flow ops (If, Loop, Scan) are costed as single ops; their "
                          "bodies are not expanded");
    }
  }

  std::string path_;
  const ImportOptions& options_;
  ox::ModelProto model_;
  std::unordered_map<std::string, int> opsets_;
  std::vector<int> topo_order_;
  std::vector<NodeOrigin> origins_;  // [node]: where the main graph's node comes from (functions)
  std::vector<int> ort_numbers_;     // [node]: onnxruntime's number for it, -1 if inlined
  std::unordered_map<std::string, std::vector<Use>> uses_;
  std::unordered_map<int, std::vector<std::string>> implicit_inputs_;  // subgraphs' outer reads
  std::unordered_map<std::string, Value> values_;
  std::unordered_map<std::string, ox::TypeProto> declared_;
  std::vector<Param> params_;
  std::vector<std::pair<std::string, int64_t>> small_integer_initializers_;  // name, bytes
  std::vector<std::string> data_inputs_;
  std::set<std::string> used_dims_;
  std::unordered_set<std::string> used_names_;
  std::map<std::string, int> uncosted_types_;
  int64_t sequence_tensors_ = 0;  // the tensors of every sequence value so far
  bool has_subgraphs_ = false;
  std::vector<std::string> warnings_;

  // What ONNX's per-node inference reads.
  std::unordered_map<std::string, ox::TypeProto*> types_;
  std::unordered_map<std::string, const ox::TensorProto*> data_;
  std::unordered_map<std::string, const ox::SparseTensorProto*> sparse_data_;
  ox::shape_inference::ModelLocalFunctionsMap local_functions_;
  std::unique_ptr<ox::shape_inference::SymbolTableImpl> symbol_table_;
  std::unique_ptr<ox::shape_inference::GraphInferenceContext> graph_context_;
};

}  // namespace

LoadedGraph read_onnx_file(const std::string& path, const ImportOptions& options) {
  LoadedGraph loaded = OnnxImporter(path, options).run();
  if (options.training.value_or(false)) loaded.graph = expand_training(loaded.graph);
  return loaded;
}

}  // namespace dplace
