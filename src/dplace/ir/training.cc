#include "dplace/ir/training.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dplace/core/error.h"

namespace dplace {
namespace {

// What a gradient formula reads from the forward pass, by op-type family (TensorFlow and ONNX
// spellings). Types not listed are kDefault.
enum class GradFamily : uint8_t {
  kNone,           // not differentiable: cuts the gradient
  kStructural,     // gradient routes or sums the upstream gradient: reads nothing, no flops
  kLinear,         // linear in each data input: reads the other operands (weights, masks)
  kOutputs,        // gradient is a function of the op's outputs (y = relu(x): dy * (y > 0))
  kInputsOutputs,  // reads both (MaxPool: where the maximum was)
  kDefault,        // reads all inputs
};

GradFamily grad_family(const std::string& type) {
  static const std::unordered_map<std::string, GradFamily> kTable = [] {
    std::unordered_map<std::string, GradFamily> t;
    for (const char* s : {"Shape",
                          "ShapeN",
                          "Size",
                          "Rank",
                          "ArgMax",
                          "ArgMin",
                          "Equal",
                          "NotEqual",
                          "Less",
                          "LessEqual",
                          "Greater",
                          "GreaterEqual",
                          "LogicalAnd",
                          "LogicalOr",
                          "LogicalNot",
                          "And",
                          "Or",
                          "Not",
                          "NonZero",
                          "Floor",
                          "Ceil",
                          "Round",
                          "Sign",
                          "ZerosLike",
                          "OnesLike",
                          "StopGradient",
                          "Fill",
                          "Zeros",
                          "Ones",
                          "RandomUniform",
                          "RandomNormal",
                          "TruncatedNormal",
                          "RandomUniformLike",
                          "RandomNormalLike",
                          "Range",
                          "Const",
                          "Constant",
                          "ConstantOfShape",
                          "NoOp",
                          "Assert",
                          "OneHot",
                          "TopKIndices",
                          "IsNaN",
                          "IsInf"}) {
      t.emplace(s, GradFamily::kNone);
    }
    for (const char* s :
         {"Identity",       "Reshape",   "Squeeze",      "Unsqueeze", "ExpandDims",
          "Flatten",        "Transpose", "Concat",       "ConcatV2",  "Split",
          "SplitV",         "Slice",     "StridedSlice", "Pack",      "Unpack",
          "Stack",          "Unstack",   "Pad",          "Add",       "AddV2",
          "AddN",           "Sum",       "Sub",          "Neg",       "BiasAdd",
          "Tile",           "Expand",    "Cast",         "ReduceSum", "Dropout",
          "Gather",         "GatherV2",  "GatherND",     "GatherNd",  "ResourceGather",
          "EmbeddingLookup"}) {
      t.emplace(s, GradFamily::kStructural);
    }
    for (const char* s :
         {"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Gemm", "Einsum", "Conv",
          "Conv2D", "Conv3D", "DepthwiseConv2dNative", "ConvTranspose", "Conv2DTranspose", "Mul",
          "AvgPool", "AveragePool", "AvgPool3D", "GlobalAveragePool", "Mean", "ReduceMean"}) {
      t.emplace(s, GradFamily::kLinear);
    }
    for (const char* s : {"Relu", "Relu6", "Elu", "Selu", "Sigmoid", "Tanh", "Softmax",
                          "LogSoftmax", "Exp", "Sqrt", "Rsqrt", "Reciprocal",
                          "SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits"}) {
      t.emplace(s, GradFamily::kOutputs);
    }
    for (const char* s : {"MaxPool", "MaxPoolV2", "MaxPool3D", "GlobalMaxPool"}) {
      t.emplace(s, GradFamily::kInputsOutputs);
    }
    return t;
  }();
  auto it = kTable.find(type);
  return it == kTable.end() ? GradFamily::kDefault : it->second;
}

// Lookups whose weight gradient is sparse (the gathered rows only).
bool is_sparse_lookup(const std::string& type) {
  return type == "Gather" || type == "GatherV2" || type == "ResourceGather" ||
         type == "EmbeddingLookup" || type == "GatherND" || type == "GatherNd";
}

// TensorFlow's names for the ops a gradient becomes, so per-type efficiencies still apply.
std::string grad_type(const std::string& type, bool weight) {
  if (type == "MatMul" || type == "BatchMatMul" || type == "BatchMatMulV2" ||
      type == "BatchMatMulV3" || type == "Gemm" || type == "Einsum") {
    return type;
  }
  if (type == "Conv2D" || type == "Conv") {
    return weight ? "Conv2DBackpropFilter" : "Conv2DBackpropInput";
  }
  if (type == "DepthwiseConv2dNative") {
    return weight ? "DepthwiseConv2dNativeBackpropFilter" : "DepthwiseConv2dNativeBackpropInput";
  }
  if (type.empty()) return "Grad";
  return type + "Grad";
}

struct OptimizerSpec {
  const char* type;
  double flops_per_param;
};

OptimizerSpec optimizer_spec(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgd:
      return {"ApplyGradientDescent", 2};
    case Optimizer::kMomentum:
      return {"ApplyMomentum", 4};
    case Optimizer::kAdam:
      return {"ApplyAdam", 12};
  }
  return {"ApplyAdam", 12};
}

constexpr double kBytesPerElement = 4;  // float32 tensors

// Position of `t` in `list`, or -1.
int index_of(const std::vector<TensorRef>& list, TensorRef t) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == t) return static_cast<int>(i);
  }
  return -1;
}

void push_unique(std::vector<TensorRef>& list, TensorRef t) {
  if (index_of(list, t) < 0) list.push_back(t);
}

// A prefix P such that no op name of the graph starts with "P/".
std::string free_prefix(const Graph& g, const std::string& base) {
  for (int k = 0;; ++k) {
    const std::string p = (k == 0 ? base : fmt::format("{}_{}", base, k)) + "/";
    bool used = false;
    for (const Op& op : g.ops()) {
      if (op.name.starts_with(p)) {
        used = true;
        break;
      }
    }
    if (!used) return p;
  }
}

// Per forward op: which of its inputs get gradients and where they land.
struct GradInfo {
  std::vector<TensorRef> data_req;   // distinct data inputs that require grad (forward refs)
  std::vector<TensorRef> weight_in;  // distinct weight inputs (outputs of parameter ops)
  OpId grad_input;                   // output i: gradient of data_req[i]
  OpId grad_weight;                  // outputs: [own params], then weight_in
  uint32_t weight_in_offset = 0;     // output index of weight_in[0] in grad_weight
};

}  // namespace

int optimizer_slots(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgd:
      return 0;
    case Optimizer::kMomentum:
      return 1;
    case Optimizer::kAdam:
      return 2;
  }
  return 2;
}

std::string_view optimizer_name(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kMomentum:
      return "momentum";
    case Optimizer::kAdam:
      return "adam";
  }
  return "adam";
}

Graph expand_training(const Graph& forward, const TrainingOptions& options) {
  const size_t n = forward.num_ops();
  for (const Op& op : forward.ops()) {
    if (op.phase == Phase::kBackward || op.phase == Phase::kUpdate) {
      throw GraphError(fmt::format(
          "graph '{}': op '{}' already has phase '{}'; the graph is a training graph already",
          forward.name(), op.name, phase_name(op.phase)));
    }
  }

  // Which ops are parameter ops, require grad, and receive a gradient.
  std::vector<uint8_t> param_op(n, 0), requires_grad(n, 0), receives(n, 0);
  std::vector<GradFamily> family(n);
  for (OpId id : forward.topo_order()) {
    const Op& op = forward.op(id);
    const uint32_t i = id.value();
    family[i] = grad_family(op.type);
    param_op[i] = op.param_bytes > 0 && op.inputs.empty();
    if (family[i] == GradFamily::kNone) continue;
    bool req = op.param_bytes > 0;
    for (const TensorRef& in : op.inputs) req = req || requires_grad[in.op.value()];
    requires_grad[i] = req;
  }
  const auto topo = forward.topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const uint32_t i = it->value();
    if (!requires_grad[i]) continue;
    const auto succ = forward.successors(*it);
    bool r = succ.empty();  // a sink is a loss
    for (OpId s : succ) r = r || receives[s.value()];
    receives[i] = r;
  }

  // Names and colocation groups.
  const std::string grad_prefix = free_prefix(forward, "grad");
  const std::string update_prefix = free_prefix(forward, "update");
  std::unordered_set<std::string> colocate_names;
  for (const Op& op : forward.ops()) {
    if (!op.colocate.empty()) colocate_names.insert(op.colocate);
  }

  GraphBuilder b(forward.name(), fmt::format("training graph of '{}'", forward.name()));
  std::vector<std::string> group(n);
  for (size_t i = 0; i < n; ++i) {
    Op op = forward.ops()[i];
    if (op.phase == Phase::kUnspecified) op.phase = Phase::kForward;
    if (receives[i]) {
      if (op.colocate.empty()) {
        std::string name = op.name;
        for (int k = 0; colocate_names.count(name) > 0; ++k) {
          name = k == 0 ? op.name + "/colocate" : fmt::format("{}/colocate{}", op.name, k);
        }
        op.colocate = name;
      }
      group[i] = op.colocate;
    }
    b.add_op(std::move(op));
  }

  auto derived = [&](OpId fid, std::string name, std::string type, Phase phase) {
    const Op& f = forward.op(fid);
    Op op;
    op.name = std::move(name);
    op.type = std::move(type);
    op.colocate = group[fid.value()];
    op.devices = f.devices;
    op.phase = phase;
    op.output_bytes.clear();
    return op;
  };
  auto elements = [](double bytes) { return bytes / kBytesPerElement; };

  std::vector<GradInfo> info(n);
  struct PendingUpdate {
    OpId forward_op;
    std::vector<TensorRef> grads;  // in the new graph
  };
  std::vector<PendingUpdate> updates;
  const bool add_n = options.aggregation == GradientAggregation::kAddN;

  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const OpId fid = *it;
    const uint32_t i = fid.value();
    if (!receives[i]) continue;
    const Op& f = forward.op(fid);
    GradInfo& gi = info[i];
    for (const TensorRef& in : f.inputs) {
      const uint32_t p = in.op.value();
      if (!requires_grad[p]) continue;
      push_unique(param_op[p] ? gi.weight_in : gi.data_req, in);
    }

    // Upstream gradient of each output: the sum of the consumers' contributions.
    std::vector<TensorRef> upstream;
    const bool sink = forward.successors(fid).empty();
    for (uint32_t k = 0; k < forward.num_outputs(fid); ++k) {
      const TensorRef t{fid, k};
      if (sink) {
        upstream.push_back(t);  // the seed: a loss reads its own value
        continue;
      }
      std::vector<OpId> cons(forward.consumers(t).begin(), forward.consumers(t).end());
      std::erase_if(cons, [&](OpId c) { return !receives[c.value()]; });
      // Backward order: the consumer that runs last in the forward pass contributes first.
      std::sort(cons.begin(), cons.end(),
                [&](OpId a, OpId c) { return forward.topo_rank(a) > forward.topo_rank(c); });
      std::vector<TensorRef> parts;
      for (OpId c : cons) {
        const GradInfo& ci = info[c.value()];
        const int d = index_of(ci.data_req, t);
        if (d >= 0) parts.push_back({ci.grad_input, static_cast<uint32_t>(d)});
        const int w = index_of(ci.weight_in, t);
        if (w >= 0) {
          parts.push_back({ci.grad_weight, ci.weight_in_offset + static_cast<uint32_t>(w)});
        }
      }
      if (parts.empty()) continue;
      const int64_t full = forward.tensor_bytes(t);
      auto bytes_of = [&](TensorRef r) { return b.mutable_op(r.op).output_bytes[r.output]; };
      if (parts.size() == 1) {
        upstream.push_back(parts[0]);
      } else if (add_n) {
        int64_t sum = 0;
        for (const TensorRef& p : parts) sum += bytes_of(p);
        Op agg = derived(fid, fmt::format("{}{}/sum{}", grad_prefix, f.name, k), "AddN",
                         Phase::kBackward);
        agg.inputs = parts;
        agg.output_bytes = {std::min(full, sum)};
        agg.flops = elements(static_cast<double>(std::min(full, sum))) * (parts.size() - 1);
        upstream.push_back({b.add_op(std::move(agg)), 0});
      } else {
        TensorRef acc = parts[0];
        for (size_t j = 1; j < parts.size(); ++j) {
          const int64_t bytes = std::min(full, bytes_of(acc) + bytes_of(parts[j]));
          Op agg = derived(fid, fmt::format("{}{}/sum{}_{}", grad_prefix, f.name, k, j), "AddV2",
                           Phase::kBackward);
          agg.inputs = {acc, parts[j]};
          agg.output_bytes = {bytes};
          agg.flops = elements(static_cast<double>(bytes));
          acc = {b.add_op(std::move(agg)), 0};
        }
        upstream.push_back(acc);
      }
    }

    if (param_op[i]) {
      updates.push_back({fid, upstream});
      continue;
    }

    const GradFamily fam = family[i];
    const bool structural = fam == GradFamily::kStructural;
    const bool no_work = f.flops == 0 && forward.bytes_accessed(fid) == 0;
    const bool has_weights = f.param_bytes > 0 || !gi.weight_in.empty();
    const bool sparse = is_sparse_lookup(f.type);
    int64_t forward_out_bytes = 0;
    for (int64_t x : f.output_bytes) forward_out_bytes += x;
    auto finish = [&](Op& op) {
      std::vector<TensorRef> unique;
      for (const TensorRef& t : op.inputs) push_unique(unique, t);
      op.inputs = std::move(unique);
      op.temp_bytes = f.temp_bytes;
      if (no_work) op.bytes_accessed = 0;
      if (!structural && !no_work) op.time_s = f.time_s;
    };

    if (!gi.data_req.empty()) {
      Op g = derived(fid, fmt::format("{}{}/input", grad_prefix, f.name), grad_type(f.type, false),
                     Phase::kBackward);
      g.inputs = upstream;
      switch (fam) {
        case GradFamily::kNone:
        case GradFamily::kStructural:
          break;
        case GradFamily::kLinear: {
          // Each operand's gradient reads the other operands: every input but the one being
          // differentiated, unless several are (a.b) or one is read twice (x*x).
          bool product = gi.data_req.size() >= 2;
          for (size_t a = 0; a < f.inputs.size(); ++a) {
            for (size_t c = a + 1; c < f.inputs.size(); ++c) {
              product = product || f.inputs[a] == f.inputs[c];
            }
          }
          for (const TensorRef& in : f.inputs) {
            if (product || index_of(gi.data_req, in) < 0) g.inputs.push_back(in);
          }
          break;
        }
        case GradFamily::kOutputs:
          for (uint32_t k = 0; k < f.output_bytes.size(); ++k) g.inputs.push_back({fid, k});
          break;
        case GradFamily::kInputsOutputs:
          for (const TensorRef& in : f.inputs) g.inputs.push_back(in);
          for (uint32_t k = 0; k < f.output_bytes.size(); ++k) g.inputs.push_back({fid, k});
          break;
        case GradFamily::kDefault:
          for (const TensorRef& in : f.inputs) g.inputs.push_back(in);
          break;
      }
      for (const TensorRef& d : gi.data_req) g.output_bytes.push_back(forward.tensor_bytes(d));
      if (!structural) {
        g.flops = has_weights ? f.flops : f.flops * static_cast<double>(gi.data_req.size());
      }
      finish(g);
      gi.grad_input = b.add_op(std::move(g));
    }

    if (has_weights) {
      Op g = derived(fid, fmt::format("{}{}/weight", grad_prefix, f.name), grad_type(f.type, true),
                     Phase::kBackward);
      g.inputs = upstream;
      if (!structural || sparse) {
        for (const TensorRef& in : f.inputs) {
          if (index_of(gi.weight_in, in) < 0) g.inputs.push_back(in);
        }
      }
      if (f.param_bytes > 0) {
        g.output_bytes.push_back(sparse ? std::min(f.param_bytes, forward_out_bytes)
                                        : f.param_bytes);
      }
      gi.weight_in_offset = static_cast<uint32_t>(g.output_bytes.size());
      for (const TensorRef& w : gi.weight_in) {
        const int64_t full = forward.tensor_bytes(w);
        g.output_bytes.push_back(sparse ? std::min(full, forward_out_bytes) : full);
      }
      g.flops = sparse ? elements(static_cast<double>(forward_out_bytes)) : f.flops;
      finish(g);
      if (sparse) g.time_s.clear();
      gi.grad_weight = b.add_op(std::move(g));
      if (f.param_bytes > 0) updates.push_back({fid, {TensorRef{gi.grad_weight, 0}}});
    }
  }

  const OptimizerSpec spec = optimizer_spec(options.optimizer);
  const int slots = optimizer_slots(options.optimizer);
  for (const PendingUpdate& u : updates) {
    const Op& f = forward.op(u.forward_op);
    Op op = derived(u.forward_op, update_prefix + f.name, spec.type, Phase::kUpdate);
    op.inputs = u.grads;
    op.output_bytes = {0};
    op.param_bytes = slots * f.param_bytes;
    op.flops = spec.flops_per_param * elements(static_cast<double>(f.param_bytes));
    op.bytes_accessed = static_cast<double>(f.param_bytes) * (2.0 * (1 + slots) + 1);
    b.add_op(std::move(op));
  }
  return std::move(b).build();
}

}  // namespace dplace
