// expand_training: turns a forward graph into the graph of one training step (forward, backward
// and optimizer update ops), shaped like the gradient graph TensorFlow builds with
// tf.gradients(colocate_gradients_with_ops=True) followed by an optimizer's apply ops.
//
// Terms used below:
//  * a forward op f "has params" when f.param_bytes > 0. A "parameter op" has params and no
//    inputs (a variable, e.g. type VariableV2): its output tensors are the weights its consumers
//    read; for those consumers such an input is a "weight input", every other input a "data input".
//  * a tensor "requires grad" when its producer has params, or has a data or weight input whose
//    tensor requires grad, unless the producer's type is non-differentiable (Shape, ArgMax, Equal,
//    ..., see the table in training.cc). Ops whose outputs reach no sink through differentiable
//    ops receive no gradient. Every sink (op without consumers) is a loss: its gradient op reads
//    the sink's own outputs in place of an upstream gradient (the seed).
//
// For every forward op f that receives a gradient:
//  * grad/<f>/input (phase backward), when some data input requires grad: one output per distinct
//    such input tensor, of that tensor's size. Inputs: the upstream gradient of each output of f
//    that has one, plus the forward tensors the gradient formula reads (by op-type family: weight
//    inputs for linear ops such as MatMul and Conv2D, f's outputs for Relu/Sigmoid/Tanh/Softmax,
//    inputs and outputs for MaxPool, nothing for Add/Concat/Reshape..., all inputs otherwise).
//    These reads are what keeps activations alive from the forward to the backward pass.
//    Flops: f.flops, times the number of differentiated data inputs when f has neither params nor
//    weight inputs (MatMul of two activations costs one forward per operand); 0 for structural
//    ops (Add, Concat, Reshape, Split, ...). An op without any work keeps a gradient without work.
//  * grad/<f>/weight, when f has params or weight inputs: output 0 is the gradient of f's own
//    params (f.param_bytes bytes) when it has some, then one output per weight input tensor.
//    Reads the upstream gradients and f's data inputs (x for dW = x^T dy); flops = f.flops.
//    For embedding lookups (Gather, ResourceGather, EmbeddingLookup, ...) the weight gradient is
//    sparse, as TensorFlow's IndexedSlices: its size is the gathered rows (f's output bytes).
//  * when a tensor of f feeds several differentiable consumers, their gradient contributions are
//    summed before f's gradient ops read them: one AddN over all of them (aggregation kAddN,
//    TensorFlow's default), or a running sum of AddV2 ops in the order the backward pass produces
//    the contributions (kAccumulate: TensorFlow's accumulate aggregation, PyTorch's autograd).
//    Named grad/<f>/sum<k> (kAddN) or grad/<f>/sum<k>_<i> (kAccumulate) for output k.
//  * update/<f> (phase update), when f has params: the optimizer's apply op (ApplyAdam,
//    ApplyMomentum, ApplyGradientDescent) reading the gradient of f's params. Its param_bytes are
//    the optimizer slots (Adam: 2 x f.param_bytes, Momentum: 1x, SGD: 0), so a training graph's
//    total param_bytes is weights + slots; the gradient itself is a tensor, alive from the op that
//    makes it to the update that consumes it. Flops per 4 parameter bytes (one float): SGD 2,
//    Momentum 4, Adam 12; bytes_accessed: weights, slots and gradient read, weights and slots
//    written.
// All ops generated for f are colocated with f: they take f's `colocate` name, or, when f has
// none, f gets one (its own name, suffixed if that string is already a colocation name), so a
// placement that moves f moves its gradient and update ops with it (TensorFlow's default). They
// also copy f's `devices` restriction and `temp_bytes`; measured `time_s` overrides of f are copied
// onto its gradient ops (each costs about one forward) but not onto sums and updates.
//
// The result keeps every forward op first, in the input order (phase set to forward where it was
// unspecified), then the backward ops in reverse topological order of their forward ops, then the
// update ops. Names use the prefixes "grad/" and "update/" (or "grad_1/", "update_1/", ... when a
// forward op's name already starts with the plain prefix).
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <string_view>

#include "dplace/ir/graph.h"

namespace dplace {

enum class Optimizer : uint8_t { kSgd, kMomentum, kAdam };
enum class GradientAggregation : uint8_t { kAddN, kAccumulate };

struct TrainingOptions {
  Optimizer optimizer = Optimizer::kAdam;  // Default: Adam (two slots per weight).
  // Default: kAccumulate. See docs/models.md for why the built-in models use it.
  GradientAggregation aggregation = GradientAggregation::kAccumulate;
};

// Optimizer state per weight, in multiples of the weights' bytes: SGD 0, Momentum 1, Adam 2.
int optimizer_slots(Optimizer optimizer);
// "sgd", "momentum", "adam".
std::string_view optimizer_name(Optimizer optimizer);

// REQUIRES nothing of the graph beyond GraphBuilder's invariants. Throws GraphError naming the op
// when an op already has phase backward or update (the graph is a training graph already).
Graph expand_training(const Graph& forward, const TrainingOptions& options = {});

}  // namespace dplace
