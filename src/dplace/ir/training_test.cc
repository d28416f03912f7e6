#include "dplace/ir/training.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dplace/core/error.h"

namespace dplace {
namespace {

const Op& op_named(const Graph& g, const std::string& name) {
  const auto id = g.find_op(name);
  EXPECT_TRUE(id.has_value()) << name;
  return g.op(*id);
}

std::vector<std::string> input_names(const Graph& g, const std::string& name) {
  std::vector<std::string> out;
  for (const TensorRef& t : op_named(g, name).inputs) {
    out.push_back(g.op(t.op).name + ":" + std::to_string(t.output));
  }
  return out;
}

// x -> mm1 (1 KiB weights) -> relu -> mm2 (2 KiB weights), mm2 is the loss.
Graph mlp() {
  GraphBuilder b("mlp", "test");
  const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {400}});
  const OpId mm1 = b.add_op({.name = "mm1",
                             .type = "MatMul",
                             .inputs = {{x, 0}},
                             .output_bytes = {800},
                             .flops = 1000,
                             .param_bytes = 1024});
  const OpId relu = b.add_op(
      {.name = "relu", .type = "Relu", .inputs = {{mm1, 0}}, .output_bytes = {800}, .flops = 200});
  b.add_op({.name = "mm2",
            .type = "MatMul",
            .inputs = {{relu, 0}},
            .output_bytes = {40},
            .flops = 3000,
            .param_bytes = 2048});
  return std::move(b).build();
}

TEST(TrainingTest, MlpGetsGradientAndUpdateOpsPerWeightedOp) {
  const Graph g = expand_training(mlp());
  std::vector<std::string> names;
  for (const Op& op : g.ops()) names.push_back(op.name);
  // Forward ops first, then backward in reverse topological order, then updates. mm1's input x
  // needs no gradient, so mm1 has only a weight gradient.
  EXPECT_EQ(names, (std::vector<std::string>{"x", "mm1", "relu", "mm2", "grad/mm2/input",
                                             "grad/mm2/weight", "grad/relu/input",
                                             "grad/mm1/weight", "update/mm2", "update/mm1"}));
  EXPECT_EQ(op_named(g, "mm1").phase, Phase::kForward);
  EXPECT_EQ(op_named(g, "grad/relu/input").phase, Phase::kBackward);
  EXPECT_EQ(op_named(g, "update/mm1").phase, Phase::kUpdate);
  EXPECT_EQ(op_named(g, "update/mm1").type, "ApplyAdam");
  EXPECT_EQ(op_named(g, "grad/relu/input").type, "ReluGrad");
  EXPECT_EQ(op_named(g, "grad/mm2/weight").type, "MatMul");
}

TEST(TrainingTest, BackwardCostsTwiceTheForwardOfWeightedOps) {
  const Graph g = expand_training(mlp());
  double forward = 0, backward = 0;
  for (const Op& op : g.ops()) {
    if (op.phase == Phase::kForward) forward += op.flops;
    if (op.phase == Phase::kBackward) backward += op.flops;
  }
  EXPECT_EQ(forward, 4200);
  // mm2: input + weight grads (2 x 3000); relu: 200; mm1: weight grad only (1000).
  EXPECT_EQ(backward, 7200);
  EXPECT_EQ(op_named(g, "grad/mm2/input").flops, 3000);
  EXPECT_EQ(op_named(g, "grad/mm1/weight").flops, 1000);
}

TEST(TrainingTest, GradientOpsReadTheSavedActivationsTheirFormulaNeeds) {
  const Graph g = expand_training(mlp());
  // The loss seeds its own gradient; dX = dY W^T reads no activation (W is resident).
  EXPECT_EQ(input_names(g, "grad/mm2/input"), (std::vector<std::string>{"mm2:0"}));
  // dW = X^T dY reads the forward input.
  EXPECT_EQ(input_names(g, "grad/mm2/weight"), (std::vector<std::string>{"mm2:0", "relu:0"}));
  // Relu's gradient reads its output.
  EXPECT_EQ(input_names(g, "grad/relu/input"),
            (std::vector<std::string>{"grad/mm2/input:0", "relu:0"}));
  EXPECT_EQ(input_names(g, "grad/mm1/weight"),
            (std::vector<std::string>{"grad/relu/input:0", "x:0"}));
  EXPECT_EQ(input_names(g, "update/mm1"), (std::vector<std::string>{"grad/mm1/weight:0"}));
  EXPECT_EQ(op_named(g, "grad/mm1/weight").output_bytes, (std::vector<int64_t>{1024}));
  EXPECT_EQ(op_named(g, "grad/relu/input").output_bytes, (std::vector<int64_t>{800}));
}

TEST(TrainingTest, GeneratedOpsAreColocatedWithTheirForwardOp) {
  const Graph g = expand_training(mlp());
  for (const char* name : {"grad/mm2/input", "grad/mm2/weight", "update/mm2"}) {
    EXPECT_EQ(g.group_of(*g.find_op(name)), g.group_of(*g.find_op("mm2"))) << name;
  }
  EXPECT_EQ(op_named(g, "mm2").colocate, "mm2");
  EXPECT_EQ(g.group_of(*g.find_op("update/mm1")), g.group_of(*g.find_op("mm1")));
  EXPECT_NE(g.group_of(*g.find_op("mm1")), g.group_of(*g.find_op("mm2")));
  EXPECT_TRUE(op_named(g, "x").colocate.empty());  // nothing generated for the input
  // x, mm1, relu, mm2: four groups.
  EXPECT_EQ(g.num_groups(), 4u);
}

TEST(TrainingTest, ExistingColocationNamesAreKeptAndNotCaptured) {
  GraphBuilder b("g", "test");
  const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {4}});
  const OpId a = b.add_op({.name = "a",
                           .type = "MatMul",
                           .inputs = {{x, 0}},
                           .output_bytes = {4},
                           .flops = 8,
                           .param_bytes = 4});
  b.add_op({.name = "c",
            .type = "MatMul",
            .inputs = {{a, 0}},
            .output_bytes = {4},
            .flops = 8,
            .param_bytes = 4,
            .colocate = "a"});
  const Graph g = expand_training(std::move(b).build());
  EXPECT_EQ(op_named(g, "c").colocate, "a");
  EXPECT_EQ(op_named(g, "update/c").colocate, "a");
  // "a" is already a colocation name, so op a's group gets a fresh one.
  EXPECT_EQ(op_named(g, "a").colocate, "a/colocate");
  EXPECT_NE(g.group_of(*g.find_op("a")), g.group_of(*g.find_op("c")));
}

TEST(TrainingTest, OptimizerSlotsAreParamBytesOfTheUpdateOps) {
  const Graph fwd = mlp();
  EXPECT_EQ(fwd.total_param_bytes(), 3072);
  EXPECT_EQ(expand_training(fwd, {.optimizer = Optimizer::kAdam}).total_param_bytes(), 3 * 3072);
  EXPECT_EQ(expand_training(fwd, {.optimizer = Optimizer::kMomentum}).total_param_bytes(),
            2 * 3072);
  EXPECT_EQ(expand_training(fwd, {.optimizer = Optimizer::kSgd}).total_param_bytes(), 3072);
  const Graph adam = expand_training(fwd);
  const Op& u = op_named(adam, "update/mm2");
  EXPECT_EQ(u.param_bytes, 4096);
  EXPECT_EQ(u.flops, 12.0 * 512);  // 512 floats
  EXPECT_EQ(u.bytes_accessed, 2048.0 * 7);
  EXPECT_EQ(optimizer_name(Optimizer::kMomentum), "momentum");
}

// Variable w read by two MatMuls (an unrolled RNN's shared weights), losses summed.
Graph shared_weight() {
  GraphBuilder b("shared", "test");
  const OpId w =
      b.add_op({.name = "w", .type = "VariableV2", .output_bytes = {64}, .param_bytes = 64});
  const OpId x0 = b.add_op({.name = "x0", .type = "Input", .output_bytes = {32}});
  const OpId x1 = b.add_op({.name = "x1", .type = "Input", .output_bytes = {32}});
  const OpId m0 = b.add_op({.name = "m0",
                            .type = "MatMul",
                            .inputs = {{x0, 0}, {w, 0}},
                            .output_bytes = {32},
                            .flops = 100});
  const OpId m1 = b.add_op({.name = "m1",
                            .type = "MatMul",
                            .inputs = {{m0, 0}, {w, 0}},
                            .output_bytes = {32},
                            .flops = 100});
  const OpId m2 = b.add_op({.name = "m2",
                            .type = "MatMul",
                            .inputs = {{x1, 0}, {w, 0}},
                            .output_bytes = {32},
                            .flops = 100});
  b.add_op({.name = "loss",
            .type = "AddN",
            .inputs = {{m1, 0}, {m2, 0}},
            .output_bytes = {4},
            .flops = 8});
  return std::move(b).build();
}

TEST(TrainingTest, SharedWeightGradientsAreAccumulatedInBackwardOrder) {
  const Graph g = expand_training(shared_weight());
  // Contributions in reverse forward order: m2, m1, m0.
  EXPECT_EQ(input_names(g, "grad/w/sum0_1"),
            (std::vector<std::string>{"grad/m2/weight:0", "grad/m1/weight:0"}));
  EXPECT_EQ(input_names(g, "grad/w/sum0_2"),
            (std::vector<std::string>{"grad/w/sum0_1:0", "grad/m0/weight:0"}));
  EXPECT_EQ(input_names(g, "update/w"), (std::vector<std::string>{"grad/w/sum0_2:0"}));
  EXPECT_EQ(op_named(g, "grad/w/sum0_1").flops, 16);  // 64 bytes = 16 floats
  // The weight is a variable: its consumers' weight gradients read x, not w; their input
  // gradients read w (dX = dY W^T).
  EXPECT_EQ(input_names(g, "grad/m1/weight"),
            (std::vector<std::string>{"grad/loss/input:0", "m0:0"}));
  EXPECT_EQ(input_names(g, "grad/m1/input"),
            (std::vector<std::string>{"grad/loss/input:0", "w:0"}));
  EXPECT_FALSE(g.find_op("grad/m0/input").has_value());  // x0 needs no gradient
  EXPECT_FALSE(g.find_op("grad/w/input").has_value());   // a variable has no gradient op
  EXPECT_EQ(g.total_param_bytes(), 3 * 64);
  for (const char* name : {"grad/w/sum0_1", "grad/w/sum0_2", "update/w"}) {
    EXPECT_EQ(g.group_of(*g.find_op(name)), g.group_of(*g.find_op("w"))) << name;
  }
}

TEST(TrainingTest, AddNAggregationSumsAllContributionsInOneOp) {
  const Graph g = expand_training(shared_weight(), {.aggregation = GradientAggregation::kAddN});
  EXPECT_EQ(input_names(g, "grad/w/sum0"),
            (std::vector<std::string>{"grad/m2/weight:0", "grad/m1/weight:0", "grad/m0/weight:0"}));
  EXPECT_EQ(op_named(g, "grad/w/sum0").type, "AddN");
  EXPECT_EQ(op_named(g, "grad/w/sum0").flops, 2 * 16);
  EXPECT_EQ(input_names(g, "update/w"), (std::vector<std::string>{"grad/w/sum0:0"}));
}

TEST(TrainingTest, StructuralOpsGetFreeGradientsWithOneOutputPerInput) {
  const Graph g = expand_training(shared_weight());
  const Op& loss_grad = op_named(g, "grad/loss/input");
  EXPECT_EQ(loss_grad.flops, 0);
  EXPECT_EQ(loss_grad.output_bytes, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(input_names(g, "grad/loss/input"), (std::vector<std::string>{"loss:0"}));
}

TEST(TrainingTest, MultiOutputOpsReadEveryUpstreamGradient) {
  GraphBuilder b("split", "test");
  const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {16}});
  const OpId mm = b.add_op({.name = "mm",
                            .type = "MatMul",
                            .inputs = {{x, 0}},
                            .output_bytes = {16},
                            .flops = 64,
                            .param_bytes = 64});
  const OpId split = b.add_op(
      {.name = "split", .type = "Split", .inputs = {{mm, 0}}, .output_bytes = {8, 8}, .flops = 0});
  const OpId s0 = b.add_op(
      {.name = "sig", .type = "Sigmoid", .inputs = {{split, 0}}, .output_bytes = {8}, .flops = 2});
  const OpId s1 = b.add_op(
      {.name = "tanh", .type = "Tanh", .inputs = {{split, 1}}, .output_bytes = {8}, .flops = 2});
  b.add_op({.name = "mul",
            .type = "Mul",
            .inputs = {{s0, 0}, {s1, 0}},
            .output_bytes = {8},
            .flops = 2});
  const Graph g = expand_training(std::move(b).build());
  EXPECT_EQ(input_names(g, "grad/split/input"),
            (std::vector<std::string>{"grad/sig/input:0", "grad/tanh/input:0"}));
  EXPECT_EQ(op_named(g, "grad/split/input").output_bytes, (std::vector<int64_t>{16}));
  // Mul of two activations: one product per operand, each reading the other operand.
  EXPECT_EQ(op_named(g, "grad/mul/input").flops, 4);
  EXPECT_EQ(input_names(g, "grad/mul/input"),
            (std::vector<std::string>{"mul:0", "sig:0", "tanh:0"}));
  EXPECT_EQ(input_names(g, "grad/sig/input"),
            (std::vector<std::string>{"grad/mul/input:0", "sig:0"}));
}

TEST(TrainingTest, SquareReadsItsOperand) {
  GraphBuilder b("square", "test");
  const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {16}});
  const OpId mm = b.add_op({.name = "mm",
                            .type = "MatMul",
                            .inputs = {{x, 0}},
                            .output_bytes = {16},
                            .flops = 64,
                            .param_bytes = 64});
  b.add_op({.name = "sq",
            .type = "Mul",
            .inputs = {{mm, 0}, {mm, 0}},
            .output_bytes = {16},
            .flops = 4});
  const Graph g = expand_training(std::move(b).build());
  // d(x*x)/dx = 2x: one gradient output, reading x.
  EXPECT_EQ(op_named(g, "grad/sq/input").output_bytes, (std::vector<int64_t>{16}));
  EXPECT_EQ(input_names(g, "grad/sq/input"), (std::vector<std::string>{"sq:0", "mm:0"}));
  EXPECT_EQ(op_named(g, "grad/sq/input").flops, 4);
}

TEST(TrainingTest, ZeroCostOpsGetZeroCostGradients) {
  GraphBuilder b("reshape", "test");
  const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {16}});
  const OpId mm = b.add_op({.name = "mm",
                            .type = "MatMul",
                            .inputs = {{x, 0}},
                            .output_bytes = {16},
                            .flops = 64,
                            .param_bytes = 64});
  const OpId r = b.add_op({.name = "r",
                           .type = "Reshape",
                           .inputs = {{mm, 0}},
                           .output_bytes = {16},
                           .bytes_accessed = 0.0});
  b.add_op(
      {.name = "loss", .type = "Softmax", .inputs = {{r, 0}}, .output_bytes = {16}, .flops = 20});
  const Graph g = expand_training(std::move(b).build());
  const Op& rg = op_named(g, "grad/r/input");
  EXPECT_EQ(rg.flops, 0);
  EXPECT_EQ(g.bytes_accessed(*g.find_op("grad/r/input")), 0);
  EXPECT_EQ(op_named(g, "grad/loss/input").flops, 20);
}

TEST(TrainingTest, NonDifferentiableOpsCutTheGradient) {
  GraphBuilder b("cut", "test");
  const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {16}});
  const OpId mm = b.add_op({.name = "mm",
                            .type = "MatMul",
                            .inputs = {{x, 0}},
                            .output_bytes = {16},
                            .flops = 64,
                            .param_bytes = 64});
  b.add_op({.name = "argmax", .type = "ArgMax", .inputs = {{mm, 0}}, .output_bytes = {4}});
  const OpId shape =
      b.add_op({.name = "shape", .type = "Shape", .inputs = {{mm, 0}}, .output_bytes = {8}});
  b.add_op({.name = "loss",
            .type = "Relu",
            .inputs = {{mm, 0}, {shape, 0}},
            .output_bytes = {16},
            .flops = 4});
  const Graph g = expand_training(std::move(b).build());
  EXPECT_FALSE(g.find_op("grad/argmax/input").has_value());
  EXPECT_FALSE(g.find_op("grad/shape/input").has_value());
  // mm's gradient comes from the loss alone; the ArgMax sink seeds nothing.
  EXPECT_EQ(input_names(g, "grad/mm/weight"),
            (std::vector<std::string>{"grad/loss/input:0", "x:0"}));
  EXPECT_EQ(op_named(g, "grad/loss/input").output_bytes, (std::vector<int64_t>{16}));
}

TEST(TrainingTest, EmbeddingLookupGradientIsSparse) {
  GraphBuilder b("emb", "test");
  const OpId ids = b.add_op({.name = "ids", .type = "Input", .output_bytes = {40}});
  const OpId emb = b.add_op({.name = "emb",
                             .type = "Gather",
                             .inputs = {{ids, 0}},
                             .output_bytes = {400},
                             .param_bytes = 40000});
  b.add_op(
      {.name = "loss", .type = "Tanh", .inputs = {{emb, 0}}, .output_bytes = {400}, .flops = 100});
  const Graph g = expand_training(std::move(b).build());
  const Op& wg = op_named(g, "grad/emb/weight");
  EXPECT_EQ(wg.type, "GatherGrad");
  EXPECT_EQ(wg.output_bytes, (std::vector<int64_t>{400}));  // the gathered rows only
  EXPECT_EQ(wg.flops, 100);
  EXPECT_EQ(input_names(g, "grad/emb/weight"),
            (std::vector<std::string>{"grad/loss/input:0", "ids:0"}));
  EXPECT_EQ(op_named(g, "update/emb").param_bytes, 80000);
}

TEST(TrainingTest, DevicesAndTempBytesFollowTheForwardOp) {
  GraphBuilder b("dev", "test");
  const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {16}});
  b.add_op({.name = "conv",
            .type = "Conv2D",
            .inputs = {{x, 0}},
            .output_bytes = {16},
            .flops = 64,
            .param_bytes = 64,
            .temp_bytes = 1000,
            .devices = {"cpu"},
            .time_s = {{.device = "cpu", .time_s = 0.5}}});
  const Graph g = expand_training(std::move(b).build());
  const Op& wg = op_named(g, "grad/conv/weight");
  EXPECT_EQ(wg.type, "Conv2DBackpropFilter");
  EXPECT_EQ(wg.devices, (std::vector<std::string>{"cpu"}));
  EXPECT_EQ(wg.temp_bytes, 1000);
  ASSERT_EQ(wg.time_s.size(), 1u);
  EXPECT_EQ(wg.time_s[0].time_s, 0.5);
  EXPECT_EQ(op_named(g, "update/conv").devices, (std::vector<std::string>{"cpu"}));
  EXPECT_TRUE(op_named(g, "update/conv").time_s.empty());
}

TEST(TrainingTest, PrefixesAvoidExistingOpNames) {
  GraphBuilder b("names", "test");
  const OpId x = b.add_op({.name = "grad/x", .type = "Input", .output_bytes = {16}});
  b.add_op({.name = "mm",
            .type = "MatMul",
            .inputs = {{x, 0}},
            .output_bytes = {16},
            .flops = 64,
            .param_bytes = 64});
  const Graph g = expand_training(std::move(b).build());
  EXPECT_TRUE(g.find_op("grad_1/mm/weight").has_value());
  EXPECT_TRUE(g.find_op("update/mm").has_value());
}

TEST(TrainingTest, RejectsATrainingGraph) {
  const Graph g = expand_training(mlp());
  EXPECT_THROW(expand_training(g), GraphError);
  try {
    expand_training(g);
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("grad/mm2/input"), std::string::npos) << e.what();
  }
}

TEST(TrainingTest, GraphWithoutWeightsGetsNoGradients) {
  GraphBuilder b("plain", "test");
  const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {16}});
  b.add_op({.name = "relu", .type = "Relu", .inputs = {{x, 0}}, .output_bytes = {16}, .flops = 4});
  const Graph g = expand_training(std::move(b).build());
  EXPECT_EQ(g.num_ops(), 2u);
}

TEST(TrainingTest, IsDeterministic) {
  const Graph a = expand_training(shared_weight());
  const Graph b = expand_training(shared_weight());
  ASSERT_EQ(a.num_ops(), b.num_ops());
  for (size_t i = 0; i < a.num_ops(); ++i) {
    EXPECT_EQ(a.ops()[i].name, b.ops()[i].name);
    EXPECT_EQ(a.ops()[i].inputs, b.ops()[i].inputs);
  }
}

}  // namespace
}  // namespace dplace
