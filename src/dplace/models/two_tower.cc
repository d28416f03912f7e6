// two_tower: input -> two independent stacks of `layers` dense layers -> concat -> head.
// Forward only, or forward + backward + update (expand_training) for training, at a size that
// runs in microseconds of simulation; the smoke-test model of the demo and the CLI tests.
#include <fmt/format.h>

#include "dplace/core/error.h"
#include "dplace/models/builtin_models.h"
#include "dplace/models/net.h"

namespace dplace {
namespace {

Graph build_two_tower(const ModelOptions& options) {
  const models::Sizes s =
      models::resolve_sizes("two_tower", options, {.batch = 64, .layers = 4, .hidden = 4096});
  models::check_max("two_tower", "--layers", s.layers, 10000);
  const int batch = s.batch;
  const int hidden = s.hidden;
  const int layers = s.layers;
  // two_tower builds its ops directly, not through Net, so it checks the 2^50 limit itself: its
  // largest tensor is the head's concat of two activations, its largest parameters a layer's.
  models::check_bytes("two_tower", "tensor", "head/concat", 2 * 4.0 * batch * hidden, "tensor");
  models::check_bytes("two_tower", "parameters", "tower0/layer0/matmul", 4.0 * hidden * hidden,
                      "op");
  GraphBuilder b("two_tower", "model 'two_tower'");
  const int64_t act_bytes = int64_t{4} * batch * hidden;
  const int64_t w_bytes = int64_t{4} * hidden * hidden;
  const double mm_flops = 2.0 * batch * hidden * hidden;
  const OpId input = b.add_op(
      {.name = "input", .type = "Input", .output_bytes = {act_bytes}, .phase = Phase::kForward});
  OpId tops[2];
  for (int t = 0; t < 2; ++t) {
    OpId prev = input;
    for (int l = 0; l < layers; ++l) {
      const std::string base = fmt::format("tower{}/layer{}", t, l);
      const OpId mm = b.add_op({.name = base + "/matmul",
                                .type = "MatMul",
                                .inputs = {{prev, 0}},
                                .output_bytes = {act_bytes},
                                .flops = mm_flops,
                                .param_bytes = w_bytes,
                                .colocate = options.inference ? "" : base,
                                .phase = Phase::kForward});
      prev = b.add_op({.name = base + "/relu",
                       .type = "Relu",
                       .inputs = {{mm, 0}},
                       .output_bytes = {act_bytes},
                       .flops = double(batch) * hidden,
                       .colocate = options.inference ? "" : base,
                       .phase = Phase::kForward});
    }
    tops[t] = prev;
  }
  const OpId concat = b.add_op({.name = "head/concat",
                                .type = "Concat",
                                .inputs = {{tops[0], 0}, {tops[1], 0}},
                                .output_bytes = {2 * act_bytes},
                                .phase = Phase::kForward});
  b.add_op({.name = "head/matmul",
            .type = "MatMul",
            .inputs = {{concat, 0}},
            .output_bytes = {int64_t{4} * batch * 1000},
            .flops = 2.0 * batch * 2 * hidden * 1000,
            .param_bytes = int64_t{4} * 2 * hidden * 1000,
            .phase = Phase::kForward});
  return models::finish(std::move(b).build(), options);
}

}  // namespace

ModelEntry two_tower_model() {
  ModelEntry e;
  e.name = "two_tower";
  e.description = "two independent dense towers joined by a head (batch 64, hidden 4096, 4 layers)";
  e.build = build_two_tower;
  return e;
}

}  // namespace dplace
