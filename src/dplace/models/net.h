// Internal helpers shared by the built-in model generators (not part of the public contract).
//
// Net wraps GraphBuilder with tensor shapes (every tensor is float32 or int32: 4 bytes per
// element), scoped op names ("encoder/l0/t3/matmul") and a few layer helpers. FLOP conventions
// (a multiply-add counts 2): MatMul/Conv 2 per MAC; elementwise arithmetic 1 per element;
// sigmoid, tanh, exp 4; softmax 5; GELU 8; batch and layer normalisation 8 per element; pooling
// one per window element. Parameters are float32; a layer's params live on its op (param_bytes)
// unless they are shared by several ops, in which case they live on a VariableV2 op that the
// readers take as an input.
//
// Thread safety: a Net is a single-threaded builder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dplace/ir/graph.h"
#include "dplace/models/registry.h"

namespace dplace::models {

using Shape = std::vector<int64_t>;

inline constexpr int64_t kElementBytes = 4;

int64_t num_elements(const Shape& shape);

struct Tensor {
  TensorRef ref;
  Shape shape;
  int64_t elements() const { return num_elements(shape); }
  int64_t bytes() const { return kElementBytes * elements(); }
};

struct OpSpec {
  std::string name;  // local name; the current scope is prepended
  std::string type;
  std::vector<Tensor> inputs;
  std::vector<Shape> outputs;
  double flops = 0;
  int64_t params = 0;  // float parameters held by the op
  std::optional<double> bytes_accessed;
};

class Net {
 public:
  // `model` names the model in error messages.
  explicit Net(std::string model);

  // RAII scope: names created while it lives are prefixed with "<name>/".
  class Scope {
   public:
    Scope(Net& net, std::string_view name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Net& net_;
    size_t saved_size_;
  };

  std::string full_name(std::string_view local) const;

  // Adds an op with phase forward. Throws ConfigError when a tensor would exceed 2^50 bytes.
  std::vector<Tensor> add(OpSpec spec);
  Tensor add1(OpSpec spec);

  // Graph inputs (type "Input", no cost: the batch is already on the device): ids, images, labels.
  Tensor input(std::string_view name, Shape shape);
  // A weight shared by several ops (type "VariableV2"): param_bytes and output = the weights.
  Tensor variable(std::string_view name, Shape shape);
  // A weight slice read by one op with no other input (e.g. learned position embeddings).
  Tensor parameter_slice(std::string_view name, int64_t table_rows, Shape shape);
  // Elementwise op; output shape = the first input's shape.
  Tensor elementwise(std::string_view type, std::string_view name, std::vector<Tensor> inputs,
                     double flops_per_element);
  // x[..., k] * w[k, n] where w is a tensor (usually a variable): output x[..., n].
  Tensor matmul(std::string_view name, const Tensor& x, const Tensor& w);
  // Dense layer with its own params (k*n, plus n with bias): one MatMul op.
  Tensor dense(std::string_view name, const Tensor& x, int64_t units, bool bias);
  // Zero-cost reshape (no flops, no memory traffic).
  Tensor reshape(std::string_view name, const Tensor& x, Shape shape);
  // Concatenation along the last axis.
  Tensor concat(std::string_view name, const std::vector<Tensor>& xs);
  // Embedding lookup with its own table of rows x width: ids[...] -> [..., width].
  Tensor embedding(std::string_view name, const Tensor& ids, int64_t rows, int64_t width);
  // Sparse softmax cross-entropy: outputs [0] loss per row, [1] backprop (softmax - onehot).
  std::vector<Tensor> sparse_xent(std::string_view name, const Tensor& logits,
                                  const Tensor& labels);
  // Mean over every element to a scalar.
  Tensor mean(std::string_view name, const Tensor& x);
  // LayerNorm over the last axis with gamma and beta.
  Tensor layer_norm(std::string_view name, const Tensor& x);

  size_t num_ops() const { return builder_.num_ops(); }
  Graph build() &&;

 private:
  std::string model_;
  std::string scope_;
  GraphBuilder builder_;
};

// Size options of one model: which ModelOptions fields it takes and their defaults.
struct SizeDefaults {
  std::optional<int> batch, layers, hidden, seq, vocab;
};
struct Sizes {
  int batch = 0, layers = 0, hidden = 0, seq = 0, vocab = 0;
};
// Applies the defaults; throws ConfigError naming the model and the option when an option the
// model does not take is given, or a value is not positive.
Sizes resolve_sizes(const std::string& model, const ModelOptions& options,
                    const SizeDefaults& defaults);
// Throws ConfigError "model 'M': --what must be <= max, got v" when value > max.
void check_max(const std::string& model, std::string_view what, int value, int max);
// Throws ConfigError "model 'M': <what> of op 'O' would take B bytes, more than the limit of
// 1.13e+15 (2^50) on one <per>; ..." when bytes > 2^50 (Net::add checks every op's tensors and
// parameters with it; builders that bypass Net call it themselves).
void check_bytes(const std::string& model, std::string_view what, const std::string& op,
                 double bytes, std::string_view per);

// The training graph of `forward` (expand_training with the models' options), or `forward`
// itself for an inference graph.
Graph finish(Graph forward, const ModelOptions& options);

}  // namespace dplace::models
