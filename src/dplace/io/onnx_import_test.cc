// Tests of the ONNX importer: real exported models (tests/data/onnx, made by
// scripts/make-onnx-fixtures.py; expected.json holds statistics computed there from the protos),
// small models built inline with hand-computed costs, and the malformed-input corpus.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/json.h"
#include "dplace/core/scratch_dir.h"
#include "dplace/io/importers.h"

namespace dplace {
namespace {

namespace ox = ::ONNX_NAMESPACE;

const std::string kOnnxDir = std::string(DPLACE_TEST_DATA_DIR) + "/onnx";

const Json& expected() {
  static const Json doc = read_json_file(kOnnxDir + "/expected.json");
  return doc;
}

ImportOptions dims_of(const std::string& model) {
  ImportOptions options;
  for (const auto& [name, value] : expected()["models"][model]["dims"].items()) {
    options.dims[name] = value.get<int64_t>();
  }
  return options;
}

LoadedGraph load_fixture(const std::string& model) {
  return read_onnx_file(kOnnxDir + "/" + expected()["models"][model]["file"].get<std::string>(),
                        dims_of(model));
}

std::map<std::string, int> type_counts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Op& op : g.ops()) ++counts[op.type];
  return counts;
}

double type_flops(const Graph& g, const std::vector<std::string>& types) {
  double total = 0;
  for (const Op& op : g.ops()) {
    if (std::find(types.begin(), types.end(), op.type) != types.end()) total += op.flops;
  }
  return total;
}

const Op& op_named(const Graph& g, const std::string& name) {
  std::optional<OpId> id = g.find_op(name);
  if (!id) throw std::runtime_error("no op " + name);
  return g.op(*id);
}

std::string temp_path(const std::string& name) { return scratch_path(name); }

// Builds small ONNX models inline.
class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 14) {
    model_.set_ir_version(8);
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("inline");
  }
  // dims: a number is a fixed size, -1 a symbolic dim named `symbol`.
  ModelBuilder& input(const std::string& name, const std::vector<int64_t>& dims,
                      const std::string& symbol = "",
                      int32_t elem_type = ox::TensorProto_DataType_FLOAT) {
    auto* in = model_.mutable_graph()->add_input();
    in->set_name(name);
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem_type);
    auto* shape = t->mutable_shape();
    for (int64_t d : dims) {
      if (d < 0) {
        shape->add_dim()->set_dim_param(symbol);
      } else {
        shape->add_dim()->set_dim_value(d);
      }
    }
    return *this;
  }
  // A float initializer with `dims`; stored inline (raw_data) unless `external`.
  ModelBuilder& weight(const std::string& name, const std::vector<int64_t>& dims,
                       bool external = false) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(ox::TensorProto_DataType_FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    if (external) {
      t->set_data_location(ox::TensorProto_DataLocation_EXTERNAL);
      auto* e = t->add_external_data();
      e->set_key("location");
      e->set_value("absent.data");
    } else {
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      t->set_raw_data(std::string(static_cast<size_t>(n) * 4, '\x01'));
    }
    return *this;
  }
  ModelBuilder& int_constant(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(ox::TensorProto_DataType_INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }
  // An int64 scalar initializer (rank 0).
  ModelBuilder& int_scalar(const std::string& name, int64_t value) {
    int_constant(name, {value});
    model_.mutable_graph()
        ->mutable_initializer(model_.graph().initializer_size() - 1)
        ->clear_dims();
    return *this;
  }
  ModelBuilder& float_constant(const std::string& name, const std::vector<float>& values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(ox::TensorProto_DataType_FLOAT);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (float v : values) t->add_float_data(v);
    return *this;
  }
  // A node of the graph, named after its first output unless `name` is given.
  ox::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                      const std::vector<std::string>& outputs, const std::string& name = "") {
    return fill(*model_.mutable_graph()->add_node(), op, inputs, outputs,
                name.empty() ? outputs.at(0) : name);
  }
  // Gives `node` a graph attribute `name` (an If's branch, say) of one node of type `op` that reads
  // `input` and writes the graph's float output `output`; returns that node.
  static ox::NodeProto& branch(ox::NodeProto& node, const std::string& name, const std::string& op,
                               const std::string& input, const std::string& output) {
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(ox::AttributeProto_AttributeType_GRAPH);
    ox::GraphProto* g = a->mutable_g();
    g->set_name(name);
    auto* out = g->add_output();
    out->set_name(output);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(ox::TensorProto_DataType_FLOAT);
    return fill(*g->add_node(), op, {input}, {output}, "");
  }
  static ox::NodeProto& fill(ox::NodeProto& n, const std::string& op,
                             const std::vector<std::string>& inputs,
                             const std::vector<std::string>& outputs, const std::string& name) {
    n.set_op_type(op);
    n.set_name(name);
    for (const auto& i : inputs) n.add_input(i);
    for (const auto& o : outputs) n.add_output(o);
    return n;
  }
  static void attr(ox::NodeProto& n, const std::string& name, int64_t value) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(ox::AttributeProto_AttributeType_INT);
    a->set_i(value);
  }
  static void attr(ox::NodeProto& n, const std::string& name, const std::string& value) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(ox::AttributeProto_AttributeType_STRING);
    a->set_s(value);
  }
  static void attr(ox::NodeProto& n, const std::string& name, const std::vector<int64_t>& values) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(ox::AttributeProto_AttributeType_INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  ModelBuilder& output(const std::string& name) {
    model_.mutable_graph()->add_output()->set_name(name);
    return *this;
  }
  // A model-local function in `domain` (which the model then imports at version 1), importing the
  // model's default opset.
  ox::FunctionProto& function(const std::string& domain, const std::string& name,
                              const std::vector<std::string>& inputs,
                              const std::vector<std::string>& outputs) {
    bool imported = false;
    for (const auto& o : model_.opset_import()) imported = imported || o.domain() == domain;
    if (!imported) {
      auto* o = model_.add_opset_import();
      o->set_domain(domain);
      o->set_version(1);
    }
    auto* f = model_.add_functions();
    f->set_domain(domain);
    f->set_name(name);
    for (const auto& i : inputs) f->add_input(i);
    for (const auto& o : outputs) f->add_output(o);
    *f->add_opset_import() = model_.opset_import(0);
    return *f;
  }
  static ox::NodeProto& body_node(ox::FunctionProto& f, const std::string& op,
                                  const std::vector<std::string>& inputs,
                                  const std::vector<std::string>& outputs,
                                  const std::string& name = "") {
    return fill(*f.add_node(), op, inputs, outputs, name);
  }
  // A call of a model-local function.
  ox::NodeProto& call(const std::string& domain, const std::string& function,
                      const std::vector<std::string>& inputs,
                      const std::vector<std::string>& outputs, const std::string& name) {
    ox::NodeProto& n = node(function, inputs, outputs, name);
    n.set_domain(domain);
    return n;
  }
  ox::ModelProto& proto() { return model_; }
  std::string save(const std::string& name) {
    std::string path = temp_path(name);
    std::ofstream out(path, std::ios::binary);
    model_.SerializeToOstream(&out);
    return path;
  }

 private:
  ox::ModelProto model_;
};

std::string error_of(const std::string& path, const ImportOptions& options = {}) {
  try {
    read_onnx_file(path, options);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(no error)";
}

// ---------------------------------------------------------------------------------------------
// Real models.

TEST(OnnxImportTest, ResNet50ForwardFlopsWithinFivePercentOfPublished) {
  const LoadedGraph loaded = load_fixture("resnet50");
  double published_gmac = expected()["models"]["resnet50"]["published_gmac"].get<double>();
  double gmac = loaded.graph.total_flops() / 2e9;
  EXPECT_NEAR(gmac / published_gmac, 1.0, 0.05) << gmac;
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.at(0);
  EXPECT_EQ(loaded.format, "onnx");
}

TEST(OnnxImportTest, InceptionV3ForwardFlopsWithinFivePercentOfPublished) {
  const LoadedGraph loaded = load_fixture("inception_v3");
  double published_gmac = expected()["models"]["inception_v3"]["published_gmac"].get<double>();
  double gmac = loaded.graph.total_flops() / 2e9;
  EXPECT_NEAR(gmac / published_gmac, 1.0, 0.05) << gmac;
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.at(0);
}

TEST(OnnxImportTest, ParamBytesAreExactlyTheInitializerSumForEveryFixture) {
  for (const auto& [model, stats] : expected()["models"].items()) {
    SCOPED_TRACE(model);
    const LoadedGraph loaded = load_fixture(model);
    EXPECT_EQ(loaded.graph.total_param_bytes(), stats["initializer_bytes"].get<int64_t>());
  }
}

TEST(OnnxImportTest, ResNet50OpCountsFoldWeightIdentitiesAndAliasFlatten) {
  const LoadedGraph loaded = load_fixture("resnet50");
  const Json& stats = expected()["models"]["resnet50"];
  ASSERT_EQ(stats["nodes"].get<int>(), 169);
  // 169 nodes: 47 Identity of weights fold away, Flatten is an alias; plus one Input op.
  EXPECT_EQ(loaded.graph.num_ops(), 169u - 47 - 1 + 1);
  std::map<std::string, int> want = {{"Input", 1}, {"Conv", 53},   {"Relu", 49},
                                     {"Add", 16},  {"MaxPool", 1}, {"GlobalAveragePool", 1},
                                     {"Gemm", 1}};
  EXPECT_EQ(type_counts(loaded.graph), want);
  for (const auto& [type, count] : want) {
    if (type != "Input") {
      EXPECT_EQ(stats["op_types"][type].get<int>(), count) << type;
    }
  }
}

TEST(OnnxImportTest, InceptionV3OpCounts) {
  const LoadedGraph loaded = load_fixture("inception_v3");
  std::map<std::string, int> want = {
      {"Input", 1}, {"Conv", 94},       {"Relu", 94},   {"Concat", 11},
      {"Pad", 9},   {"AveragePool", 9}, {"MaxPool", 4}, {"GlobalAveragePool", 1},
      {"Gemm", 1}};
  EXPECT_EQ(type_counts(loaded.graph), want);
  // Identity (83), Constant (9) and Flatten (1) make no op.
  EXPECT_EQ(expected()["models"]["inception_v3"]["nodes"].get<size_t>(),
            loaded.graph.num_ops() - 1 + 83 + 9 + 1);
}

TEST(OnnxImportTest, TransformerShapeArithmeticFoldsAndMatMulFlopsAreExact) {
  const LoadedGraph loaded = load_fixture("transformer_encoder");
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.at(0);
  // Two layers of: LayerNorm pieces x2, attention (in_proj MatMul, 3 Slices, 4 Transposes, two
  // batched MatMuls, Softmax, out_proj Gemm), feed-forward with erf-GELU. Shape/Gather/Unsqueeze/
  // Concat/Cast chains computing reshape targets fold away; Reshapes are aliases.
  std::map<std::string, int> want = {
      {"Input", 1},   {"Add", 20}, {"Div", 8}, {"Erf", 2},        {"Gemm", 2},
      {"MatMul", 10}, {"Mul", 8},  {"Pow", 4}, {"ReduceMean", 8}, {"Slice", 6},
      {"Softmax", 2}, {"Sqrt", 4}, {"Sub", 4}, {"Transpose", 8}};
  EXPECT_EQ(type_counts(loaded.graph), want);
  // seq 16, batch 1, d_model 128, 4 heads of 32, feed-forward 512; per layer:
  //   in_proj 2*16*128*384, scores 2*(4*16*16)*32, context 2*(4*16*32)*16,
  //   out_proj 2*16*128*128 + 16*128 bias, linear1 2*16*128*512, linear2 2*16*512*128.
  double per_layer = 2.0 * 16 * 128 * 384 + 2.0 * 4 * 16 * 16 * 32 + 2.0 * 4 * 16 * 32 * 16 +
                     (2.0 * 16 * 128 * 128 + 16 * 128) + 2.0 * 16 * 128 * 512 +
                     2.0 * 16 * 512 * 128;
  EXPECT_DOUBLE_EQ(type_flops(loaded.graph, {"MatMul", "Gemm"}), 2 * per_layer);
  // The model's output keeps the input's shape: the last op writes 16*1*128 floats.
  EXPECT_EQ(loaded.graph.op(OpId::from_index(loaded.graph.num_ops() - 1)).output_bytes[0],
            16 * 128 * 4);
}

TEST(OnnxImportTest, LstmSeq2SeqFlopsFollowTheGateFormula) {
  const LoadedGraph loaded = load_fixture("lstm_seq2seq");
  EXPECT_EQ(type_counts(loaded.graph)["LSTM"], 4);
  // One layer, input 16, hidden 16, with bias: per step 2*4H*(I+H) + 21H = 4096 + 336.
  const double per_step = 2.0 * 4 * 16 * (16 + 16) + 21 * 16;
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "/encoder/LSTM").flops, 10 * per_step);
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "/decoder/LSTM_1").flops, 7 * per_step);
  // Projection 7x16 @ 16x32, bias add, log-softmax (5 per element).
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "/project/MatMul").flops, 2.0 * 7 * 32 * 16);
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "/LogSoftmax").flops, 5.0 * 7 * 32);
  EXPECT_DOUBLE_EQ(loaded.graph.total_flops(),
                   (2 * 10 + 2 * 7) * per_step + 2.0 * 7 * 32 * 16 + 7 * 32 + 5.0 * 7 * 32);
  // LSTM has three outputs: Y [seq, dirs, batch, H], Y_h and Y_c [dirs, batch, H].
  EXPECT_EQ(op_named(loaded.graph, "/encoder/LSTM").output_bytes,
            (std::vector<int64_t>{10 * 16 * 4, 16 * 4, 16 * 4}));
  // The embedding lookup reads its 10 rows, not the whole table.
  const Op& embed = op_named(loaded.graph, "/src_embed/Gather");
  EXPECT_EQ(embed.param_bytes, 32 * 16 * 4);
  EXPECT_DOUBLE_EQ(embed.bytes_accessed.value(), 2 * 10 * 16 * 4 + 10 * 8);
}

TEST(OnnxImportTest, OpMixCostsMatchHandComputedFormulas) {
  const LoadedGraph loaded = load_fixture("op_mix");
  const Graph& g = loaded.graph;
  // ConvTranspose 8->4, 3x3, on [1,8,8,8]: 2 * (8*8*8 inputs) * (4*3*3) + bias on [1,4,16,16].
  EXPECT_DOUBLE_EQ(op_named(g, "/up/ConvTranspose").flops, 2.0 * 512 * 36 + 1024);
  EXPECT_DOUBLE_EQ(op_named(g, "/Resize").flops, 0);  // nearest
  EXPECT_DOUBLE_EQ(op_named(g, "/bn/BatchNormalization").flops, 2.0 * 4 * 32 * 32);
  // GRU input 16, hidden 12, 5 steps, with bias: 2*3H*(I+H) + 17H per step.
  EXPECT_DOUBLE_EQ(op_named(g, "/gru/GRU").flops, 5 * (2.0 * 3 * 12 * 28 + 17 * 12));
  EXPECT_DOUBLE_EQ(op_named(g, "/norm/LayerNormalization").flops, 7.0 * 5 * 12);
  const Op& split = op_named(g, "/Split");
  EXPECT_EQ(split.output_bytes, (std::vector<int64_t>{2 * 34 * 34 * 4, 2 * 34 * 34 * 4}));
  EXPECT_DOUBLE_EQ(split.flops, 0);
  // Reads its input and the int64[2] split sizes, writes both halves.
  EXPECT_DOUBLE_EQ(split.bytes_accessed.value(), 2.0 * 4 * 34 * 34 * 4 + 16);
  EXPECT_DOUBLE_EQ(op_named(g, "/Pad").flops, 0);
  EXPECT_EQ(op_named(g, "/Pad").output_bytes[0], 4 * 34 * 34 * 4);
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.at(0);
}

TEST(OnnxImportTest, WeightsAsGraphInputsBecomeParametersNotInputOps) {
  const LoadedGraph inputs = load_fixture("resnet50_weights_as_inputs");
  const LoadedGraph initializers = load_fixture("resnet50");
  EXPECT_EQ(type_counts(inputs.graph)["Input"], 1);
  EXPECT_EQ(inputs.graph.num_ops(), initializers.graph.num_ops());
  EXPECT_EQ(inputs.graph.total_param_bytes(), initializers.graph.total_param_bytes());
  EXPECT_DOUBLE_EQ(inputs.graph.total_flops(), initializers.graph.total_flops());
}

TEST(OnnxImportTest, FixturesHoldExternalWeightsWhoseFileIsAbsent) {
  // The property the fixtures exist to test: initializers point at a data file that is not there.
  ox::ModelProto model;
  std::ifstream in(kOnnxDir + "/resnet50.onnx", std::ios::binary);
  ASSERT_TRUE(model.ParseFromIstream(&in));
  int external = 0;
  for (const auto& t : model.graph().initializer()) {
    if (t.data_location() == ox::TensorProto_DataLocation_EXTERNAL) ++external;
  }
  EXPECT_GT(external, 50);
  EXPECT_FALSE(std::filesystem::exists(kOnnxDir + "/resnet50.onnx.data"));
}

TEST(OnnxImportTest, TrainingExpandsIntoBackwardAndUpdateOps) {
  ImportOptions options = dims_of("resnet50");
  options.training = true;
  const LoadedGraph loaded = read_onnx_file(kOnnxDir + "/resnet50.onnx", options);
  std::map<Phase, int> phases;
  for (const Op& op : loaded.graph.ops()) ++phases[op.phase];
  EXPECT_EQ(phases[Phase::kForward], 122);
  EXPECT_GT(phases[Phase::kBackward], 100);
  // One optimizer update per op holding weights: 53 Conv + 1 Gemm.
  EXPECT_EQ(phases[Phase::kUpdate], 54);
}

// ---------------------------------------------------------------------------------------------
// Inline models with hand-computed costs.

TEST(OnnxImportTest, GroupedConvCountsTwoFlopsPerMultiplyAddPlusBias) {
  ModelBuilder m;
  m.input("x", {1, 4, 8, 8}).weight("w", {8, 2, 3, 3}).weight("b", {8});
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"y"});
  ModelBuilder::attr(conv, "group", 2);
  ModelBuilder::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.output("y");
  const LoadedGraph loaded = read_onnx_file(m.save("conv.onnx"), {});
  const Op& op = op_named(loaded.graph, "y");
  // Y [1,8,8,8] = 512 outputs, each (4/2)*3*3 = 18 multiply-adds, plus one bias add.
  EXPECT_DOUBLE_EQ(op.flops, 2.0 * 512 * 18 + 512);
  EXPECT_EQ(op.param_bytes, (8 * 2 * 3 * 3 + 8) * 4);
  EXPECT_EQ(op.output_bytes, std::vector<int64_t>{512 * 4});
  // Reads x, w and b; writes y.
  EXPECT_DOUBLE_EQ(op.bytes_accessed.value(), (256 + 144 + 8 + 512) * 4.0);
}

TEST(OnnxImportTest, BatchedMatMulAndTransposedGemm) {
  ModelBuilder m;
  m.input("a", {2, 3, 4, 5}).weight("b", {5, 6}).input("p", {5, 3}).weight("q", {5, 7});
  m.weight("c", {7});
  m.node("MatMul", {"a", "b"}, {"mm"});
  auto& gemm = m.node("Gemm", {"p", "q", "c"}, {"gm"});
  ModelBuilder::attr(gemm, "transA", 1);
  m.output("mm").output("gm");
  const LoadedGraph loaded = read_onnx_file(m.save("matmul.onnx"), {});
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "mm").flops, 2.0 * (2 * 3 * 4 * 6) * 5);
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "gm").flops, 2.0 * 3 * 7 * 5 + 3 * 7);
}

TEST(OnnxImportTest, PoolingCountsOneFlopPerWindowElement) {
  ModelBuilder m;
  m.input("x", {1, 2, 6, 6});
  auto& pool = m.node("MaxPool", {"x"}, {"y"});
  ModelBuilder::attr(pool, "kernel_shape", std::vector<int64_t>{3, 3});
  ModelBuilder::attr(pool, "strides", std::vector<int64_t>{3, 3});
  m.node("GlobalAveragePool", {"x"}, {"z"});
  m.output("y").output("z");
  const LoadedGraph loaded = read_onnx_file(m.save("pool.onnx"), {});
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "y").flops, 2.0 * 2 * 2 * 9);
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "z").flops, 2.0 * 36);
}

TEST(OnnxImportTest, UnnamedNodesRecordTheNamesOnnxruntimeGivesThem) {
  // onnxruntime turns Constant nodes into initializers before it numbers the others, so an
  // unnamed node after a Constant has another "<OpType>_<index>" in its profiles than in dplace.
  ModelBuilder b;
  b.input("x", {1, 8});
  ox::NodeProto& constant = b.node("Constant", {}, {"k"});
  constant.set_name("");
  auto* value = constant.add_attribute();
  value->set_name("value");
  value->set_type(ox::AttributeProto_AttributeType_TENSOR);
  value->mutable_t()->set_data_type(ox::TensorProto_DataType_FLOAT);
  value->mutable_t()->add_float_data(2.0F);
  b.node("Relu", {"x"}, {"r0"}).set_name("");
  b.node("Relu", {"r0"}, {"r1"}).set_name("");
  b.node("Mul", {"r1", "k"}, {"y"}, "scale");
  b.output("y");
  const Graph g = read_onnx_file(b.save("unnamed.onnx"), {}).graph;
  const auto ort_name = [&](const std::string& op) -> std::string {
    const Json& extra = g.op(*g.find_op(op)).extra;
    return extra.contains("onnxruntime_name") ? extra["onnxruntime_name"].get<std::string>() : "";
  };
  EXPECT_EQ(ort_name("Relu_1"), "Relu_0");
  EXPECT_EQ(ort_name("Relu_2"), "Relu_1");
  EXPECT_EQ(ort_name("scale"), "");  // a named node has its name in both
}

TEST(OnnxImportTest, ReshapeToAComputedShapeIsAnAliasWithAnInferredShape) {
  // y = Relu(Reshape(Relu(x), Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))): the target shape is
  // computed in the graph; folding evaluates it to [2, 12].
  ModelBuilder m;
  m.input("x", {-1, 3, 4}, "batch").int_constant("zero", {0}).int_constant("minus_one", {-1});
  m.node("Relu", {"x"}, {"r"});
  m.node("Shape", {"x"}, {"shape"});
  m.node("Gather", {"shape", "zero"}, {"first"});
  ModelBuilder::attr(m.node("Concat", {"first", "minus_one"}, {"target"}), "axis", int64_t{0});
  m.node("Reshape", {"r", "target"}, {"flat"});
  m.node("Relu", {"flat"}, {"y"});
  m.output("y");
  ImportOptions options;
  options.dims["batch"] = 2;
  const LoadedGraph loaded = read_onnx_file(m.save("reshape.onnx"), options);
  const Graph& g = loaded.graph;
  // x, r, y: Shape/Gather/Concat fold, Reshape is an alias.
  ASSERT_EQ(g.num_ops(), 3u);
  const Op& y = op_named(g, "y");
  ASSERT_EQ(y.inputs.size(), 1u);
  EXPECT_EQ(y.inputs[0].op, g.find_op("r").value());
  EXPECT_EQ(y.extra["output_shapes"], Json::parse("[[2, 12]]"));
  // The int64 initializers are shape constants, not weights: no parameter, no warning.
  EXPECT_EQ(g.total_param_bytes(), 0);
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings[0];
}

TEST(OnnxImportTest, SmallIntegerInitializersAreConstantsUnlessWeightSlotsReadThem) {
  // Exporters that fold constants store axes, starts and indices as initializers. They are not
  // weights: a ReduceMean-18 or Slice reading one has no parameter and, with --training, no
  // gradient or Adam update. Quantized weights are: an int8 matrix behind DequantizeLinear, a
  // QLinearMatMul's int8 B and its zero point.
  ModelBuilder m(18);
  m.input("x", {2, 8});
  m.int_constant("axes", {1}).int_constant("starts", {0}).int_constant("ends", {4});
  auto int8 = [&](const std::string& name, const std::vector<int64_t>& dims) {
    auto* t = m.proto().mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(ox::TensorProto_DataType_INT8);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    t->set_raw_data(std::string(static_cast<size_t>(n), '\x01'));
  };
  int8("w_q", {8, 4});
  int8("b_q", {8, 4});
  int8("b_zero", {});
  int8("a_zero", {});
  m.float_constant("scale", {0.5F});
  m.node("ReduceMean", {"x", "axes"}, {"mean"});
  m.node("Slice", {"x", "starts", "ends", "axes"}, {"slice"});
  m.node("DequantizeLinear", {"w_q", "scale"}, {"w"});
  m.node("MatMul", {"x", "w"}, {"mm"});
  m.node("QuantizeLinear", {"x", "scale", "a_zero"}, {"x_q"});
  m.node("QLinearMatMul", {"x_q", "scale", "a_zero", "b_q", "scale", "b_zero", "scale", "a_zero"},
         {"qmm"});
  m.output("mean").output("slice").output("mm").output("qmm");
  ImportOptions training;
  training.training = true;
  const LoadedGraph loaded = read_onnx_file(m.save("int_initializers.onnx"), training);
  const Graph& g = loaded.graph;
  for (const std::string& name : std::vector<std::string>{"mean", "slice"}) {
    EXPECT_EQ(op_named(g, name).param_bytes, 0) << name;
    EXPECT_FALSE(g.find_op("update/" + name).has_value()) << name;
  }
  EXPECT_EQ(op_named(g, "mm").param_bytes, 32 + 4);
  EXPECT_TRUE(g.find_op("update/mm").has_value());
  EXPECT_EQ(op_named(g, "qmm").param_bytes, 32 + 1);

  // A quantized bias dequantized into an Add (PyTorch's Linear as MatMul + Add), and a weight
  // shared by a weight slot and another reader, stay weights: some use reads them as weights.
  ModelBuilder q(17);
  q.input("x", {2, 8});
  auto* bias = q.proto().mutable_graph()->add_initializer();
  bias->set_name("bias_q");
  bias->set_data_type(ox::TensorProto_DataType_INT8);
  bias->add_dims(8);
  bias->set_raw_data(std::string(8, '\x01'));
  auto* shared = q.proto().mutable_graph()->add_initializer();
  shared->set_name("w_shared");
  shared->set_data_type(ox::TensorProto_DataType_INT8);
  shared->add_dims(8);
  shared->add_dims(8);
  shared->set_raw_data(std::string(64, '\x01'));
  q.float_constant("scale", {0.5F});
  q.node("DequantizeLinear", {"bias_q", "scale"}, {"bias"});
  q.node("Add", {"x", "bias"}, {"biased"});
  q.node("Cast", {"w_shared"}, {"w_float"});
  ModelBuilder::attr(q.node("Cast", {"x"}, {"x_int"}), "to",
                     int64_t{ox::TensorProto_DataType_INT8});
  q.node("MatMulInteger", {"x_int", "w_shared"}, {"mmi"});
  q.node("ReduceSum", {"w_float"}, {"w_sum"});  // another reader of the weight (folded)
  q.output("mmi").output("biased");
  const LoadedGraph quantized = read_onnx_file(q.save("quantized_bias.onnx"), {});
  EXPECT_EQ(quantized.graph.total_param_bytes(), 8 + 4 + 64);
}

TEST(OnnxImportTest, SharedWeightBehindIdentityIsChargedOnce) {
  ModelBuilder m;
  m.input("x", {4, 8}).weight("w", {8, 8});
  m.node("Identity", {"w"}, {"w_alias"});
  m.node("MatMul", {"x", "w"}, {"h"});
  m.node("MatMul", {"h", "w_alias"}, {"y"});
  m.output("y");
  const LoadedGraph loaded = read_onnx_file(m.save("shared.onnx"), {});
  EXPECT_EQ(op_named(loaded.graph, "h").param_bytes, 256);
  EXPECT_EQ(op_named(loaded.graph, "y").param_bytes, 0);
  EXPECT_EQ(loaded.graph.total_param_bytes(), 256);
  EXPECT_EQ(loaded.graph.num_ops(), 3u);
}

TEST(OnnxImportTest, LargeInlineWeightsReadWithoutTheirValues) {
  // 2048 x 1024 floats = 8 MiB stored inline; only dims and dtype matter.
  ModelBuilder m;
  m.input("x", {16, 2048}).weight("w", {2048, 1024}).weight("b", {1024});
  m.node("Gemm", {"x", "w", "b"}, {"y"});
  m.output("y");
  const std::string path = m.save("large.onnx");
  ASSERT_GT(std::filesystem::file_size(path), 8u << 20);
  const LoadedGraph loaded = read_onnx_file(path, {});
  const Op& y = op_named(loaded.graph, "y");
  EXPECT_EQ(y.param_bytes, (2048 * 1024 + 1024) * 4);
  EXPECT_DOUBLE_EQ(y.flops, 2.0 * 16 * 1024 * 2048 + 16 * 1024);
}

TEST(OnnxImportTest, ExternalWeightsWithAbsentFileRead) {
  ModelBuilder m;
  m.input("x", {2, 64}).weight("w", {64, 32}, /*external=*/true);
  m.node("MatMul", {"x", "w"}, {"y"});
  m.output("y");
  const LoadedGraph loaded = read_onnx_file(m.save("external.onnx"), {});
  EXPECT_EQ(loaded.graph.total_param_bytes(), 64 * 32 * 4);
}

TEST(OnnxImportTest, LargeConstantNodeIsAWeightAndSmallOneIsNot) {
  ModelBuilder m;
  m.input("x", {2, 64});
  auto& big = m.node("Constant", {}, {"w"});
  auto* value = big.add_attribute();
  value->set_name("value");
  value->set_type(ox::AttributeProto_AttributeType_TENSOR);
  value->mutable_t()->set_data_type(ox::TensorProto_DataType_FLOAT);
  value->mutable_t()->add_dims(64);
  value->mutable_t()->add_dims(64);
  value->mutable_t()->set_raw_data(std::string(64 * 64 * 4, '\x02'));
  auto& small = m.node("Constant", {}, {"two"});
  auto* scalar = small.add_attribute();
  scalar->set_name("value_float");
  scalar->set_type(ox::AttributeProto_AttributeType_FLOAT);
  scalar->set_f(2.0f);
  m.node("MatMul", {"x", "w"}, {"h"});
  m.node("Mul", {"h", "two"}, {"y"});
  m.output("y");
  const LoadedGraph loaded = read_onnx_file(m.save("constant.onnx"), {});
  EXPECT_EQ(op_named(loaded.graph, "h").param_bytes, 64 * 64 * 4);
  EXPECT_EQ(op_named(loaded.graph, "y").param_bytes, 0);
  EXPECT_EQ(loaded.graph.num_ops(), 3u);
}

TEST(OnnxImportTest, GeluWithoutSchemaKeepsItsInputShape) {
  // Gelu is in ONNX opset 20; this libonnx stops earlier, so it has no schema here.
  ModelBuilder m(20);
  m.input("x", {3, 10});
  m.node("Gelu", {"x"}, {"g"});
  m.node("Relu", {"g"}, {"y"});
  m.output("y");
  const LoadedGraph loaded = read_onnx_file(m.save("gelu.onnx"), {});
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "g").flops, 5.0 * 30);
  EXPECT_EQ(op_named(loaded.graph, "y").output_bytes[0], 120);
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_NE(loaded.warnings[0].find("opset 20"), std::string::npos) << loaded.warnings[0];
}

// ---------------------------------------------------------------------------------------------
// Opsets newer than this libonnx (17): ops whose signature changed and ops added since.

Json output_shapes(const Graph& g, const std::string& op) {
  return op_named(g, op).extra["output_shapes"];
}

TEST(OnnxImportTest, Opset18ReduceOpsTakeTheirAxesAsAnInput) {
  ModelBuilder m(18);
  m.input("x", {2, 3, 4});
  m.int_constant("axis1", {1});
  m.int_constant("last", {-1});
  m.node("ReduceMean", {"x", "axis1"}, {"mean"});
  m.node("ReduceMax", {"x"}, {"max_all"});
  auto& sq = m.node("ReduceSumSquare", {"x", "last"}, {"sumsq"});
  ModelBuilder::attr(sq, "keepdims", int64_t{0});
  auto& noop = m.node("ReduceL2", {"x"}, {"noop"});
  ModelBuilder::attr(noop, "noop_with_empty_axes", int64_t{1});
  for (const char* out : {"mean", "max_all", "sumsq", "noop"}) m.output(out);
  const LoadedGraph loaded = read_onnx_file(m.save("reduce18.onnx"), {});
  EXPECT_EQ(output_shapes(loaded.graph, "mean"), Json::parse("[[2, 1, 4]]"));
  EXPECT_EQ(output_shapes(loaded.graph, "max_all"), Json::parse("[[1, 1, 1]]"));
  EXPECT_EQ(output_shapes(loaded.graph, "sumsq"), Json::parse("[[2, 3]]"));
  EXPECT_EQ(output_shapes(loaded.graph, "noop"), Json::parse("[[2, 3, 4]]"));
  EXPECT_EQ(op_named(loaded.graph, "mean").output_bytes[0], 8 * 4);
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "mean").flops, 24);
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "sumsq").flops, 48);
}

TEST(OnnxImportTest, Opset18ReduceWithAxesComputedAtRunTimeNamesTheNode) {
  ModelBuilder m(18);
  m.input("x", {2, 3});
  m.input("axes", {1}, "", ox::TensorProto_DataType_INT64);
  m.node("ReduceMean", {"x", "axes"}, {"y"}, "mean");
  m.output("y");
  std::string e = error_of(m.save("reduce18_runtime_axes.onnx"));
  EXPECT_NE(e.find("node 'mean' (ReduceMean): output 'y'"), std::string::npos) << e;
  EXPECT_NE(e.find("its axes (input 1) are not constant"), std::string::npos) << e;
}

TEST(OnnxImportTest, Opset18SplitByNumOutputsMakesTheLastChunkSmaller) {
  ModelBuilder m(18);
  m.input("x", {10, 4});
  auto& split = m.node("Split", {"x"}, {"a", "b", "c"}, "split");
  ModelBuilder::attr(split, "num_outputs", int64_t{3});
  m.node("Relu", {"c"}, {"y"});
  m.output("a").output("b").output("y");
  const LoadedGraph loaded = read_onnx_file(m.save("split18.onnx"), {});
  EXPECT_EQ(output_shapes(loaded.graph, "split"), Json::parse("[[4, 4], [4, 4], [2, 4]]"));
  EXPECT_EQ(op_named(loaded.graph, "y").output_bytes[0], 2 * 4 * 4);

  ModelBuilder bad(18);
  bad.input("x", {10, 4});
  auto& two = bad.node("Split", {"x"}, {"a", "b", "c"}, "split");
  ModelBuilder::attr(two, "num_outputs", int64_t{2});
  bad.output("a");
  std::string e = error_of(bad.save("split18_bad.onnx"));
  EXPECT_NE(e.find("node 'split' (Split): output 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("attribute 'num_outputs' is 2 but the node has 3 outputs"), std::string::npos)
      << e;
}

TEST(OnnxImportTest, Opset18PadAndResizeOnSomeAxes) {
  ModelBuilder m(19);
  m.input("x", {1, 3, 10, 20});
  m.int_constant("pads", {1, 2});
  m.int_constant("last", {-1});
  m.int_constant("sizes", {30, 30});
  m.float_constant("scales", {2.0F, 0.5F});
  m.node("Pad", {"x", "pads", "", "last"}, {"padded"});
  auto& fit = m.node("Resize", {"x", "", "", "sizes"}, {"fit"});
  ModelBuilder::attr(fit, "axes", std::vector<int64_t>{2, 3});
  ModelBuilder::attr(fit, "keep_aspect_ratio_policy", std::string("not_larger"));
  ModelBuilder::attr(fit, "mode", std::string("linear"));
  auto& scaled = m.node("Resize", {"x", "", "scales"}, {"scaled"});
  ModelBuilder::attr(scaled, "axes", std::vector<int64_t>{-2, -1});
  ModelBuilder::attr(scaled, "antialias", int64_t{1});
  m.output("padded").output("fit").output("scaled");
  const LoadedGraph loaded = read_onnx_file(m.save("pad_resize18.onnx"), {});
  EXPECT_EQ(output_shapes(loaded.graph, "padded"), Json::parse("[[1, 3, 10, 23]]"));
  // not_larger: both axes scale by min(30 / 10, 30 / 20) = 1.5.
  EXPECT_EQ(output_shapes(loaded.graph, "fit"), Json::parse("[[1, 3, 15, 30]]"));
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "fit").flops, 3.0 * 2 * (3 * 15 * 30));
  EXPECT_EQ(output_shapes(loaded.graph, "scaled"), Json::parse("[[1, 3, 20, 10]]"));
}

TEST(OnnxImportTest, Opset19PoolingWithDilationsAndCeilMode) {
  ModelBuilder m(19);
  m.input("x", {1, 2, 10, 10});
  m.input("z", {1, 1, 3});
  auto& dilated = m.node("AveragePool", {"x"}, {"dilated"});
  ModelBuilder::attr(dilated, "kernel_shape", std::vector<int64_t>{3, 3});
  ModelBuilder::attr(dilated, "dilations", std::vector<int64_t>{2, 2});
  // A 1-wide window at stride 2 over 3 values padded by one at the end: ceil mode's third window
  // would start in the padding, so there are two.
  auto& ceil = m.node("LpPool", {"z"}, {"ceil"});
  ModelBuilder::attr(ceil, "kernel_shape", std::vector<int64_t>{1});
  ModelBuilder::attr(ceil, "strides", std::vector<int64_t>{2});
  ModelBuilder::attr(ceil, "pads", std::vector<int64_t>{0, 1});
  ModelBuilder::attr(ceil, "ceil_mode", int64_t{1});
  auto& same = m.node("AveragePool", {"x"}, {"same"});
  ModelBuilder::attr(same, "kernel_shape", std::vector<int64_t>{3, 3});
  ModelBuilder::attr(same, "strides", std::vector<int64_t>{3, 3});
  ModelBuilder::attr(same, "auto_pad", std::string("SAME_UPPER"));
  m.output("dilated").output("ceil").output("same");
  const LoadedGraph loaded = read_onnx_file(m.save("pool19.onnx"), {});
  // The dilated window spans 5: 10 - 5 + 1 = 6 positions per axis.
  EXPECT_EQ(output_shapes(loaded.graph, "dilated"), Json::parse("[[1, 2, 6, 6]]"));
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "dilated").flops, 2.0 * 36 * 9);
  EXPECT_EQ(output_shapes(loaded.graph, "ceil"), Json::parse("[[1, 1, 2]]"));
  EXPECT_EQ(output_shapes(loaded.graph, "same"), Json::parse("[[1, 2, 4, 4]]"));
}

TEST(OnnxImportTest, Opset21CastAndBlockQuantizationTypes) {
  ModelBuilder m(21);
  m.input("x", {4, 8});
  m.float_constant("scale", {0.5F});
  auto& half = m.node("Cast", {"x"}, {"half"});
  ModelBuilder::attr(half, "to", int64_t{ox::TensorProto_DataType_FLOAT16});
  ModelBuilder::attr(half, "saturate", int64_t{1});
  auto& q = m.node("QuantizeLinear", {"x", "scale"}, {"q4"});
  ModelBuilder::attr(q, "output_dtype", int64_t{22});  // INT4
  m.node("DequantizeLinear", {"q4", "scale"}, {"dq"});
  m.output("half").output("dq");
  const LoadedGraph loaded = read_onnx_file(m.save("quant21.onnx"), {});
  EXPECT_EQ(op_named(loaded.graph, "half").output_bytes[0], 32 * 2);
  EXPECT_EQ(op_named(loaded.graph, "q4").output_bytes[0], 16);  // 32 four-bit values
  EXPECT_EQ(op_named(loaded.graph, "dq").output_bytes[0], 32 * 4);
}

TEST(OnnxImportTest, AFourBitWeightCountsHalfAByteAnElement) {
  ModelBuilder m(21);
  m.input("x", {2, 4});
  auto* w = m.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(22);  // INT4: 4 x 7 values in 14 bytes
  w->add_dims(4);
  w->add_dims(7);
  w->set_raw_data(std::string(14, '\x11'));
  m.float_constant("scale", {0.5F});
  m.node("DequantizeLinear", {"w", "scale"}, {"w_float"});
  m.node("MatMul", {"x", "w_float"}, {"y"}, "matmul");
  m.output("y");
  const LoadedGraph loaded = read_onnx_file(m.save("int4_weight.onnx"), {});
  EXPECT_EQ(op_named(loaded.graph, "matmul").param_bytes, 14 + 4);
  EXPECT_EQ(output_shapes(loaded.graph, "matmul"), Json::parse("[[2, 7]]"));
}

TEST(OnnxImportTest, OpsAddedAfterOpset17HaveShapesAndCosts) {
  ModelBuilder m(23);
  m.input("x", {2, 8, 16});
  m.weight("gamma", {16});
  m.input("cos", {8, 8});
  m.input("sin", {8, 8});
  m.input("q", {2, 4, 8, 16});
  m.input("k", {2, 4, 10, 16});
  m.input("v", {2, 4, 10, 32});
  m.input("q3", {2, 8, 64});
  m.input("k3", {2, 10, 32});
  m.input("v3", {2, 10, 32});
  m.input("past_k", {2, 2, 5, 16});
  m.input("past_v", {2, 2, 5, 16});
  m.input("bits_a", {3, 1}, "", ox::TensorProto_DataType_INT32);
  m.input("bits_b", {4}, "", ox::TensorProto_DataType_INT32);
  m.node("RMSNormalization", {"x", "gamma"}, {"rms"});
  m.node("RotaryEmbedding", {"rms", "cos", "sin"}, {"rope"});
  m.node("Attention", {"q", "k", "v"}, {"att"});
  auto& gqa = m.node("Attention", {"q3", "k3", "v3", "", "past_k", "past_v"},
                     {"att3", "present_k", "present_v"}, "gqa");
  ModelBuilder::attr(gqa, "q_num_heads", int64_t{4});
  ModelBuilder::attr(gqa, "kv_num_heads", int64_t{2});
  ModelBuilder::attr(gqa, "is_causal", int64_t{1});
  m.node("BitwiseAnd", {"bits_a", "bits_b"}, {"bits"});
  for (const char* out : {"rope", "att", "att3", "present_k", "present_v", "bits"}) m.output(out);
  const LoadedGraph loaded = read_onnx_file(m.save("opset23.onnx"), {});
  for (const std::string& warning : loaded.warnings) {
    EXPECT_EQ(warning.find("no cost formula"), std::string::npos) << warning;
  }
  EXPECT_EQ(output_shapes(loaded.graph, "rms"), Json::parse("[[2, 8, 16]]"));
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "rms").flops, 4.0 * 256);
  EXPECT_EQ(op_named(loaded.graph, "rms").param_bytes, 16 * 4);
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "rope").flops, 3.0 * 256);
  EXPECT_EQ(output_shapes(loaded.graph, "att"), Json::parse("[[2, 4, 8, 32]]"));
  const double scores = 2.0 * 4 * 8 * 10;
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "att").flops, 2 * scores * (16 + 32) + 6 * scores);
  // 3-D: 4 query heads of 16, 2 key/value heads of 16, 5 past positions and 10 new ones.
  EXPECT_EQ(output_shapes(loaded.graph, "gqa"),
            Json::parse("[[2, 8, 64], [2, 2, 15, 16], [2, 2, 15, 16]]"));
  const double gqa_scores = 2.0 * 4 * 8 * 15;
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "gqa").flops,
                   2 * gqa_scores * (16 + 16) + 7 * gqa_scores);
  EXPECT_EQ(output_shapes(loaded.graph, "bits"), Json::parse("[[3, 4]]"));
  // Attention-23's K is data, not a weight (onnxruntime's Attention takes weights in that slot).
  EXPECT_EQ(op_named(loaded.graph, "k").type, "Input");
}

TEST(OnnxImportTest, OnnxruntimeContribOpsHaveShapesAndCosts) {
  ModelBuilder m(17);
  auto* ms = m.proto().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto microsoft = [&](const std::string& op, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& outputs) -> ox::NodeProto& {
    ox::NodeProto& n = m.node(op, inputs, outputs);
    n.set_domain("com.microsoft");
    return n;
  };
  m.input("ids", {2, 8}, "", ox::TensorProto_DataType_INT64);
  m.weight("words", {100, 16}).weight("positions", {32, 16}).weight("gamma", {16});
  m.weight("beta", {16}).weight("w_qkv", {16, 48}).weight("b_qkv", {48});
  m.weight("gamma2", {16}).weight("beta2", {16}).weight("bias2", {16}).weight("scales", {32});
  auto* packed =
      m.proto().mutable_graph()->add_initializer();  // 4-bit (32, 16) weight, 8 bytes/row
  packed->set_name("w4");
  packed->set_data_type(ox::TensorProto_DataType_UINT8);
  for (int64_t d : {32, 1, 8}) packed->add_dims(d);
  packed->set_raw_data(std::string(32 * 8, '\x11'));
  m.input("q", {2, 8, 64});
  m.input("kv_k", {2, 8, 32});
  m.input("kv_v", {2, 8, 32});
  m.input("cache_k", {2, 2, 20, 16});
  m.input("cache_v", {2, 2, 20, 16});
  m.input("k10", {2, 10, 64});
  m.input("v10", {2, 10, 64});
  microsoft("EmbedLayerNormalization", {"ids", "", "words", "positions", "", "gamma", "beta"},
            {"emb", "mask_index"});
  ModelBuilder::attr(microsoft("Attention", {"emb", "w_qkv", "b_qkv"}, {"att"}), "num_heads",
                     int64_t{4});
  microsoft("SkipLayerNormalization", {"att", "emb", "gamma2", "beta2", "bias2"},
            {"sln", "", "", "residual"});
  auto& nbits = microsoft("MatMulNBits", {"sln", "w4", "scales"}, {"proj"});
  for (const auto& [name, value] : std::vector<std::pair<std::string, int64_t>>{
           {"K", 16}, {"N", 32}, {"bits", 4}, {"block_size", 16}}) {
    ModelBuilder::attr(nbits, name, value);
  }
  m.input("seqlens", {2}, "", ox::TensorProto_DataType_INT32);
  m.int_constant("total", {24});
  auto& gqa = microsoft("GroupQueryAttention",
                        {"q", "kv_k", "kv_v", "cache_k", "cache_v", "seqlens", "total"},
                        {"gqa", "present_k", "present_v"});
  ModelBuilder::attr(gqa, "num_heads", int64_t{4});
  ModelBuilder::attr(gqa, "kv_num_heads", int64_t{2});
  auto& mha = microsoft("MultiHeadAttention", {"q", "k10", "v10"}, {"mha", "mha_k", "mha_v", "qk"});
  ModelBuilder::attr(mha, "num_heads", int64_t{4});
  m.node("SimplifiedLayerNormalization", {"mha", "gamma_64"}, {"rms"});
  m.weight("gamma_64", {64}).weight("bias_64", {64});
  microsoft("SkipSimplifiedLayerNormalization", {"rms", "q", "gamma_64", "bias_64"}, {"skip_rms"});
  for (const char* out : {"mask_index", "residual", "proj", "present_k", "present_v", "mha_k",
                          "mha_v", "qk", "skip_rms"}) {
    m.output(out);
  }
  const LoadedGraph loaded = read_onnx_file(m.save("contrib.onnx"), {});
  for (const std::string& warning : loaded.warnings) {
    EXPECT_EQ(warning.find("no cost formula"), std::string::npos) << warning;
  }
  const Graph& g = loaded.graph;
  EXPECT_EQ(output_shapes(g, "emb"), Json::parse("[[2, 8, 16], [2]]"));
  EXPECT_EQ(op_named(g, "emb").param_bytes, (100 * 16 + 32 * 16 + 16 + 16) * 4);
  EXPECT_DOUBLE_EQ(op_named(g, "emb").flops, 8.0 * 256);  // two rows added, then 7 a value
  EXPECT_EQ(output_shapes(g, "att"), Json::parse("[[2, 8, 16]]"));
  // Projection 2 x 16 rows x 16 x 48 and its bias, then 2 x 4 heads x 8 x 8 scores of head size 4.
  EXPECT_DOUBLE_EQ(op_named(g, "att").flops,
                   2.0 * 16 * 16 * 48 + 16 * 48 + 2 * 512 * (4 + 4) + 6 * 512);
  EXPECT_EQ(op_named(g, "att").param_bytes, (16 * 48 + 48) * 4);
  EXPECT_EQ(output_shapes(g, "sln"), Json::parse("[[2, 8, 16], null, null, [2, 8, 16]]"));
  EXPECT_DOUBLE_EQ(op_named(g, "sln").flops, 9.0 * 256);
  EXPECT_EQ(output_shapes(g, "proj"), Json::parse("[[2, 8, 32]]"));
  EXPECT_DOUBLE_EQ(op_named(g, "proj").flops, 2.0 * 16 * 32 * 16 + 2 * 32 * 16);
  EXPECT_EQ(op_named(g, "proj").param_bytes, 32 * 8 + 32 * 4);
  // The caches hold max(past 20, total_sequence_length 24) positions, all scored.
  EXPECT_EQ(output_shapes(g, "gqa"), Json::parse("[[2, 8, 64], [2, 2, 24, 16], [2, 2, 24, 16]]"));
  const double gqa_scores = 2.0 * 4 * 8 * 24;
  EXPECT_DOUBLE_EQ(op_named(g, "gqa").flops, 2 * gqa_scores * 32 + 7 * gqa_scores);
  EXPECT_EQ(output_shapes(g, "mha"),
            Json::parse("[[2, 8, 64], [2, 4, 10, 16], [2, 4, 10, 16], [2, 4, 8, 10]]"));
  const double mha_scores = 2.0 * 4 * 8 * 10;
  EXPECT_DOUBLE_EQ(op_named(g, "mha").flops, 2 * mha_scores * 32 + 6 * mha_scores);
  EXPECT_EQ(output_shapes(g, "rms"), Json::parse("[[2, 8, 64]]"));
  EXPECT_DOUBLE_EQ(op_named(g, "rms").flops, 4.0 * 1024);
  // RMS normalisation (4), the skip addition and the bias (input 3 of this op).
  EXPECT_DOUBLE_EQ(op_named(g, "skip_rms").flops, 6.0 * 1024);
  EXPECT_EQ(op_named(g, "skip_rms").param_bytes, 64 * 4);
}

TEST(OnnxImportTest, HostileSizesInNewerOpsAreErrorsNotOverflows) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  auto error_with = [](const std::function<void(ModelBuilder&)>& build) {
    ModelBuilder m(19);
    m.input("x", {1, 1, 8});
    build(m);
    m.output("y");
    return error_of(m.save("hostile19.onnx"));
  };
  std::string pad = error_with([&](ModelBuilder& m) {
    m.int_constant("pads", {kMax, kMax});
    m.int_constant("last", {-1});
    m.node("Pad", {"x", "pads", "", "last"}, {"y"}, "pad");
  });
  EXPECT_NE(pad.find("node 'pad' (Pad): output 'y'"), std::string::npos) << pad;
  EXPECT_NE(pad.find("overflow"), std::string::npos) << pad;
  std::string pool = error_with([&](ModelBuilder& m) {
    auto& n = m.node("AveragePool", {"x"}, {"y"}, "pool");
    ModelBuilder::attr(n, "kernel_shape", std::vector<int64_t>{int64_t{1} << 62});
    ModelBuilder::attr(n, "dilations", std::vector<int64_t>{4});
  });
  EXPECT_NE(pool.find("overflow"), std::string::npos) << pool;
  // (kernel - 1) x dilation is the largest int64; the window, one more, is not.
  std::string window = error_with([&](ModelBuilder& m) {
    auto& n = m.node("AveragePool", {"x"}, {"y"}, "pool");
    ModelBuilder::attr(n, "kernel_shape", std::vector<int64_t>{2});
    ModelBuilder::attr(n, "dilations", std::vector<int64_t>{kMax});
  });
  EXPECT_NE(window.find("overflow"), std::string::npos) << window;
  std::string split = error_with([&](ModelBuilder& m) {
    m.int_constant("sizes", {kMax, kMax});
    auto& n = m.node("Split", {"x", "sizes"}, {"y", "z"}, "split");
    ModelBuilder::attr(n, "axis", int64_t{-1});
  });
  EXPECT_NE(split.find("overflow"), std::string::npos) << split;
  std::string reduce = error_with([&](ModelBuilder& m) {
    m.int_constant("axes", {3});
    m.node("ReduceMean", {"x", "axes"}, {"y"}, "mean");
  });
  EXPECT_NE(reduce.find("axis 3 is out of range for rank 3"), std::string::npos) << reduce;
}

TEST(OnnxImportTest, NewerOpsAreCheckedAsLibonnxChecksTheOpsItKnows) {
  auto error_with = [](int opset, const std::function<void(ModelBuilder&)>& build) {
    ModelBuilder m(opset);
    m.input("x", {2, 3, 4});
    build(m);
    m.output("y");
    return error_of(m.save("checked.onnx"));
  };
  // ReduceMean-13's axes attribute is not ReduceMean-18's: it is refused, not read as "no axes".
  std::string old_axes = error_with(18, [](ModelBuilder& m) {
    ModelBuilder::attr(m.node("ReduceMean", {"x"}, {"y"}, "mean"), "axes", std::vector<int64_t>{1});
  });
  EXPECT_NE(old_axes.find("node 'mean' (ReduceMean): output 'y'"), std::string::npos) << old_axes;
  EXPECT_NE(old_axes.find("attribute 'axes' is not one of ReduceMean-18's"), std::string::npos)
      << old_axes;
  std::string no_scale =
      error_with(19, [](ModelBuilder& m) { m.node("QuantizeLinear", {"x"}, {"y"}, "quantize"); });
  EXPECT_NE(no_scale.find("it has 1 inputs; QuantizeLinear-19 takes 2 to 3"), std::string::npos)
      << no_scale;
  std::string bad_type = error_with(19, [](ModelBuilder& m) {
    ModelBuilder::attr(m.node("Cast", {"x"}, {"y"}, "cast"), "to", int64_t{999});
  });
  EXPECT_NE(bad_type.find("element type 999 is not an ONNX tensor type"), std::string::npos)
      << bad_type;
  std::string both = error_with(18, [](ModelBuilder& m) {
    m.int_constant("sizes", {1, 1});
    auto& n = m.node("Split", {"x", "sizes"}, {"y", "z"}, "split");
    ModelBuilder::attr(n, "num_outputs", int64_t{2});
  });
  EXPECT_NE(both.find("both split sizes (input 1) and attribute 'num_outputs'"), std::string::npos)
      << both;
  EXPECT_NE(both.find("dplace's rule for opset 18"), std::string::npos) << both;
}

TEST(OnnxImportTest, Opset18ResizeScalesInSinglePrecisionAsOnnxDoes) {
  // floor(10 * 0.7f) is 7 in float (ONNX's inference, and libonnx at opset 17) but 6 in double.
  for (int opset : {17, 18}) {
    ModelBuilder m(opset);
    m.input("x", {1, 1, 10, 10});
    m.float_constant("scales", {1.0F, 1.0F, 0.7F, 0.9F});
    m.node("Resize", {"x", "", "scales"}, {"y"}, "resize");
    m.output("y");
    const LoadedGraph loaded = read_onnx_file(m.save("resize_float.onnx"), {});
    EXPECT_EQ(output_shapes(loaded.graph, "resize"), Json::parse("[[1, 1, 7, 9]]")) << opset;
  }
  ModelBuilder huge(18);
  huge.input("x", {1, 1, 1, 1});
  huge.int_constant("sizes", {std::numeric_limits<int64_t>::max(), 1});
  auto& n = huge.node("Resize", {"x", "", "", "sizes"}, {"y"}, "resize");
  ModelBuilder::attr(n, "axes", std::vector<int64_t>{2, 3});
  ModelBuilder::attr(n, "keep_aspect_ratio_policy", std::string("not_smaller"));
  huge.output("y");
  std::string e = error_of(huge.save("resize_huge.onnx"));
  EXPECT_NE(e.find("is not a positive size factor"), std::string::npos) << e;
}

TEST(OnnxImportTest, Opset23AttentionCachesKeepTheirOwnTypes) {
  ModelBuilder m(23);
  m.input("q", {1, 2, 4, 8}, "", ox::TensorProto_DataType_FLOAT16);
  m.input("k", {1, 2, 6, 8}, "", ox::TensorProto_DataType_FLOAT16);
  m.input("v", {1, 2, 6, 8});  // float
  m.node("Attention", {"q", "k", "v"}, {"y", "present_k", "present_v"}, "att");
  m.output("y").output("present_k").output("present_v");
  const LoadedGraph loaded = read_onnx_file(m.save("attention_types.onnx"), {});
  const Op& att = op_named(loaded.graph, "att");
  EXPECT_EQ(att.output_bytes[0], 1 * 2 * 4 * 8 * 2);
  EXPECT_EQ(att.output_bytes[1], 1 * 2 * 6 * 8 * 2);
  EXPECT_EQ(att.output_bytes[2], 1 * 2 * 6 * 8 * 4);
}

TEST(OnnxImportTest, ContribOpShapedByValueInfoAloneIsCostedSafely) {
  // The rule refuses a rank-2 value; the model's value_info gives the output a rank-2 shape that
  // the attention formula must not index as rank 3.
  ModelBuilder m(17);
  auto* ms = m.proto().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  m.input("q", {2, 8, 64}).input("k", {2, 10, 64}).input("v", {2, 640});
  auto& mha = m.node("MultiHeadAttention", {"q", "k", "v"}, {"y"}, "mha");
  mha.set_domain("com.microsoft");
  ModelBuilder::attr(mha, "num_heads", int64_t{4});
  auto* declared = m.proto().mutable_graph()->add_value_info();
  declared->set_name("y");
  declared->mutable_type()->mutable_tensor_type()->set_elem_type(ox::TensorProto_DataType_FLOAT);
  for (int64_t d : {16, 64}) {
    declared->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  }
  m.output("y");
  const LoadedGraph loaded = read_onnx_file(m.save("mha_declared.onnx"), {});
  EXPECT_EQ(output_shapes(loaded.graph, "mha"), Json::parse("[[16, 64]]"));
  EXPECT_EQ(op_named(loaded.graph, "mha").flops, 0);
}

TEST(OnnxImportTest, ExportedModelsRewrittenInOpset19FormImportIdentically) {
  // The fixtures (opset 14 and 17) rewritten as an opset-19 exporter writes them: Reduce axes move
  // from an attribute to an input, the opset rises to 19 (Pad, Resize, Split, AveragePool and Cast
  // are then read by dplace's rules). Every op must come out the same, except that a Reduce op
  // now reads its axes tensor too.
  for (const std::string model : {"transformer_encoder", "inception_v3", "op_mix"}) {
    const std::string file =
        kOnnxDir + "/" + expected()["models"][model]["file"].get<std::string>();
    ox::ModelProto proto;
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(proto.ParseFromIstream(&in)) << file;
    int rewritten = 0;
    for (auto& o : *proto.mutable_opset_import()) {
      if (o.domain().empty()) o.set_version(19);
    }
    auto* graph = proto.mutable_graph();
    std::vector<ox::NodeProto> constants;
    std::map<std::string, double> axes_bytes;  // the axes input the rewritten node now reads
    for (auto& node : *graph->mutable_node()) {
      if (node.op_type().rfind("Reduce", 0) != 0 || node.op_type() == "ReduceSum") continue;
      for (int i = 0; i < node.attribute_size(); ++i) {
        if (node.attribute(i).name() != "axes") continue;
        // A small Constant node, as the exporters write shape constants (not a weight).
        ox::NodeProto constant;
        constant.set_op_type("Constant");
        constant.add_output(node.name() + "_axes");
        auto* value = constant.add_attribute();
        value->set_name("value");
        value->set_type(ox::AttributeProto_AttributeType_TENSOR);
        value->mutable_t()->set_data_type(ox::TensorProto_DataType_INT64);
        value->mutable_t()->add_dims(node.attribute(i).ints_size());
        for (int64_t a : node.attribute(i).ints()) value->mutable_t()->add_int64_data(a);
        axes_bytes[node.name()] = 8.0 * node.attribute(i).ints_size();
        node.add_input(constant.output(0));
        node.mutable_attribute()->DeleteSubrange(i, 1);
        constants.push_back(std::move(constant));
        ++rewritten;
        break;
      }
    }
    for (ox::NodeProto& constant : constants) *graph->add_node() = std::move(constant);
    const std::string upgraded = scratch_path(model + "_opset19.onnx");
    std::ofstream out(upgraded, std::ios::binary);
    ASSERT_TRUE(proto.SerializeToOstream(&out));
    out.close();
    const LoadedGraph before = load_fixture(model);
    const LoadedGraph after = read_onnx_file(upgraded, dims_of(model));
    ASSERT_EQ(before.graph.num_ops(), after.graph.num_ops()) << model;
    for (const Op& a : before.graph.ops()) {
      const Op& b = op_named(after.graph, a.name);
      EXPECT_EQ(a.flops, b.flops) << model << " " << a.name;
      EXPECT_EQ(a.bytes_accessed.value_or(-1) + axes_bytes[a.name], b.bytes_accessed.value_or(-1))
          << model << " " << a.name;
      EXPECT_EQ(a.output_bytes, b.output_bytes) << model << " " << a.name;
      EXPECT_EQ(a.param_bytes, b.param_bytes) << model << " " << a.name;
      EXPECT_EQ(a.extra, b.extra) << model << " " << a.name;
    }
    if (model == "transformer_encoder") {
      EXPECT_EQ(rewritten, 8);
    }
  }
}

TEST(OnnxImportTest, ModelsUpToOpset17KeepLibonnxsOwnDefinitions) {
  // At opset 17 ReduceMean's axes are an attribute and a second input is a malformed node.
  ModelBuilder m(17);
  m.input("x", {2, 3});
  m.int_constant("axes", {1});
  m.node("ReduceMean", {"x", "axes"}, {"y"}, "mean");
  m.output("y");
  std::string e = error_of(m.save("reduce17_two_inputs.onnx"));
  EXPECT_NE(e.find("node 'mean' (ReduceMean): output 'y'"), std::string::npos) << e;
}

// ---------------------------------------------------------------------------------------------
// Malformed input: exit status 2 (FormatError) or a warning, with a message; never a crash.

TEST(OnnxImportTest, TruncatedFileIsAFormatErrorNamingTheFile) {
  std::string e = error_of(kOnnxDir + "/malformed_truncated.onnx");
  EXPECT_NE(e.find("malformed_truncated.onnx: not a valid ONNX model (truncated or not protobuf)"),
            std::string::npos)
      << e;
}

TEST(OnnxImportTest, EveryTruncationOfAModelIsAOneLineFormatError) {
  std::ifstream in(kOnnxDir + "/unknown_op.onnx", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = temp_path("cut.onnx");
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, cut);
    try {
      read_onnx_file(path, {});
      ADD_FAILURE() << "a model cut at byte " << cut << " read without error";
    } catch (const FormatError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
}

TEST(OnnxImportTest, NonProtobufBytesAreAFormatError) {
  std::string e = error_of(kOnnxDir + "/malformed_not_protobuf.onnx");
  EXPECT_NE(e.find("malformed_not_protobuf.onnx: not a valid ONNX model"), std::string::npos) << e;
}

TEST(OnnxImportTest, UninferableShapeNamesTheNodeAndOutput) {
  std::string e = error_of(kOnnxDir + "/malformed_missing_shapes.onnx");
  EXPECT_NE(e.find("node 'reshape_dynamic' (Reshape): output 'y': its shape could not be inferred"),
            std::string::npos)
      << e;
}

TEST(OnnxImportTest, UnsetDynamicDimNamesItAndTheFlag) {
  std::string e = error_of(kOnnxDir + "/resnet50.onnx");
  EXPECT_NE(e.find("resnet50.onnx: input 'input': dynamic dimension batch is not set; give it "
                   "with --dim batch=N"),
            std::string::npos)
      << e;
}

TEST(OnnxImportTest, UnnamedDynamicDimIsSetByInputAndAxis) {
  std::string e = error_of(kOnnxDir + "/unnamed_dim.onnx");
  EXPECT_NE(e.find("--dim x:0=N"), std::string::npos) << e;
  ImportOptions options;
  options.dims["x:0"] = 5;
  const LoadedGraph loaded = read_onnx_file(kOnnxDir + "/unnamed_dim.onnx", options);
  EXPECT_EQ(op_named(loaded.graph, "x").output_bytes[0], 5 * 8 * 4);
}

TEST(OnnxImportTest, HugeDimensionIsAnErrorNotAnOverflow) {
  // 2^62 x 8 floats used to wrap int64 to a negative byte count.
  ImportOptions options;
  options.dims["x:0"] = int64_t{1} << 62;
  EXPECT_EQ(error_of(kOnnxDir + "/unnamed_dim.onnx", options),
            kOnnxDir +
                "/unnamed_dim.onnx: graph input 'x': shape [4611686018427387904, 8] would take "
                "1.48e+20 bytes, more than 2^50; are the dimensions (or --dim) right?");
}

// Constant folding reads shapes and indices from the file: hostile values must neither overflow
// nor index out of bounds (each case was undefined behaviour found by fuzzing under ASan/UBSan).
// A node the folder cannot evaluate is left to shape inference, which may reject it.
TEST(OnnxImportTest, FoldingHostileShapesAndIndicesIsSafe) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  auto import = [](ModelBuilder& m, const std::string& name) {
    const std::string path = m.save(name);
    try {
      return fmt::format("ops {}", read_onnx_file(path, {}).graph.num_ops());
    } catch (const FormatError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      return std::string("error");
    }
  };
  {  // Transpose whose perm repeats an axis read past the folded tensor.
    ModelBuilder m;
    m.int_constant("c", {1, 2, 3, 4, 5, 6});
    m.int_constant("shape", {2, 3});
    m.node("Reshape", {"c", "shape"}, {"r"});
    ModelBuilder::attr(m.node("Transpose", {"r"}, {"t"}), "perm", std::vector<int64_t>{1, 1});
    m.output("t");
    import(m, "transpose_dup_perm.onnx");
  }
  for (const int64_t step : {kMax, kMin}) {  // Slice steps at the int64 limits overflowed.
    ModelBuilder m;
    m.int_constant("c", {1, 2, 3, 4, 5, 6});
    m.int_constant("starts", {step > 0 ? 0 : -1});
    m.int_constant("ends", {step > 0 ? kMax : kMin});
    m.int_constant("axes", {0});
    m.int_constant("steps", {step});
    m.node("Slice", {"c", "starts", "ends", "axes", "steps"}, {"s"});
    m.node("Add", {"s", "s"}, {"y"});
    m.output("y");
    EXPECT_EQ(import(m, "slice_step.onnx"), "ops 0");  // folded to one element
  }
  {  // ConstantOfShape of 2^40 x 2^40 overflowed the element count.
    ModelBuilder m;
    m.input("x", {2});
    m.int_constant("shape", {int64_t{1} << 40, int64_t{1} << 40});
    m.node("ConstantOfShape", {"shape"}, {"z"});
    m.node("Add", {"x", "z"}, {"y"});
    m.output("y");
    EXPECT_EQ(import(m, "constant_of_shape.onnx"), "error");
  }
  {  // A weight of 2^40 x 2^40 floats overflowed its byte count.
    ModelBuilder m;
    m.input("x", {2});
    m.weight("w", {int64_t{1} << 40, int64_t{1} << 40}, /*external=*/true);
    m.node("Add", {"x", "w"}, {"y"});
    m.output("y");
    EXPECT_EQ(import(m, "huge_weight.onnx"), "error");
  }
}

TEST(OnnxImportTest, UnusedDimIsAWarning) {
  ImportOptions options = dims_of("resnet50");
  options.dims["sequence"] = 7;
  const LoadedGraph loaded = read_onnx_file(kOnnxDir + "/resnet50.onnx", options);
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_NE(loaded.warnings[0].find("--dim sequence=7: no input dimension has this name"),
            std::string::npos);
}

TEST(OnnxImportTest, UnknownOpGetsBytesOnlyCostAndOneWarning) {
  const LoadedGraph loaded = read_onnx_file(kOnnxDir + "/unknown_op.onnx", {});
  const Op& fancy = op_named(loaded.graph, "fancy");
  EXPECT_DOUBLE_EQ(fancy.flops, 0);
  EXPECT_DOUBLE_EQ(fancy.bytes_accessed.value(), 2 * 8 * 4 * 2);
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_NE(loaded.warnings[0].find("no cost formula for op type FancyOp (1)"), std::string::npos)
      << loaded.warnings[0];
  // The ops after it still have inferred shapes and costs.
  EXPECT_DOUBLE_EQ(op_named(loaded.graph, "tanh").flops, 16);
}

TEST(OnnxImportTest, UnknownOpWithoutDeclaredShapeIsAnError) {
  std::string e = error_of(kOnnxDir + "/malformed_unknown_op_no_shape.onnx");
  EXPECT_NE(e.find("node 'fancy' (FancyOp): output 'c'"), std::string::npos) << e;
  EXPECT_NE(e.find("no schema for op type 'FancyOp' in domain 'example.custom'; the model's "
                   "value_info can give its outputs' shapes"),
            std::string::npos)
      << e;
}

TEST(OnnxImportTest, MissingFileAndEmptyFileAreFormatErrors) {
  EXPECT_NE(error_of(kOnnxDir + "/no_such.onnx").find("no_such.onnx: cannot open"),
            std::string::npos);
  const std::string empty = temp_path("empty.onnx");
  std::ofstream(empty, std::ios::trunc).close();
  EXPECT_NE(error_of(empty).find("empty file"), std::string::npos);
}

TEST(OnnxImportTest, DanglingInputAndCycleAreFormatErrors) {
  ModelBuilder dangling;
  dangling.input("x", {2});
  dangling.node("Add", {"x", "nowhere"}, {"y"});
  dangling.output("y");
  EXPECT_NE(error_of(dangling.save("dangling.onnx"))
                .find("node 'y' (Add): input 'nowhere' is not a graph input, an initializer or "
                      "any node's output"),
            std::string::npos);

  ModelBuilder cycle;
  cycle.input("x", {2});
  cycle.node("Add", {"x", "b"}, {"a"});
  cycle.node("Relu", {"a"}, {"b"});
  cycle.output("b");
  EXPECT_NE(error_of(cycle.save("cycle.onnx")).find("the graph has a cycle"), std::string::npos);
}

TEST(OnnxImportTest, InputsOfTheWrongRankAreErrorsBeforeOnnxInferenceSeesThem) {
  // ONNX 1.12's ConvTranspose inference indexes W's dims unchecked: a rank-1 W must not reach it.
  ModelBuilder m;
  m.input("x", {1, 8, 8, 8}).weight("w", {4});
  m.node("ConvTranspose", {"x", "w"}, {"y"});
  m.output("y");
  EXPECT_NE(error_of(m.save("bad_rank.onnx")).find("input 1 has rank 1, expected 4"),
            std::string::npos);

  ModelBuilder pool;
  pool.input("x", {1, 2, 6, 6});
  ModelBuilder::attr(pool.node("MaxPool", {"x"}, {"y"}), "kernel_shape", std::vector<int64_t>{3});
  pool.output("y");
  EXPECT_NE(error_of(pool.save("bad_kernel.onnx"))
                .find("attribute 'kernel_shape' has 1 values, expected 2"),
            std::string::npos);
}

TEST(OnnxImportTest, IfWithSubgraphsReadingOuterValuesIsOneOpAndAWarning) {
  ModelBuilder m;
  m.input("x", {2, 3}).input("cond", {}, "", ox::TensorProto_DataType_BOOL);
  m.node("Relu", {"x"}, {"r"});
  auto& node = m.node("If", {"cond"}, {"y"});
  // Both branches read r, a value of the outer graph.
  ModelBuilder::branch(node, "then_branch", "Neg", "r", "then_branch_out");
  ModelBuilder::branch(node, "else_branch", "Abs", "r", "else_branch_out");
  m.output("y");
  const LoadedGraph loaded = read_onnx_file(m.save("if.onnx"), {});
  const Op& y = op_named(loaded.graph, "y");
  EXPECT_EQ(y.type, "If");
  // The branches read r: it is an input of the If op, besides the condition.
  EXPECT_EQ(y.inputs, (std::vector<TensorRef>{{loaded.graph.find_op("cond").value(), 0},
                                              {loaded.graph.find_op("r").value(), 0}}));
  EXPECT_EQ(y.output_bytes, std::vector<int64_t>{2 * 3 * 4});
  bool warned = false;
  for (const std::string& w : loaded.warnings) {
    warned |= w.find("control-flow ops (If, Loop, Scan)") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

TEST(OnnxImportTest, DuplicateInitializerIsAFormatError) {
  ModelBuilder m;
  m.input("x", {2, 4}).weight("w", {4, 4}).weight("w", {4, 4});
  m.node("MatMul", {"x", "w"}, {"y"});
  m.output("y");
  EXPECT_NE(error_of(m.save("dup.onnx")).find("initializer 'w' is defined twice"),
            std::string::npos);
}

TEST(OnnxImportTest, MissingOpsetIsAFormatError) {
  ModelBuilder m;
  m.proto().clear_opset_import();
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_NE(error_of(m.save("no_opset.onnx")).find("no opset for the default ONNX domain"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Sequences.

TEST(OnnxImportTest, SplitToSequenceAndSequenceAtGiveEachPiecesShape) {
  // What PyTorch writes for q, k, v = qkv.chunk(3, dim=-1) and for x.unbind(0): SplitToSequence,
  // then SequenceAt at constant positions. qkv: [2, 16, 96] in pieces of 32; stacked: [3, 2, 8]
  // unbound along axis 0.
  ModelBuilder m(17);
  m.input("qkv", {2, 16, 96}).input("stacked", {3, 2, 8});
  m.int_scalar("piece", 32);
  for (int64_t i : {0, 1, 2}) m.int_scalar("at" + std::to_string(i), i);
  ModelBuilder::attr(m.node("SplitToSequence", {"qkv", "piece"}, {"parts"}, "chunk"), "axis",
                     int64_t{-1});
  m.node("SequenceAt", {"parts", "at0"}, {"q"}, "q");
  m.node("SequenceAt", {"parts", "at1"}, {"k"}, "k");
  ox::NodeProto& kt = m.node("Transpose", {"k"}, {"kt"}, "kt");
  ModelBuilder::attr(kt, "perm", std::vector<int64_t>{0, 2, 1});
  m.node("MatMul", {"q", "kt"}, {"scores"}, "scores");
  ox::NodeProto& unbind = m.node("SplitToSequence", {"stacked"}, {"rows"}, "unbind");
  ModelBuilder::attr(unbind, "keepdims", int64_t{0});
  m.node("SequenceAt", {"rows", "at2"}, {"last"}, "last");
  m.output("scores").output("last");
  const LoadedGraph loaded = read_onnx_file(m.save("split_to_sequence.onnx"), {});
  const Graph& g = loaded.graph;
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.at(0);
  const Op& chunk = op_named(g, "chunk");
  EXPECT_EQ(chunk.output_bytes, std::vector<int64_t>{2 * 16 * 96 * 4});  // the three pieces
  EXPECT_EQ(chunk.extra["output_shapes"], Json::parse("[null]"));
  EXPECT_EQ(chunk.extra["sequence_shapes"],
            Json::parse("[[[2, 16, 32], [2, 16, 32], [2, 16, 32]]]"));
  // Read once, written once, and the piece size.
  EXPECT_DOUBLE_EQ(chunk.bytes_accessed.value_or(0), 2.0 * (2 * 16 * 96 * 4) + 8);
  const Op& q = op_named(g, "q");
  EXPECT_EQ(q.inputs.at(0).op, g.find_op("chunk").value());
  EXPECT_EQ(q.output_bytes, std::vector<int64_t>{2 * 16 * 32 * 4});
  EXPECT_DOUBLE_EQ(q.bytes_accessed.value_or(0),
                   2.0 * (2 * 16 * 32 * 4) + 8);  // the piece, and the position
  EXPECT_DOUBLE_EQ(op_named(g, "scores").flops, 2.0 * 2 * 16 * 16 * 32);
  EXPECT_EQ(op_named(g, "last").extra["output_shapes"], Json::parse("[[2, 8]]"));
}

TEST(OnnxImportTest, SequencesBuiltAndTakenApartKeepTheirTensorsShapes) {
  // Pieces of 4 from a length of 10 (4, 4, 2); SequenceConstruct, SequenceInsert at -1 and
  // SequenceErase at 0; ConcatFromSequence joined and stacked; SequenceLength folds to 3.
  ModelBuilder m(17);
  m.input("x", {10, 6}).input("y", {2, 6});
  m.int_scalar("four", 4);
  m.int_scalar("minus_one", -1);
  m.int_scalar("zero", 0);
  m.node("SplitToSequence", {"x", "four"}, {"pieces"}, "split");
  ModelBuilder::attr(m.node("ConcatFromSequence", {"pieces"}, {"joined"}, "join"), "axis",
                     int64_t{0});
  m.node("SequenceConstruct", {"y", "y"}, {"pair"}, "pair");
  m.node("SequenceInsert", {"pair", "x", "minus_one"}, {"three"}, "insert");  // y, x, y
  m.node("SequenceErase", {"three", "zero"}, {"two"}, "erase");               // x, y
  m.node("SequenceLength", {"three"}, {"n"}, "length");
  m.node("SequenceErase", {"pair"}, {"one"}, "erase_last");
  ox::NodeProto& stack = m.node("ConcatFromSequence", {"one"}, {"stacked"}, "stack");
  ModelBuilder::attr(stack, "axis", int64_t{1});
  ModelBuilder::attr(stack, "new_axis", int64_t{1});
  ModelBuilder::attr(m.node("ConcatFromSequence", {"two"}, {"xy"}, "xy"), "axis", int64_t{0});
  m.node("Cast", {"n"}, {"n_float"}, "n_float").add_attribute()->CopyFrom([] {
    ox::AttributeProto to;
    to.set_name("to");
    to.set_type(ox::AttributeProto_AttributeType_INT);
    to.set_i(ox::TensorProto_DataType_FLOAT);
    return to;
  }());
  m.node("Mul", {"joined", "n_float"}, {"scaled"}, "scaled");
  m.output("scaled").output("stacked").output("xy");
  const Graph g = read_onnx_file(m.save("sequences.onnx"), {}).graph;
  EXPECT_EQ(op_named(g, "split").extra["sequence_shapes"],
            Json::parse("[[[4, 6], [4, 6], [2, 6]]]"));
  EXPECT_EQ(op_named(g, "join").extra["output_shapes"], Json::parse("[[10, 6]]"));
  EXPECT_EQ(op_named(g, "insert").extra["sequence_shapes"],
            Json::parse("[[[2, 6], [10, 6], [2, 6]]]"));
  EXPECT_EQ(op_named(g, "insert").output_bytes, std::vector<int64_t>{(2 + 10 + 2) * 6 * 4});
  EXPECT_EQ(op_named(g, "xy").extra["output_shapes"], Json::parse("[[12, 6]]"));
  EXPECT_EQ(op_named(g, "stack").extra["output_shapes"], Json::parse("[[2, 1, 6]]"));
  // The length is a constant: no op, and scaled reads only joined.
  EXPECT_FALSE(g.find_op("length").has_value());
  EXPECT_FALSE(g.find_op("n_float").has_value());
  EXPECT_EQ(op_named(g, "scaled").inputs.size(), 1u);
}

TEST(OnnxImportTest, SequenceOpsFollowTheOperatorReferenceAtTheirEdges) {
  // x: [6, 4]. keepdims is ignored when split is given; Insert and Erase at a position known only
  // at run time, where every tensor has one shape; ConcatFromSequence stacking on axis -1 (the
  // new last axis); SequenceEmpty of int32; a sequence of weights, folded, charged where read;
  // a sequence as a graph output.
  ModelBuilder m(17);
  m.input("x", {6, 4}).input("i", {}, "", ox::TensorProto_DataType_INT64);
  m.weight("w1", {2, 4}).weight("w2", {2, 4});
  m.int_scalar("two", 2);
  ox::NodeProto& split = m.node("SplitToSequence", {"x", "two"}, {"pieces"}, "split");
  ModelBuilder::attr(split, "keepdims", int64_t{0});  // ignored: split is given
  m.node("SequenceInsert", {"pieces", "pieces_first", "i"}, {"more"}, "insert");
  m.node("SequenceAt", {"pieces", "i"}, {"pieces_first"}, "first");
  m.node("SequenceErase", {"more", "i"}, {"fewer"}, "erase");
  ox::NodeProto& stack = m.node("ConcatFromSequence", {"fewer"}, {"stacked"}, "stack");
  ModelBuilder::attr(stack, "axis", int64_t{-1});
  ModelBuilder::attr(stack, "new_axis", int64_t{1});
  ModelBuilder::attr(m.node("SequenceEmpty", {}, {"empty"}, "empty"), "dtype",
                     int64_t{ox::TensorProto_DataType_INT32});
  m.node("SequenceConstruct", {"w1", "w2"}, {"weights"}, "weights");
  ModelBuilder::attr(m.node("ConcatFromSequence", {"weights"}, {"w"}, "w"), "axis", int64_t{0});
  m.node("MatMul", {"stacked_flat", "w"}, {"y"}, "use");
  m.node("Transpose", {"x"}, {"stacked_flat"}, "xt");
  m.output("y").output("stacked").output("empty").output("fewer");
  ox::NodeProto& xt = *m.proto().mutable_graph()->mutable_node(m.proto().graph().node_size() - 1);
  ModelBuilder::attr(xt, "perm", std::vector<int64_t>{0, 1});
  const Graph g = read_onnx_file(m.save("sequence_edges.onnx"), {}).graph;
  EXPECT_EQ(op_named(g, "split").extra["sequence_shapes"],
            Json::parse("[[[2, 4], [2, 4], [2, 4]]]"));
  EXPECT_EQ(op_named(g, "insert").extra["sequence_shapes"],
            Json::parse("[[[2, 4], [2, 4], [2, 4], [2, 4]]]"));
  EXPECT_EQ(op_named(g, "erase").extra["sequence_shapes"],
            Json::parse("[[[2, 4], [2, 4], [2, 4]]]"));
  EXPECT_EQ(op_named(g, "stack").extra["output_shapes"], Json::parse("[[2, 4, 3]]"));
  EXPECT_EQ(op_named(g, "empty").extra["sequence_shapes"], Json::parse("[[]]"));
  EXPECT_EQ(op_named(g, "empty").output_bytes, std::vector<int64_t>{0});
  // The weights' sequence and its concatenation fold; the MatMul carries both weights.
  EXPECT_FALSE(g.find_op("weights").has_value());
  EXPECT_EQ(op_named(g, "use").param_bytes, 2 * (2 * 4 * 4));
}

TEST(OnnxImportTest, SequencesDplaceCannotFollowAreFormatErrors) {
  const auto import_error = [](const std::string& file,
                               const std::function<void(ModelBuilder&)>& build) {
    ModelBuilder m(17);
    m.input("x", {10, 6}).input("i", {}, "", ox::TensorProto_DataType_INT64);
    build(m);
    return error_of(m.save(file));
  };
  std::string e = import_error("seq_split.onnx", [](ModelBuilder& m) {
    m.node("SplitToSequence", {"x", "i"}, {"s"}, "split");
    m.output("s");
  });
  EXPECT_NE(e.find("node 'split' (SplitToSequence): output 's': its type could not be inferred "
                   "(dplace's sequence rule: "),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("its split (input 1) is not a constant int32 or int64 scalar or 1-D tensor"),
            std::string::npos)
      << e;
  e = import_error("seq_sizes.onnx", [](ModelBuilder& m) {
    m.int_constant("sizes", {4, 4});
    m.node("SplitToSequence", {"x", "sizes"}, {"s"}, "split");
    m.output("s");
  });
  EXPECT_NE(e.find("its split sizes add up to 8, not 10 (the split axis)"), std::string::npos) << e;
  e = import_error("seq_position.onnx", [](ModelBuilder& m) {
    m.int_scalar("five", 5);
    m.node("SplitToSequence", {"x"}, {"s"}, "split");  // ten pieces of one row
    m.node("SequenceAt", {"s", "five"}, {"a"}, "at");
    m.node("SequenceErase", {"s", "five"}, {"b"}, "erase");
    m.node("SequenceAt", {"b", "i"}, {"c"}, "at_runtime");  // all [1, 6]: fine
    m.int_scalar("ten", 10);
    m.node("SequenceAt", {"s", "ten"}, {"d"}, "past_the_end");
    m.output("a").output("c").output("d");
  });
  EXPECT_NE(e.find("node 'past_the_end' (SequenceAt): output 'd': its type could not be "
                   "inferred (dplace's sequence rule: position 10 is out of range for a sequence "
                   "of 10 tensors)"),
            std::string::npos)
      << e;
  e = import_error("seq_runtime_position.onnx", [](ModelBuilder& m) {
    m.int_scalar("four", 4);
    m.node("SplitToSequence", {"x", "four"}, {"s"}, "split");  // 4, 4, 2 rows
    m.node("SequenceAt", {"s", "i"}, {"a"}, "at");
    m.output("a");
  });
  EXPECT_NE(e.find("its position (input 1) is not constant and the sequence's tensors differ in "
                   "shape"),
            std::string::npos)
      << e;
  e = import_error("seq_if.onnx", [](ModelBuilder& m) {
    // An If whose branches return sequences: ONNX's type says "a sequence of floats", no more.
    m.input("c", {}, "", ox::TensorProto_DataType_BOOL);
    ox::NodeProto& branch = m.node("If", {"c"}, {"s"}, "if");
    for (const char* name : {"then_branch", "else_branch"}) {
      ModelBuilder::branch(branch, name, "SplitToSequence", "x", "pieces");
      ox::TypeProto* type = branch.mutable_attribute(branch.attribute_size() - 1)
                                ->mutable_g()
                                ->mutable_output(0)
                                ->mutable_type();
      type->Clear();
      type->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
          ox::TensorProto_DataType_FLOAT);
    }
    m.output("s");
  });
  EXPECT_NE(e.find("node 'if' (If): output 's': it is a sequence whose tensors dplace does not "
                   "know"),
            std::string::npos)
      << e;
  e = import_error("seq_long.onnx", [](ModelBuilder& m) {
    m.input("wide", {2000000});
    m.node("SplitToSequence", {"wide"}, {"s"}, "split");  // two million pieces of one element
    m.output("s");
  });
  EXPECT_NE(e.find("it would make 2000000 tensors, more than 1000000"), std::string::npos) << e;
  e = import_error("seq_chain.onnx", [](ModelBuilder& m) {
    // Each insert copies the list: 1,500 of them would hold 1.1 million tensors together.
    m.node("SequenceConstruct", {"x"}, {"s0"}, "construct");
    for (int i = 1; i <= 1500; ++i) {
      m.node("SequenceInsert", {"s" + std::to_string(i - 1), "x"}, {"s" + std::to_string(i)},
             "insert" + std::to_string(i));
    }
    m.output("s1500");
  });
  EXPECT_NE(e.find("node 'insert1413' (SequenceInsert): the model's sequences hold more than "
                   "1000000 tensors together"),
            std::string::npos)
      << e;
  e = import_error("seq_add.onnx", [](ModelBuilder& m) {
    m.node("SplitToSequence", {"x"}, {"s"}, "split");
    m.node("Add", {"s", "s"}, {"y"}, "add");
    m.output("y");
  });
  EXPECT_NE(e.find("node 'add' (Add): output 'y': its type could not be inferred (input 's' is a "
                   "sequence, where Add takes tensors)"),
            std::string::npos)
      << e;
  e = import_error("seq_declared.onnx", [](ModelBuilder& m) {
    m.node("SplitToSequence", {"x"}, {"s"}, "split");
    auto* out = m.proto().mutable_graph()->add_output();
    out->set_name("s");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(ox::TensorProto_DataType_FLOAT);
  });
  EXPECT_NE(e.find("'s' is declared a tensor (value_info or graph output) but its node makes a "
                   "sequence"),
            std::string::npos)
      << e;
  e = import_error("seq_declared_type.onnx", [](ModelBuilder& m) {
    m.node("SplitToSequence", {"x"}, {"s"}, "split");
    auto* out = m.proto().mutable_graph()->add_output();
    out->set_name("s");
    out->mutable_type()
        ->mutable_sequence_type()
        ->mutable_elem_type()
        ->mutable_tensor_type()
        ->set_elem_type(ox::TensorProto_DataType_INT64);
  });
  EXPECT_NE(e.find("'s' is declared a sequence of element type 7 (value_info or graph output) "
                   "but its node makes one of element type 1"),
            std::string::npos)
      << e;
  e = import_error("seq_new_axis.onnx", [](ModelBuilder& m) {
    m.node("SplitToSequence", {"x"}, {"s"}, "split");
    ox::NodeProto& cat = m.node("ConcatFromSequence", {"s"}, {"y"}, "cat");
    ModelBuilder::attr(cat, "axis", int64_t{0});
    ModelBuilder::attr(cat, "new_axis", int64_t{2});
    m.output("y");
  });
  EXPECT_NE(e.find("its new_axis is 2, not 0 or 1"), std::string::npos) << e;
  e = import_error("seq_attribute.onnx", [](ModelBuilder& m) {
    ox::NodeProto& split = m.node("SplitToSequence", {"x"}, {"s"}, "split");
    ModelBuilder::attr(split, "axis", std::string("zero"));
    m.output("s");
  });
  EXPECT_NE(e.find("(ONNX: "), std::string::npos) << e;
  EXPECT_NE(e.find("axis"), std::string::npos) << e;
  e = import_error("seq_insert_range.onnx", [](ModelBuilder& m) {
    m.int_scalar("minus_three", -3);
    m.node("SequenceConstruct", {"x"}, {"s"}, "construct");
    m.node("SequenceInsert", {"s", "x", "minus_three"}, {"t"}, "insert");
    m.output("t");
  });
  EXPECT_NE(e.find("position -3 is out of range for a sequence of 1 tensors"), std::string::npos)
      << e;
  e = import_error("seq_inputs.onnx", [](ModelBuilder& m) {
    m.node("SequenceAt", {"x"}, {"a"}, "at");
    m.output("a");
  });
  EXPECT_NE(e.find("(ONNX: Node (at) has input size 1 not in range [min=2, max=2].)"),
            std::string::npos)
      << e;
}

// ---------------------------------------------------------------------------------------------
// Model-local functions.

const std::string& extra_string(const Graph& g, const std::string& op, const std::string& key) {
  static const std::string kNone;
  const Json& extra = op_named(g, op).extra;
  return extra.contains(key) ? extra[key].get_ref<const std::string&>() : kNone;
}

// Linear(x, w) = Relu(MatMul(x, w)), called twice: y = Softmax(Linear(Linear(x, w1), w2)).
ModelBuilder two_linear_calls() {
  ModelBuilder m(17);
  m.input("x", {8, 64}).weight("w1", {64, 128}).weight("w2", {128, 10});
  ox::FunctionProto& f = m.function("mod", "Linear", {"in", "w"}, {"out"});
  ModelBuilder::body_node(f, "MatMul", {"in", "w"}, {"t"}, "mm");
  ModelBuilder::body_node(f, "Relu", {"t"}, {"out"}, "act");
  m.call("mod", "Linear", {"x", "w1"}, {"h1"}, "layer1");
  m.call("mod", "Linear", {"h1", "w2"}, {"h2"}, "layer2");
  m.node("Softmax", {"h2"}, {"y"}, "softmax");
  m.output("y");
  return m;
}

TEST(OnnxImportTest, LocalFunctionCallsBecomeTheirBodiesOps) {
  ModelBuilder m = two_linear_calls();
  const LoadedGraph loaded = read_onnx_file(m.save("functions.onnx"), {});
  const Graph& g = loaded.graph;
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.at(0);
  ASSERT_EQ(g.num_ops(), 6u);  // x, two MatMul + Relu pairs, softmax
  const Op& mm1 = op_named(g, "layer1/mm");
  const Op& mm2 = op_named(g, "layer2/mm");
  EXPECT_EQ(mm1.type, "MatMul");
  EXPECT_DOUBLE_EQ(mm1.flops, 2.0 * 8 * 64 * 128);
  EXPECT_DOUBLE_EQ(mm2.flops, 2.0 * 8 * 128 * 10);
  EXPECT_EQ(mm1.param_bytes, 64 * 128 * 4);  // the actual weight of each call
  EXPECT_EQ(mm2.param_bytes, 128 * 10 * 4);
  EXPECT_EQ(op_named(g, "layer2/act").extra["output_shapes"], Json::parse("[[8, 10]]"));
  // The second call reads the first call's output; softmax reads the second's.
  ASSERT_EQ(mm2.inputs.size(), 1u);
  EXPECT_EQ(mm2.inputs[0].op, g.find_op("layer1/act").value());
  EXPECT_EQ(op_named(g, "softmax").inputs.at(0).op, g.find_op("layer2/act").value());
  EXPECT_EQ(extra_string(g, "layer1/act", "onnx_function"), "mod.Linear");
  EXPECT_EQ(extra_string(g, "softmax", "onnx_function"), "");
  // The same graph written without the function gives the same costs.
  ModelBuilder flat(17);
  flat.input("x", {8, 64}).weight("w1", {64, 128}).weight("w2", {128, 10});
  flat.node("MatMul", {"x", "w1"}, {"t1"});
  flat.node("Relu", {"t1"}, {"h1"});
  flat.node("MatMul", {"h1", "w2"}, {"t2"});
  flat.node("Relu", {"t2"}, {"h2"});
  flat.node("Softmax", {"h2"}, {"y"});
  flat.output("y");
  const Graph plain = read_onnx_file(flat.save("functions_flat.onnx"), {}).graph;
  EXPECT_DOUBLE_EQ(g.total_flops(), plain.total_flops());
  EXPECT_EQ(g.total_param_bytes(), plain.total_param_bytes());
}

// Adds to `f` a default for attribute `name` (FunctionProto.attribute_proto, IR 9, which this
// libonnx's proto lacks: written as the unknown field 11 it is in newer files).
void add_attribute_default(ox::FunctionProto& f, const ox::AttributeProto& value) {
  f.mutable_unknown_fields()->AddLengthDelimited(11, value.SerializeAsString());
}

ox::AttributeProto ints_attribute(const std::string& name, const std::vector<int64_t>& values) {
  ox::AttributeProto a;
  a.set_name(name);
  a.set_type(ox::AttributeProto_AttributeType_INTS);
  for (int64_t v : values) a.add_ints(v);
  return a;
}

// Functions <name>0 ... <name><levels - 1> in `domain`, each of whose bodies calls the next
// `fanout` times in a row; the last applies `leaf`, an op of `leaf_domain`, as many times.
void add_call_chain(ModelBuilder& m, const std::string& domain, const std::string& name, int levels,
                    int fanout, const std::string& leaf, const std::string& leaf_domain = "") {
  for (int level = 0; level < levels; ++level) {
    ox::FunctionProto& f = m.function(domain, name + std::to_string(level), {"in"}, {"out"});
    const bool last = level == levels - 1;
    for (int k = 0; k < fanout; ++k) {
      const std::string in = k == 0 ? "in" : "t" + std::to_string(k - 1);
      const std::string out = k == fanout - 1 ? "out" : "t" + std::to_string(k);
      ModelBuilder::body_node(f, last ? leaf : name + std::to_string(level + 1), {in}, {out})
          .set_domain(last ? leaf_domain : domain);
    }
  }
}

TEST(OnnxImportTest, FunctionAttributesComeFromTheCallElseTheDefaultElseAreDropped) {
  // Transpose's perm refers to the function's attribute "order". WithDefault has the default
  // [0, 1, 2]; Bare has none, so a call without "order" transposes by ONNX's default (reversed).
  ModelBuilder m(17);
  m.input("x", {2, 3, 4});
  for (const std::string& name : std::vector<std::string>{"WithDefault", "Bare"}) {
    ox::FunctionProto& f = m.function("mod", name, {"in"}, {"out"});
    ox::NodeProto& t = ModelBuilder::body_node(f, "Transpose", {"in"}, {"out"}, "t");
    ox::AttributeProto* perm = t.add_attribute();
    perm->set_name("perm");
    perm->set_type(ox::AttributeProto_AttributeType_INTS);
    perm->set_ref_attr_name("order");
    if (name == "WithDefault") {
      add_attribute_default(f, ints_attribute("order", {0, 1, 2}));
    } else {
      f.add_attribute("order");  // an attribute without a default
    }
  }
  ox::NodeProto& given = m.call("mod", "WithDefault", {"x"}, {"a"}, "given");
  *given.add_attribute() = ints_attribute("order", {1, 0, 2});
  m.call("mod", "WithDefault", {"x"}, {"b"}, "defaulted");
  m.call("mod", "Bare", {"x"}, {"c"}, "dropped");
  m.output("a").output("b").output("c");
  const Graph g = read_onnx_file(m.save("function_attributes.onnx"), {}).graph;
  const auto shape = [&](const std::string& op) { return op_named(g, op).extra["output_shapes"]; };
  EXPECT_EQ(shape("given/t"), Json::parse("[[3, 2, 4]]"));
  EXPECT_EQ(shape("defaulted/t"), Json::parse("[[2, 3, 4]]"));
  EXPECT_EQ(shape("dropped/t"), Json::parse("[[4, 3, 2]]"));
}

TEST(OnnxImportTest, FunctionOverloadsSelectTheBody) {
  // Two functions "mod.Act" told apart by their overload (IR 10: FunctionProto field 13, NodeProto
  // field 8, both unknown to this libonnx).
  ModelBuilder m(17);
  m.input("x", {4});
  ox::FunctionProto& relu = m.function("mod", "Act", {"in"}, {"out"});
  ModelBuilder::body_node(relu, "Relu", {"in"}, {"out"}, "f");
  relu.mutable_unknown_fields()->AddLengthDelimited(13, "relu");
  ox::FunctionProto& tanh = m.function("mod", "Act", {"in"}, {"out"});
  ModelBuilder::body_node(tanh, "Tanh", {"in"}, {"out"}, "f");
  tanh.mutable_unknown_fields()->AddLengthDelimited(13, "tanh");
  m.call("mod", "Act", {"x"}, {"a"}, "first")
      .mutable_unknown_fields()
      ->AddLengthDelimited(8, "tanh");
  m.call("mod", "Act", {"a"}, {"b"}, "second")
      .mutable_unknown_fields()
      ->AddLengthDelimited(8, "relu");
  m.output("b");
  const Graph g = read_onnx_file(m.save("function_overloads.onnx"), {}).graph;
  EXPECT_EQ(op_named(g, "first/f").type, "Tanh");
  EXPECT_EQ(op_named(g, "second/f").type, "Relu");
  EXPECT_EQ(extra_string(g, "first/f", "onnx_function"), "mod.Act:tanh");
}

TEST(OnnxImportTest, NestedCallsOptionalIOAndSubgraphsAreInlined) {
  // Outer(in) = Inner(Neg(in)); Inner(in) = (Relu(in), Abs(in)), its second output left out by
  // the call. Cond(c, in) = If(c, then: in, else: Sigmoid(in)): the subgraphs read the function's
  // input, renamed to the call's.
  ModelBuilder m(17);
  m.input("x", {4}).input("c", {}, "", ox::TensorProto_DataType_BOOL);
  ox::FunctionProto& inner = m.function("mod", "Inner", {"in"}, {"r", "a"});
  ModelBuilder::body_node(inner, "Relu", {"in"}, {"r"}, "relu");
  ModelBuilder::body_node(inner, "Abs", {"in"}, {"a"}, "abs");
  ox::FunctionProto& outer = m.function("mod", "Outer", {"in"}, {"out"});
  ModelBuilder::body_node(outer, "Neg", {"in"}, {"n"}, "neg");
  ModelBuilder::body_node(outer, "Inner", {"n"}, {"out"}, "inner").set_domain("mod");
  ox::FunctionProto& cond = m.function("mod", "Cond", {"flag", "in"}, {"out"});
  ox::NodeProto& branch = ModelBuilder::body_node(cond, "If", {"flag"}, {"out"}, "if");
  ModelBuilder::branch(branch, "then_branch", "Identity", "in", "v");
  ModelBuilder::branch(branch, "else_branch", "Sigmoid", "in", "v");
  m.call("mod", "Outer", {"x"}, {"h"}, "block");
  m.call("mod", "Cond", {"c", "h"}, {"y"}, "gate");
  m.output("y");
  const Graph g = read_onnx_file(m.save("function_nesting.onnx"), {}).graph;
  EXPECT_EQ(op_named(g, "block/inner/relu").type, "Relu");
  EXPECT_EQ(op_named(g, "block/inner/abs").type, "Abs");  // its output has no consumer
  EXPECT_EQ(extra_string(g, "block/inner/relu", "onnx_function"), "mod.Inner");
  EXPECT_EQ(extra_string(g, "block/neg", "onnx_function"), "mod.Outer");
  // The If reads the condition and, through its branches, the first call's output.
  const Op& gate = op_named(g, "gate/if");
  std::set<std::string> inputs;
  for (const TensorRef& t : gate.inputs) inputs.insert(g.op(t.op).name);
  EXPECT_EQ(inputs, (std::set<std::string>{"c", "block/inner/relu"}));
}

TEST(OnnxImportTest, InlinedNamesAvoidTheModelsNamesAndUnnamedNodesKeepTheirFileNames) {
  // The file already has a tensor "layer1/t": the call's names, its ops' too, move to "layer1_1/".
  // Unnamed nodes keep the names their places in the file give them, before the call and after it
  // (which two body nodes replace), and onnxruntime's numbers, which skip the Constant.
  ModelBuilder m(17);
  m.input("x", {8, 64}).weight("w", {64, 64});
  ox::FunctionProto& f = m.function("mod", "Linear", {"in", "w"}, {"out"});
  ModelBuilder::body_node(f, "MatMul", {"in", "w"}, {"t"}, "mm");
  ModelBuilder::body_node(f, "Relu", {"t"}, {"out"}, "act");
  ox::NodeProto& constant = m.node("Constant", {}, {"k"}, "k");
  auto* value = constant.add_attribute();
  value->set_name("value");
  value->set_type(ox::AttributeProto_AttributeType_TENSOR);
  value->mutable_t()->set_data_type(ox::TensorProto_DataType_FLOAT);
  value->mutable_t()->add_float_data(2.0F);
  m.node("Mul", {"x", "k"}, {"layer1/t"}, "scale");
  m.node("Relu", {"layer1/t"}, {"r"}).set_name("");
  m.call("mod", "Linear", {"r", "w"}, {"y"}, "layer1");
  m.node("Neg", {"y"}, {"z"}).set_name("");
  m.output("z");
  const Graph g = read_onnx_file(m.save("function_names.onnx"), {}).graph;
  EXPECT_EQ(op_named(g, "layer1_1/mm").inputs.at(0).op, g.find_op("Relu_2").value());
  EXPECT_EQ(op_named(g, "layer1_1/act").inputs.at(0).op, g.find_op("layer1_1/mm").value());
  EXPECT_EQ(op_named(g, "Relu_2").inputs.at(0).op, g.find_op("scale").value());
  EXPECT_EQ(extra_string(g, "Relu_2", "onnxruntime_name"), "Relu_1");
  EXPECT_EQ(op_named(g, "Neg_4").inputs.at(0).op, g.find_op("layer1_1/act").value());
  EXPECT_EQ(extra_string(g, "Neg_4", "onnxruntime_name"), "Neg_3");
  EXPECT_EQ(g.num_ops(), 6u);  // x, scale, Relu_2, layer1_1/mm, layer1_1/act, Neg_4
}

TEST(OnnxImportTest, MalformedFunctionsAreFormatErrors) {
  const auto error = [](const std::string& file, const std::function<void(ModelBuilder&)>& edit) {
    ModelBuilder m = two_linear_calls();
    edit(m);
    return error_of(m.save(file));
  };
  const auto expect_error = [](const std::string& text, const std::string& part) {
    EXPECT_NE(text.find(part), std::string::npos) << text;
    EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  };
  expect_error(error("fn_undefined.onnx",
                     [](ModelBuilder& m) {
                       m.proto().mutable_functions(0)->mutable_node(1)->set_input(0, "nowhere");
                     }),
               "function 'mod.Linear': node 'layer1/act' (Relu) reads 'nowhere', which is neither "
               "an input of the function nor defined in its body");
  expect_error(error("fn_twice.onnx",
                     [](ModelBuilder& m) { *m.proto().add_functions() = m.proto().functions(0); }),
               "function 'mod.Linear' is defined twice");
  expect_error(error("fn_defined_twice.onnx",
                     [](ModelBuilder& m) {
                       m.proto().mutable_functions(0)->mutable_node(1)->set_output(0, "t");
                     }),
               "function 'mod.Linear': 't' is defined twice (an input, or the output of two "
               "nodes)");
  expect_error(
      error("fn_inputs.onnx",
            [](ModelBuilder& m) { m.proto().mutable_graph()->mutable_node(0)->add_input("x"); }),
      "node 'layer1' (Linear): 3 inputs and 1 outputs for function 'mod.Linear', which "
      "takes 2 and 1");
  expect_error(error("fn_unproduced.onnx",
                     [](ModelBuilder& m) { m.proto().mutable_functions(0)->set_output(0, "in"); }),
               "function 'mod.Linear': output 'in' is produced by no node of its body (an input "
               "passed through needs an Identity)");
  expect_error(error("fn_recursive.onnx",
                     [](ModelBuilder& m) {
                       ModelBuilder::body_node(*m.proto().mutable_functions(0), "Linear",
                                               {"out", "w"}, {"again"})
                           .set_domain("mod");
                     }),
               "function 'mod.Linear' calls itself");
  expect_error(error("fn_opset.onnx",
                     [](ModelBuilder& m) {
                       m.proto().mutable_functions(0)->mutable_opset_import(0)->set_version(13);
                     }),
               "function 'mod.Linear' imports opset 13 of the default domain, the model opset 17: "
               "dplace reads each domain at one version");
  expect_error(error("fn_default.onnx",
                     [](ModelBuilder& m) {
                       m.proto().mutable_functions(0)->mutable_unknown_fields()->AddLengthDelimited(
                           11, "\xff\xff");
                     }),
               "function 'mod.Linear': an attribute default does not parse");
  // A tree of calls that doubles at each of 22 levels would make over four million nodes.
  expect_error(error("fn_explosion.onnx",
                     [](ModelBuilder& m) {
                       add_call_chain(m, "deep", "F", 22, 2, "Relu");
                       m.call("deep", "F0", {"y"}, {"z"}, "root");
                       m.output("z");
                     }),
               "inlining the model's functions would take 8.39e+06 calls and nodes, more than "
               "2000000 (node 'root' (F0) alone takes 8.39e+06)");
  // Calls of functions with empty bodies are work too: 2^60 of them make no node.
  expect_error(error("fn_empty_bodies.onnx",
                     [](ModelBuilder& m) {
                       m.function("empty", "E0", {}, {});
                       for (int level = 1; level <= 60; ++level) {
                         ox::FunctionProto& f =
                             m.function("empty", "E" + std::to_string(level), {}, {});
                         const std::string callee = "E" + std::to_string(level - 1);
                         ModelBuilder::body_node(f, callee, {}, {}).set_domain("empty");
                         ModelBuilder::body_node(f, callee, {}, {}).set_domain("empty");
                       }
                       m.call("empty", "E60", {}, {}, "root");
                     }),
               "calls and nodes, more than 2000000 (node 'root' (E60) alone takes 2.31e+18)");
  expect_error(error("fn_input_twice.onnx",
                     [](ModelBuilder& m) { m.proto().mutable_functions(0)->set_input(1, "in"); }),
               "function 'mod.Linear': input 'in' is listed twice");
  expect_error(error("fn_utf8.onnx",
                     [](ModelBuilder& m) {
                       m.proto().mutable_functions(0)->set_name("Lin\xff");
                       m.proto().mutable_graph()->mutable_node(0)->set_op_type("Lin\xff");
                     }),
               "function 'mod.Lin\\xff': its domain, name or overload is not valid UTF-8");
  // A graph the call passes is copied into every body node that refers to it: 1,000 Ifs refer to
  // a 1,001-node graph twice each.
  expect_error(error("fn_graph_copies.onnx",
                     [](ModelBuilder& m) {
                       ox::FunctionProto& f = m.function("mod", "Many", {"c"}, {});
                       f.add_attribute("g");
                       for (int i = 0; i < 1000; ++i) {
                         ox::NodeProto& n =
                             ModelBuilder::body_node(f, "If", {"c"}, {"o" + std::to_string(i)});
                         for (const char* branch : {"then_branch", "else_branch"}) {
                           ox::AttributeProto* a = n.add_attribute();
                           a->set_name(branch);
                           a->set_type(ox::AttributeProto_AttributeType_GRAPH);
                           a->set_ref_attr_name("g");
                         }
                       }
                       m.input("c", {}, "", ox::TensorProto_DataType_BOOL);
                       ox::AttributeProto* g =
                           m.call("mod", "Many", {"c"}, {}, "many").add_attribute();
                       g->set_name("g");
                       g->set_type(ox::AttributeProto_AttributeType_GRAPH);
                       for (int i = 0; i <= 1000; ++i) {
                         ox::NodeProto* n = g->mutable_g()->add_node();
                         n->set_op_type("Identity");
                         n->add_input(i == 0 ? "x" : "v" + std::to_string(i - 1));
                         n->add_output("v" + std::to_string(i));
                       }
                     }),
               "inlining the model's functions copies more than 2000000 nodes of graphs that "
               "calls pass as attribute values");
  // A chain of 100 functions, each calling the next once: too deep, whatever its size.
  expect_error(error("fn_deep.onnx",
                     [](ModelBuilder& m) {
                       add_call_chain(m, "chain", "G", 100, 1, "Relu");
                       m.call("chain", "G0", {"y"}, {"z"}, "root");
                       m.output("z");
                     }),
               "function 'chain.G64': calls nest deeper than 64 levels");
}

TEST(OnnxImportTest, CallDepthCountsWhereAFunctionIsCalledFromNotOnlyWhereItIsFirstRead) {
  // G0 -> G1 -> ... -> G49 -> Relu, first called from the graph (50 deep: fine); H0 -> ... -> H49
  // -> G0 puts G's chain under H's, 100 deep.
  ModelBuilder m(17);
  m.input("x", {4});
  add_call_chain(m, "chain", "G", 50, 1, "Relu");
  add_call_chain(m, "chain", "H", 50, 1, "G0", "chain");
  m.call("chain", "G0", {"x"}, {"g"}, "g");
  m.output("g");
  EXPECT_EQ(read_onnx_file(m.save("chain_g.onnx"), {}).graph.num_ops(), 2u);
  m.call("chain", "H0", {"g"}, {"h"}, "h");
  m.output("h");
  EXPECT_NE(error_of(m.save("chain_gh.onnx"))
                .find("function 'chain.G0': calls nest deeper than 64 levels"),
            std::string::npos);
}

TEST(OnnxImportTest, AGraphWhoseCallsInlineToNothingIsAFormatError) {
  ModelBuilder m(17);
  m.input("x", {4});
  m.function("mod", "Nothing", {"in"}, {});
  m.call("mod", "Nothing", {"x"}, {}, "call");
  m.output("x");
  EXPECT_NE(error_of(m.save("function_nothing.onnx"))
                .find("the graph has no nodes once its functions' calls are inlined"),
            std::string::npos);
}

TEST(OnnxImportTest, FunctionsNoNodeCallsAreNotRead) {
  // A second function whose output nothing produces, and one without a name, are never called.
  ModelBuilder m = two_linear_calls();
  m.function("mod", "Broken", {"in"}, {"missing"});
  m.function("mod", "", {"in"}, {"out"});
  const Graph g = read_onnx_file(m.save("function_unused.onnx"), {}).graph;
  EXPECT_EQ(g.num_ops(), 6u);
}

TEST(OnnxImportTest, FunctionCallsPassGraphsOptionalInputsAndAttributesThrough) {
  // Pick(c) = If(c, then: then_graph, else: else_graph), both branches given by the call as graph
  // attributes that read the caller's names. Clamp(in, lo, hi) = Clip(in, lo, hi), called without
  // "hi". Outer passes its attribute "k" on to a nested call of Inner as "axis", which Inner's
  // ArgMax reads: a reference to a reference.
  ModelBuilder m(17);
  m.input("x", {2, 3, 4}).input("c", {}, "", ox::TensorProto_DataType_BOOL);
  m.float_constant("lo", {0.0F});
  ox::FunctionProto& pick = m.function("mod", "Pick", {"flag"}, {"out"});
  pick.add_attribute("then_graph");
  pick.add_attribute("else_graph");
  ox::NodeProto& branch = ModelBuilder::body_node(pick, "If", {"flag"}, {"out"}, "if");
  for (const std::string& which : std::vector<std::string>{"then_branch", "else_branch"}) {
    ox::AttributeProto* a = branch.add_attribute();
    a->set_name(which);
    a->set_type(ox::AttributeProto_AttributeType_GRAPH);
    a->set_ref_attr_name(which == "then_branch" ? "then_graph" : "else_graph");
  }
  ox::FunctionProto& clip = m.function("mod", "Clamp", {"in", "lo", "hi"}, {"out"});
  ModelBuilder::body_node(clip, "Clip", {"in", "lo", "hi"}, {"out"}, "clip");
  ox::FunctionProto& inner = m.function("mod", "Inner", {"in"}, {"out"});
  inner.add_attribute("axis");
  ox::NodeProto& argmax = ModelBuilder::body_node(inner, "ArgMax", {"in"}, {"out"}, "argmax");
  ox::AttributeProto* axis = argmax.add_attribute();
  axis->set_name("axis");
  axis->set_type(ox::AttributeProto_AttributeType_INT);
  axis->set_ref_attr_name("axis");
  ox::FunctionProto& outer = m.function("mod", "Outer", {"in"}, {"out"});
  outer.add_attribute("k");
  ox::NodeProto& nested = ModelBuilder::body_node(outer, "Inner", {"in"}, {"out"}, "inner");
  nested.set_domain("mod");
  ox::AttributeProto* forwarded = nested.add_attribute();
  forwarded->set_name("axis");
  forwarded->set_type(ox::AttributeProto_AttributeType_INT);
  forwarded->set_ref_attr_name("k");

  m.node("Relu", {"x"}, {"r"}, "relu");
  m.node("Neg", {"x"}, {"n"}, "neg");
  ox::NodeProto& call = m.call("mod", "Pick", {"c"}, {"picked"}, "pick");
  ModelBuilder::branch(call, "then_graph", "Identity", "r", "v");
  ModelBuilder::branch(call, "else_graph", "Identity", "n", "v");
  m.call("mod", "Clamp", {"picked", "lo"}, {"clamped"}, "clamp");
  ModelBuilder::attr(m.call("mod", "Outer", {"clamped"}, {"y"}, "outer"), "k", int64_t{2});
  m.output("y");
  const Graph g = read_onnx_file(m.save("function_passing.onnx"), {}).graph;
  // The If reads the condition and, through the call's graphs, relu and neg.
  std::set<std::string> inputs;
  for (const TensorRef& t : op_named(g, "pick/if").inputs) inputs.insert(g.op(t.op).name);
  EXPECT_EQ(inputs, (std::set<std::string>{"c", "relu", "neg"}));
  // Clip without its max reads one tensor, the If's output ("lo" is a constant).
  EXPECT_EQ(op_named(g, "clamp/clip").inputs.size(), 1u);
  EXPECT_EQ(op_named(g, "clamp/clip").inputs.at(0).op, g.find_op("pick/if").value());
  // ArgMax over axis 2 (k of the outer call, through Inner's axis; ONNX's default is 0).
  EXPECT_EQ(op_named(g, "outer/inner/argmax").extra["output_shapes"], Json::parse("[[2, 3, 1]]"));
}

TEST(OnnxImportTest, CallsInsideSubgraphsUnnamedCallsAndNewDomainsAreInlined) {
  // Two unnamed calls of mod.Act, whose body uses com.microsoft's FastGelu, a domain the model
  // does not import; an If of the main graph calls mod.Flip in its then-branch.
  ModelBuilder m(17);
  m.input("x", {4}).input("c", {}, "", ox::TensorProto_DataType_BOOL);
  ox::FunctionProto& act = m.function("mod", "Act", {"in"}, {"out"});
  auto* ms = act.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  ModelBuilder::body_node(act, "FastGelu", {"in"}, {"out"}, "gelu").set_domain("com.microsoft");
  ox::FunctionProto& flip = m.function("mod", "Flip", {"in"}, {"out"});
  ModelBuilder::body_node(flip, "Neg", {"in"}, {"out"}, "neg");
  m.call("mod", "Act", {"x"}, {"a"}, "").set_name("");
  m.call("mod", "Act", {"a"}, {"b"}, "").set_name("");
  ox::NodeProto& branch = m.node("If", {"c"}, {"y"}, "if");
  ModelBuilder::branch(branch, "then_branch", "Flip", "b", "then_v").set_domain("mod");
  ModelBuilder::branch(branch, "else_branch", "Identity", "b", "else_v");
  m.output("y");
  const Graph g = read_onnx_file(m.save("function_subgraph.onnx"), {}).graph;
  EXPECT_EQ(op_named(g, "Act_0/gelu").type, "FastGelu");
  EXPECT_EQ(op_named(g, "Act_1/gelu").inputs.at(0).op, g.find_op("Act_0/gelu").value());
  EXPECT_DOUBLE_EQ(op_named(g, "Act_1/gelu").flops, 5.0 * 4);  // FastGelu's formula
  EXPECT_EQ(op_named(g, "if").inputs.size(), 2u);              // c, and b read by both branches
}

TEST(OnnxImportTest, ManyCallsOfOneNameGetNumberedPrefixes) {
  // Three calls all named "blk": "blk/", "blk_1/", "blk_2/".
  ModelBuilder m(17);
  m.input("x", {4});
  ox::FunctionProto& f = m.function("mod", "Blk", {"in"}, {"out"});
  ModelBuilder::body_node(f, "Relu", {"in"}, {"t"}, "relu");
  ModelBuilder::body_node(f, "Neg", {"t"}, {"out"}, "neg");
  m.call("mod", "Blk", {"x"}, {"h0"}, "blk");
  m.call("mod", "Blk", {"h0"}, {"h1"}, "blk");
  m.call("mod", "Blk", {"h1"}, {"y"}, "blk");
  m.output("y");
  const Graph g = read_onnx_file(m.save("function_same_names.onnx"), {}).graph;
  EXPECT_EQ(op_named(g, "blk_1/relu").inputs.at(0).op, g.find_op("blk/neg").value());
  EXPECT_EQ(op_named(g, "blk_2/relu").inputs.at(0).op, g.find_op("blk_1/neg").value());
}

TEST(OnnxImportTest, LoadGraphFileDetectsOnnxByContent) {
  const std::string path = temp_path("model.bin");
  std::filesystem::copy_file(kOnnxDir + "/unknown_op.onnx", path,
                             std::filesystem::copy_options::overwrite_existing);
  const LoadedGraph loaded = load_graph_file(path, {});
  EXPECT_EQ(loaded.format, "onnx");
  EXPECT_EQ(loaded.graph.num_ops(), 4u);
}

}  // namespace
}  // namespace dplace
