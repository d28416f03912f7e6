#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "dplace/cluster/presets.h"
#include "dplace/core/error.h"
#include "dplace/cost/cost_model.h"
#include "dplace/ir/training.h"
#include "dplace/models/registry.h"
#include "dplace/sim/placement.h"

namespace dplace {
namespace {

const ModelEntry& model(const std::string& name) {
  const ModelEntry* e = find_model(name);
  EXPECT_NE(e, nullptr) << name;
  return *e;
}

Graph build(const std::string& name, ModelOptions options = {}) {
  return model(name).build(options);
}

Graph inference(const std::string& name, ModelOptions options = {}) {
  options.inference = true;
  return build(name, options);
}

int64_t params(const Graph& forward) { return forward.total_param_bytes() / 4; }

double phase_flops(const Graph& g, Phase phase) {
  double total = 0;
  for (const Op& op : g.ops()) {
    if (op.phase == phase) total += op.flops;
  }
  return total;
}

// Multiply-adds of the convolutions and matrix products of a forward graph.
double macs(const Graph& forward) {
  double total = 0;
  for (const Op& op : forward.ops()) {
    if (op.type == "Conv2D" || op.type == "MatMul" || op.type == "BatchMatMul") {
      total += op.flops / 2;
    }
  }
  return total;
}

// Small sizes of a model, for tests that need every model but not its default size.
ModelOptions small(const std::string& name) {
  if (name.starts_with("inception") || name.starts_with("resnet")) return {.batch = 2};
  return {.batch = 2, .seq = 8};
}

const std::vector<std::string> kPaperModels = {"rnnlm",    "nmt",          "gnmt4",
                                               "gnmt8",    "inception_v3", "inception_v3_aux",
                                               "resnet50", "bert_base",    "gpt2"};

TEST(ModelsTest, RegistryListsEveryModelOnceWithADescription) {
  std::set<std::string> names;
  for (const ModelEntry& e : model_registry()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_FALSE(e.description.empty()) << e.name;
    EXPECT_TRUE(static_cast<bool>(e.build)) << e.name;
  }
  EXPECT_TRUE(names.count("two_tower"));
  for (const std::string& name : kPaperModels) {
    EXPECT_TRUE(names.count(name)) << name;
    EXPECT_TRUE(static_cast<bool>(model(name).expert)) << name;
  }
  EXPECT_EQ(find_model("no_such_model"), nullptr);
}

// ---- literature figures (torchvision / Hugging Face parameter counts, published GMACs) ----

TEST(ModelsTest, InceptionV3MatchesPublishedSize) {
  const Graph g = inference("inception_v3");
  EXPECT_EQ(params(g), 23'834'568);  // torchvision inception_v3 without AuxLogits
  EXPECT_NEAR(macs(g) / 32, 5.71e9, 0.01 * 5.71e9);
  EXPECT_EQ(params(inference("inception_v3_aux")), 27'161'264);  // with AuxLogits
}

TEST(ModelsTest, ResNetsMatchPublishedSizes) {
  const Graph g = inference("resnet50");
  EXPECT_EQ(params(g), 25'557'032);
  EXPECT_NEAR(macs(g) / 32, 4.09e9, 0.01 * 4.09e9);
  EXPECT_EQ(params(inference("resnet50", {.layers = 18})), 11'689'512);
  EXPECT_EQ(params(inference("resnet50", {.layers = 152})), 60'192'808);
  EXPECT_NEAR(macs(inference("resnet50", {.batch = 1, .layers = 152})), 11.51e9, 0.01 * 11.51e9);
}

TEST(ModelsTest, TransformersMatchPublishedSizes) {
  // BERT-base with its pre-training heads (109.5M encoder + pooler, 0.6M heads).
  EXPECT_EQ(params(inference("bert_base")), 110'106'428);
  EXPECT_EQ(params(inference("gpt2")), 124'439'808);
}

TEST(ModelsTest, RnnlmParamsFollowFromLayerShapes) {
  const int64_t v = 10000, h = 2048, layers = 2;
  const int64_t embedding = v * h;
  const int64_t lstm = (h + h) * 4 * h + 4 * h;  // [input; h] -> 4 gates, plus bias
  const int64_t softmax = h * v + v;
  EXPECT_EQ(params(inference("rnnlm")), embedding + layers * lstm + softmax);
  const int64_t small_v = 500, small_h = 64;
  EXPECT_EQ(params(inference("rnnlm", {.layers = 3, .hidden = 64, .vocab = 500})),
            small_v * small_h + 3 * ((2 * small_h) * 4 * small_h + 4 * small_h) +
                small_h * small_v + small_v);
}

TEST(ModelsTest, NmtParamsFollowFromLayerShapes) {
  const int64_t v = 40000, h = 1024;
  const int64_t embeddings = 2 * v * h;                   // source and target
  const int64_t encoder = 2 * ((2 * h) * 4 * h + 4 * h);  // [x; h] per layer
  const int64_t decoder0 = (3 * h) * 4 * h + 4 * h;       // [y; attention; h]
  const int64_t decoder1 = (2 * h) * 4 * h + 4 * h;
  const int64_t attention = h * h + h * h + h + 2 * h * h;  // keys, query, v, output layer
  const int64_t softmax = h * v + v;
  EXPECT_EQ(params(inference("nmt")),
            embeddings + encoder + decoder0 + decoder1 + attention + softmax);
}

TEST(ModelsTest, GnmtParamsFollowFromLayerShapes) {
  const int64_t v = 32000, h = 1024;
  auto lstm = [&](int64_t input) { return (input + h) * 4 * h + 4 * h; };
  for (int64_t layers : {4, 8}) {
    const int64_t embeddings = 2 * v * h;
    // Bidirectional bottom layer (two cells), then [fw; bw] -> layer 1, then h -> the rest.
    const int64_t encoder = 2 * lstm(h) + lstm(2 * h) + (layers - 2) * lstm(h);
    // Every decoder layer reads [input; attention context].
    const int64_t decoder = layers * lstm(2 * h);
    const int64_t attention = h * h + h * h + h;  // keys, query, v
    const int64_t softmax = h * v;                // no bias
    EXPECT_EQ(params(inference(layers == 4 ? "gnmt4" : "gnmt8")),
              embeddings + encoder + decoder + attention + softmax)
        << layers;
  }
}

// ---- training graphs ----

TEST(ModelsTest, TrainingGraphsCarryWeightsAndAdamSlotsAndTwiceTheForwardWork) {
  for (const std::string& name : kPaperModels) {
    const Graph fwd = inference(name);
    const Graph train = build(name);
    EXPECT_EQ(train.total_param_bytes(), 3 * fwd.total_param_bytes()) << name;
    EXPECT_DOUBLE_EQ(phase_flops(train, Phase::kForward), fwd.total_flops()) << name;
    const double backward = phase_flops(train, Phase::kBackward);
    EXPECT_GT(backward, 1.8 * fwd.total_flops()) << name;
    EXPECT_LT(backward, 2.2 * fwd.total_flops()) << name;
    EXPECT_GT(phase_flops(train, Phase::kUpdate), 0) << name;
    for (const Op& op : fwd.ops()) EXPECT_EQ(op.phase, Phase::kForward) << op.name;
  }
}

TEST(ModelsTest, BackwardAndUpdateOpsShareAGroupWithTheirForwardOp) {
  for (const std::string& name : kPaperModels) {
    const Graph g = build(name);
    for (size_t gi = 0; gi < g.num_groups(); ++gi) {
      bool has_forward = false, has_other = false;
      for (OpId op : g.group_ops(GroupId::from_index(gi))) {
        (g.op(op).phase == Phase::kForward ? has_forward : has_other) = true;
      }
      EXPECT_TRUE(has_forward || !has_other) << name << " group " << g.group_name(GroupId(gi));
    }
    EXPECT_EQ(g.num_groups(), inference(name).num_ops()) << name;
  }
}

TEST(ModelsTest, InferenceOpCountsFollowFromTheStructure) {
  // rnnlm: 2 inputs, lookup + unstack, per layer 2 variables + zero state + 14 ops per step,
  // softmax 2 variables + 3 ops per step, loss sum + mean.
  EXPECT_EQ(inference("rnnlm").num_ops(), 2u + 2 + 2 * (3 + 14 * 40) + (2 + 3 * 40) + 2);
  EXPECT_EQ(inference("rnnlm", {.layers = 1, .seq = 5}).num_ops(),
            2u + 2 + (3 + 14 * 5) + (2 + 3 * 5) + 2);
  // ResNet-50: inputs 2, stem conv(3) + pool, 16 blocks of 3 conv(3) + add + relu plus 4
  // projections (2 each), head pool + flatten + fc + xent, loss mean.
  EXPECT_EQ(inference("resnet50").num_ops(), 2u + 4 + 16 * (3 * 3 - 1 + 2) + 4 * 2 + 4 + 1);
}

TEST(ModelsTest, TrainingOpCountsAreTheOrderOfTheTensorFlowGraphs) {
  // The 2017 paper's TensorFlow training graphs (before grouping): RNNLM 8,943 ops, NMT 22,097,
  // Inception-V3 31,180. Ours carry the ops that do work in a step (no initializers, savers,
  // summaries or shape bookkeeping), see docs/models.md.
  EXPECT_GT(build("rnnlm").num_ops(), 8943u / 4);
  EXPECT_GT(build("nmt").num_ops(), 22097u / 4);
  EXPECT_GT(build("inception_v3").num_ops(), 1000u);
  EXPECT_GT(build("gnmt8").num_ops(), 20000u);
}

TEST(ModelsTest, InferenceHasNoBackwardOrUpdateOps) {
  const Graph g = inference("bert_base");
  for (const Op& op : g.ops()) EXPECT_EQ(op.phase, Phase::kForward) << op.name;
  EXPECT_EQ(g.num_groups(), g.num_ops());
}

TEST(ModelsTest, TiedEmbeddingsAreOneVariableReadByLookupAndOutputLayer) {
  const Graph g = inference("gpt2");
  const OpId wte = *g.find_op("embeddings/wte");
  EXPECT_EQ(g.op(wte).type, "VariableV2");
  std::vector<std::string> readers;
  for (OpId c : g.successors(wte)) readers.push_back(g.op(c).name);
  EXPECT_EQ(readers, (std::vector<std::string>{"embeddings/token_lookup", "lm_head/logits"}));
  const Graph train = build("gpt2");
  // The lookup's sparse gradient and the output layer's dense one are summed before Adam.
  EXPECT_TRUE(train.find_op("grad/embeddings/wte/sum0_1").has_value());
  EXPECT_TRUE(train.find_op("update/embeddings/wte").has_value());
}

TEST(ModelsTest, LstmWeightsAreSharedAcrossTimeSteps) {
  const Graph g = inference("rnnlm", {.seq = 7});
  const OpId kernel = *g.find_op("lstm/l1/kernel");
  EXPECT_EQ(g.op(kernel).param_bytes, int64_t{4} * (2 * 2048) * (4 * 2048));
  EXPECT_EQ(g.successors(kernel).size(), 7u);  // one MatMul per step
  const OpId mm = *g.find_op("lstm/l1/t3/matmul");
  EXPECT_EQ(g.op(mm).flops, 2.0 * 64 * (2 * 2048) * (4 * 2048));
  EXPECT_EQ(g.op(mm).output_bytes, (std::vector<int64_t>{4 * 64 * 4 * 2048}));
}

TEST(ModelsTest, SizesScaleActivationsAndWork) {
  const Graph a = inference("resnet50", {.batch = 8});
  const Graph b = inference("resnet50", {.batch = 16});
  // Everything but the scalar loss (4 bytes) scales with the batch.
  EXPECT_EQ(b.total_output_bytes() - 4, 2 * (a.total_output_bytes() - 4));
  EXPECT_DOUBLE_EQ(b.total_flops(), 2 * a.total_flops());
  EXPECT_EQ(b.total_param_bytes(), a.total_param_bytes());
  const Graph s = inference("bert_base", {.layers = 2, .seq = 64});
  EXPECT_EQ(s.op(*s.find_op("layer_1/attention/probs")).output_bytes,
            (std::vector<int64_t>{int64_t{4} * 32 * 12 * 64 * 64}));
}

TEST(ModelsTest, BadSizesAreConfigErrorsNamingTheModelAndOption) {
  auto message = [](const std::string& name, const ModelOptions& o) -> std::string {
    try {
      build(name, o);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message("inception_v3", {.layers = 3}),
            "model 'inception_v3': --layers is not a size of this model (it takes --batch)");
  EXPECT_EQ(message("rnnlm", {.batch = 0}), "model 'rnnlm': --batch must be positive, got 0");
  EXPECT_EQ(message("resnet50", {.layers = 49}),
            "model 'resnet50': --layers must be one of 18, 34, 50, 101, 152, got 49");
  EXPECT_EQ(message("bert_base", {.hidden = 100}),
            "model 'bert_base': --hidden must be a multiple of 64 (the head width), got 100");
  EXPECT_EQ(message("nmt", {.seq = 5000}), "model 'nmt': --seq must be <= 1000, got 5000");
  EXPECT_NE(message("gpt2", {.batch = 1 << 20, .seq = 1 << 16}).find("too large"),
            std::string::npos);
  EXPECT_EQ(message("rnnlm", {.hidden = 1000000000}),
            "model 'rnnlm': --hidden must be <= 1048576, got 1000000000");
  EXPECT_EQ(message("inception_v3", {.batch = 1000000000}),
            "model 'inception_v3': tensor of op 'Conv2d_1a_3x3/conv' would take 2.84e+15 bytes, "
            "more than the limit of 1.13e+15 (2^50) on one tensor; the sizes are too large");
  EXPECT_EQ(message("rnnlm", {.hidden = 1 << 20, .vocab = 1 << 30}),
            "model 'rnnlm': parameters of op 'embedding/lookup' would take 4.5e+15 bytes, more "
            "than the limit of 1.13e+15 (2^50) on one op; the sizes are too large");
  // two_tower builds its ops without Net; it used to skip this check (2.25e15-byte tensors).
  EXPECT_EQ(message("two_tower", {.batch = 2147483647, .hidden = 262144, .inference = true}),
            "model 'two_tower': tensor of op 'head/concat' would take 4.5e+15 bytes, more than "
            "the limit of 1.13e+15 (2^50) on one tensor; the sizes are too large");
  try {  // a GraphError from the graph's own limit; the model is named the same way
    build("two_tower", {.hidden = 1000000000});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("model 'two_tower': ", 0), 0u) << e.what();
  }
}

TEST(ModelsTest, GenerationIsDeterministic) {
  for (const std::string& name : {std::string("nmt"), std::string("inception_v3")}) {
    const Graph a = build(name);
    const Graph b = build(name);
    ASSERT_EQ(a.num_ops(), b.num_ops()) << name;
    for (size_t i = 0; i < a.num_ops(); ++i) {
      const Op& x = a.ops()[i];
      const Op& y = b.ops()[i];
      ASSERT_EQ(x.name, y.name);
      EXPECT_EQ(x.inputs, y.inputs) << x.name;
      EXPECT_EQ(x.output_bytes, y.output_bytes) << x.name;
      EXPECT_EQ(x.flops, y.flops) << x.name;
      EXPECT_EQ(x.colocate, y.colocate) << x.name;
    }
  }
}

// ---- expert placements (validity; memory is in models_sim_test) ----

TEST(ModelsTest, ExpertPlacementsAreValidOnEveryPresetShape) {
  for (const char* preset : {"paper-k80x4", "paper-k80x2", "cpu-only"}) {
    const Cluster cluster = load_preset(preset);
    for (const std::string& name : kPaperModels) {
      const Graph g = build(name, small(name));
      const CostTable costs(g, cluster);
      const Placement p = model(name).expert(g, cluster);
      EXPECT_EQ(placement_problem(g, cluster, costs, p), "") << name << " on " << preset;
    }
  }
}

TEST(ModelsTest, RnnExpertsPutEachLstmLayerOnItsOwnGpu) {
  const Cluster cluster = load_preset("paper-k80x4");
  const Graph g = build("nmt");
  const Placement p = model("nmt").expert(g, cluster);
  auto device = [&](const char* op) { return cluster.device(p[*g.find_op(op)]).name; };
  EXPECT_EQ(device("encoder/l0/t0/matmul"), "/gpu:0");
  EXPECT_EQ(device("encoder/l1/t39/matmul"), "/gpu:1");
  EXPECT_EQ(device("decoder/l0/t5/matmul"), "/gpu:2");
  EXPECT_EQ(device("decoder/l1/t5/matmul"), "/gpu:3");
  EXPECT_EQ(device("attention/t5/tanh"), "/gpu:3");
  EXPECT_EQ(device("softmax/t5/logits"), "/gpu:3");
  EXPECT_EQ(device("src_embedding/lookup"), "/gpu:0");
  EXPECT_EQ(device("tgt_embedding/lookup"), "/gpu:2");
  EXPECT_EQ(device("grad/decoder/l0/t5/matmul/weight"), "/gpu:2");
  EXPECT_EQ(device("update/decoder/l0/kernel"), "/gpu:2");

  const Cluster two = load_preset("paper-k80x2");
  const Placement q = model("nmt").expert(g, two);
  EXPECT_EQ(two.device(q[*g.find_op("decoder/l0/t5/matmul")]).name, "/gpu:0");
  EXPECT_EQ(two.device(q[*g.find_op("decoder/l1/t5/matmul")]).name, "/gpu:1");

  const Graph lm = build("rnnlm");
  const Placement r = model("rnnlm").expert(lm, cluster);
  EXPECT_EQ(cluster.device(r[*lm.find_op("lstm/l0/t0/matmul")]).name, "/gpu:0");
  EXPECT_EQ(cluster.device(r[*lm.find_op("lstm/l1/t0/matmul")]).name, "/gpu:1");
  EXPECT_EQ(cluster.device(r[*lm.find_op("softmax/t0/logits")]).name, "/gpu:2");

  const Graph g8 = build("gnmt8", {.seq = 4});
  const Placement s = model("gnmt8").expert(g8, cluster);
  EXPECT_EQ(cluster.device(s[*g8.find_op("encoder/l3/t0/matmul")]).name, "/gpu:1");
  EXPECT_EQ(cluster.device(s[*g8.find_op("decoder/l7/t0/matmul")]).name, "/gpu:3");
  EXPECT_EQ(cluster.device(s[*g8.find_op("attention/t0/tanh")]).name, "/gpu:0");
}

TEST(ModelsTest, CnnAndTransformerExpertsAreContiguousStagesOverAllGpus) {
  const Cluster cluster = load_preset("paper-k80x4");
  for (const char* name : {"inception_v3", "resnet50", "bert_base", "gpt2"}) {
    const Graph g = build(name);
    const Placement p = model(name).expert(g, cluster);
    std::vector<uint32_t> stage_of_forward;
    for (OpId op : g.topo_order()) {
      if (g.op(op).phase == Phase::kForward && g.op(op).flops > 0) {
        stage_of_forward.push_back(p[op].value());
      }
    }
    // Along the forward pass the device index never goes back, and every GPU is used.
    EXPECT_TRUE(std::is_sorted(stage_of_forward.begin(), stage_of_forward.end())) << name;
    EXPECT_EQ(std::set<uint32_t>(stage_of_forward.begin(), stage_of_forward.end()).size(), 4u)
        << name;
  }
}

}  // namespace
}  // namespace dplace
