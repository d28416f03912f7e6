#include "dplace/models/net.h"

#include <fmt/format.h>

#include <utility>

#include "dplace/core/error.h"
#include "dplace/ir/training.h"

namespace dplace::models {

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Net::Net(std::string model) : model_(model), builder_(model, fmt::format("model '{}'", model)) {}

Net::Scope::Scope(Net& net, std::string_view name) : net_(net), saved_size_(net.scope_.size()) {
  net_.scope_ += name;
  net_.scope_ += '/';
}

Net::Scope::~Scope() { net_.scope_.resize(saved_size_); }

std::string Net::full_name(std::string_view local) const {
  std::string name = scope_;
  name += local;
  return name;
}

std::vector<Tensor> Net::add(OpSpec spec) {
  Op op;
  op.name = full_name(spec.name);
  op.type = std::move(spec.type);
  op.flops = spec.flops;
  // Sizes are checked in double before the int64 products are taken.
  check_bytes(model_, "parameters", op.name,
              static_cast<double>(kElementBytes) * static_cast<double>(spec.params), "op");
  op.param_bytes = kElementBytes * spec.params;
  op.bytes_accessed = spec.bytes_accessed;
  op.phase = Phase::kForward;
  op.inputs.reserve(spec.inputs.size());
  for (const Tensor& t : spec.inputs) op.inputs.push_back(t.ref);
  op.output_bytes.clear();
  for (const Shape& s : spec.outputs) {
    double bytes = kElementBytes;
    for (int64_t d : s) bytes *= static_cast<double>(d);
    check_bytes(model_, "tensor", op.name, bytes, "tensor");
    op.output_bytes.push_back(kElementBytes * num_elements(s));
  }
  const OpId id = builder_.add_op(std::move(op));
  std::vector<Tensor> out;
  out.reserve(spec.outputs.size());
  for (size_t k = 0; k < spec.outputs.size(); ++k) {
    out.push_back({{id, static_cast<uint32_t>(k)}, std::move(spec.outputs[k])});
  }
  return out;
}

Tensor Net::add1(OpSpec spec) {
  DPLACE_CHECK(spec.outputs.size() == 1) << spec.name;
  return add(std::move(spec))[0];
}

Tensor Net::input(std::string_view name, Shape shape) {
  return add1({.name = std::string(name),
               .type = "Input",
               .outputs = {std::move(shape)},
               .bytes_accessed = 0.0});
}

Tensor Net::variable(std::string_view name, Shape shape) {
  const int64_t n = num_elements(shape);
  return add1({.name = std::string(name),
               .type = "VariableV2",
               .outputs = {std::move(shape)},
               .params = n,
               .bytes_accessed = 0.0});
}

Tensor Net::parameter_slice(std::string_view name, int64_t table_rows, Shape shape) {
  const int64_t width = shape.back();
  return add1({.name = std::string(name),
               .type = "Slice",
               .outputs = {std::move(shape)},
               .params = table_rows * width});
}

Tensor Net::elementwise(std::string_view type, std::string_view name, std::vector<Tensor> inputs,
                        double flops_per_element) {
  Shape shape = inputs.at(0).shape;
  const double flops = flops_per_element * static_cast<double>(num_elements(shape));
  return add1({.name = std::string(name),
               .type = std::string(type),
               .inputs = std::move(inputs),
               .outputs = {std::move(shape)},
               .flops = flops});
}

Tensor Net::matmul(std::string_view name, const Tensor& x, const Tensor& w) {
  DPLACE_CHECK(w.shape.size() == 2 && x.shape.back() == w.shape[0]) << name;
  Shape out = x.shape;
  out.back() = w.shape[1];
  const double rows = static_cast<double>(x.elements() / x.shape.back());
  return add1({.name = std::string(name),
               .type = "MatMul",
               .inputs = {x, w},
               .outputs = {std::move(out)},
               .flops = 2.0 * rows * static_cast<double>(w.shape[0]) * w.shape[1]});
}

Tensor Net::dense(std::string_view name, const Tensor& x, int64_t units, bool bias) {
  const int64_t k = x.shape.back();
  Shape out = x.shape;
  out.back() = units;
  const double rows = static_cast<double>(x.elements() / k);
  return add1({.name = std::string(name),
               .type = "MatMul",
               .inputs = {x},
               .outputs = {std::move(out)},
               .flops = 2.0 * rows * static_cast<double>(k) * units + (bias ? rows * units : 0),
               .params = k * units + (bias ? units : 0)});
}

Tensor Net::reshape(std::string_view name, const Tensor& x, Shape shape) {
  DPLACE_CHECK(num_elements(shape) == x.elements()) << name;
  return add1({.name = std::string(name),
               .type = "Reshape",
               .inputs = {x},
               .outputs = {std::move(shape)},
               .bytes_accessed = 0.0});
}

Tensor Net::concat(std::string_view name, const std::vector<Tensor>& xs) {
  Shape shape = xs.at(0).shape;
  shape.back() = 0;
  for (const Tensor& x : xs) shape.back() += x.shape.back();
  return add1(
      {.name = std::string(name), .type = "ConcatV2", .inputs = xs, .outputs = {std::move(shape)}});
}

Tensor Net::embedding(std::string_view name, const Tensor& ids, int64_t rows, int64_t width) {
  Shape shape = ids.shape;
  shape.push_back(width);
  return add1({.name = std::string(name),
               .type = "Gather",
               .inputs = {ids},
               .outputs = {std::move(shape)},
               .params = rows * width});
}

std::vector<Tensor> Net::sparse_xent(std::string_view name, const Tensor& logits,
                                     const Tensor& labels) {
  Shape loss = logits.shape;
  loss.pop_back();
  return add({.name = std::string(name),
              .type = "SparseSoftmaxCrossEntropyWithLogits",
              .inputs = {logits, labels},
              .outputs = {std::move(loss), logits.shape},
              .flops = 6.0 * static_cast<double>(logits.elements())});
}

Tensor Net::mean(std::string_view name, const Tensor& x) {
  return add1({.name = std::string(name),
               .type = "Mean",
               .inputs = {x},
               .outputs = {Shape{1}},
               .flops = static_cast<double>(x.elements())});
}

Tensor Net::layer_norm(std::string_view name, const Tensor& x) {
  return add1({.name = std::string(name),
               .type = "LayerNorm",
               .inputs = {x},
               .outputs = {x.shape},
               .flops = 8.0 * static_cast<double>(x.elements()),
               .params = 2 * x.shape.back()});
}

Graph Net::build() && { return std::move(builder_).build(); }

Sizes resolve_sizes(const std::string& model, const ModelOptions& options,
                    const SizeDefaults& defaults) {
  Sizes sizes;
  auto one = [&](const char* flag, const std::optional<int>& given,
                 const std::optional<int>& fallback, int& out) {
    if (!given) {
      out = fallback.value_or(0);
      return;
    }
    if (!fallback) {
      std::string takes;
      auto add = [&](const char* f, const std::optional<int>& d) {
        if (d) takes += (takes.empty() ? "" : ", ") + std::string(f);
      };
      add("--batch", defaults.batch);
      add("--layers", defaults.layers);
      add("--hidden", defaults.hidden);
      add("--seq", defaults.seq);
      add("--vocab", defaults.vocab);
      throw ConfigError(fmt::format("model '{}': {} is not a size of this model (it takes {})",
                                    model, flag, takes));
    }
    if (*given <= 0) {
      throw ConfigError(
          fmt::format("model '{}': {} must be positive, got {}", model, flag, *given));
    }
    out = *given;
  };
  one("--batch", options.batch, defaults.batch, sizes.batch);
  one("--layers", options.layers, defaults.layers, sizes.layers);
  one("--hidden", options.hidden, defaults.hidden, sizes.hidden);
  one("--seq", options.seq, defaults.seq, sizes.seq);
  one("--vocab", options.vocab, defaults.vocab, sizes.vocab);
  // Keeps the models' integer parameter counts (a few products of the widths) far from
  // overflowing; no model comes near a width of a million.
  check_max(model, "--hidden", sizes.hidden, 1 << 20);
  return sizes;
}

void check_max(const std::string& model, std::string_view what, int value, int max) {
  if (value > max) {
    throw ConfigError(fmt::format("model '{}': {} must be <= {}, got {}", model, what, max, value));
  }
}

void check_bytes(const std::string& model, std::string_view what, const std::string& op,
                 double bytes, std::string_view per) {
  constexpr double kMaxBytes = 1125899906842624.0;  // 2^50
  if (bytes > kMaxBytes) {
    throw ConfigError(fmt::format(
        "model '{}': {} of op '{}' would take {:.3g} bytes, more than the limit of {:.3g} (2^50) "
        "on one {}; the sizes are too large",
        model, what, op, bytes, kMaxBytes, per));
  }
}

Graph finish(Graph forward, const ModelOptions& options) {
  if (options.inference) return forward;
  return expand_training(forward, TrainingOptions{});
}

}  // namespace dplace::models
