#include "dplace/io/graph_json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"

namespace dplace {
namespace {

const std::string kData = DPLACE_TEST_DATA_DIR;

Graph parse(const std::string& text) {
  return read_graph_json(parse_json_text(text, "g.json"), "g.json");
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_path(const std::string& name) { return scratch_path(name); }

TEST(GraphJsonTest, ReadsEveryFieldOfTheDesignExample) {
  const Graph g = read_graph_file(kData + "/io/tiny_graph.json");
  EXPECT_EQ(g.name(), "tiny");
  ASSERT_EQ(g.num_ops(), 3u);
  const Op& x = g.op(OpId(0));
  EXPECT_EQ(x.type, "Input");
  EXPECT_EQ(x.output_bytes, std::vector<int64_t>{4096});
  EXPECT_FALSE(x.bytes_accessed.has_value());

  const Op& mm = g.op(OpId(1));
  EXPECT_EQ(mm.type, "MatMul");
  ASSERT_EQ(mm.inputs.size(), 1u);
  EXPECT_EQ(mm.inputs[0], (TensorRef{OpId(0), 0}));
  EXPECT_DOUBLE_EQ(mm.flops, 2.0e9);
  EXPECT_DOUBLE_EQ(mm.bytes_accessed.value(), 8.0e6);
  EXPECT_EQ(mm.output_bytes, (std::vector<int64_t>{4096, 128}));
  EXPECT_EQ(mm.param_bytes, 1048576);
  EXPECT_EQ(mm.temp_bytes, 0);
  EXPECT_EQ(mm.colocate, "layer1");
  EXPECT_EQ(mm.devices, (std::vector<std::string>{"gpu", "cpu"}));
  EXPECT_EQ(mm.phase, Phase::kForward);
  ASSERT_EQ(mm.time_s.size(), 2u);
  // nlohmann objects iterate in key order: "/cpu:0" sorts before "gpu".
  EXPECT_EQ(mm.time_s[0].device, "/cpu:0");
  EXPECT_DOUBLE_EQ(mm.time_s[0].time_s, 0.02);
  EXPECT_EQ(mm.time_s[1].device, "gpu");
  EXPECT_DOUBLE_EQ(mm.time_s[1].time_s, 0.0012);

  const Op& y = g.op(OpId(2));
  EXPECT_EQ(y.inputs[0], (TensorRef{OpId(1), 0}));
  EXPECT_DOUBLE_EQ(y.flops, 1024);
  // bytes_accessed absent: inputs + outputs = 4096 + 4096.
  EXPECT_DOUBLE_EQ(g.bytes_accessed(OpId(2)), 8192);
  EXPECT_EQ(g.tensor_bytes({OpId(1), 1}), 128);
}

TEST(GraphJsonTest, InputsMayReferToLaterOpsAndOtherOutputs) {
  const Graph g = parse(R"({ "format": "dplace.graph/1", "name": "fwd", "ops": [
      { "name": "b", "inputs": ["a:1", "a"], "output_bytes": 8 },
      { "name": "a", "output_bytes": [16, 32] } ] })");
  const Op& b = g.op(OpId(0));
  ASSERT_EQ(b.inputs.size(), 2u);
  EXPECT_EQ(b.inputs[0], (TensorRef{OpId(1), 1}));
  EXPECT_EQ(b.inputs[1], (TensorRef{OpId(1), 0}));
  EXPECT_EQ(g.topo_order()[0], OpId(1));
}

TEST(GraphJsonTest, AnExactOpNameWinsOverTheOutputSuffix) {
  const Graph g = parse(R"({ "format": "dplace.graph/1", "ops": [
      { "name": "t", "output_bytes": [1, 2] },
      { "name": "t:1", "output_bytes": 3 },
      { "name": "u", "inputs": ["t:1"], "output_bytes": 4 } ] })");
  EXPECT_EQ(g.op(OpId(2)).inputs[0], (TensorRef{OpId(1), 0}));
}

TEST(GraphJsonTest, DefaultsForAbsentFields) {
  const Graph g = parse(R"({ "format": "dplace.graph/1", "ops": [ { "name": "c" } ] })");
  EXPECT_EQ(g.name(), "g");  // the file stem
  const Op& c = g.op(OpId(0));
  EXPECT_EQ(c.output_bytes, std::vector<int64_t>{0});
  EXPECT_EQ(c.flops, 0);
  EXPECT_EQ(c.phase, Phase::kUnspecified);
  EXPECT_TRUE(c.devices.empty());
  EXPECT_TRUE(c.extra.is_null());
}

TEST(GraphJsonTest, DevicesMayBeASingleString) {
  const Graph g = parse(R"({ "format": "dplace.graph/1", "ops": [
      { "name": "c", "devices": "cpu" } ] })");
  EXPECT_EQ(g.op(OpId(0)).devices, std::vector<std::string>{"cpu"});
}

TEST(GraphJsonTest, UnknownFieldsAreKeptAndWrittenBack) {
  const Graph g = parse(R"({ "format": "dplace.graph/1", "ops": [
      { "name": "c", "shape": [2, 3], "tf_device": "/job:w", "flops": 6 } ] })");
  const Op& c = g.op(OpId(0));
  ASSERT_TRUE(c.extra.is_object());
  EXPECT_EQ(c.extra.size(), 2u);
  EXPECT_EQ(c.extra.at("shape"), Json::parse("[2, 3]"));
  const Json doc = graph_to_json(g);
  EXPECT_EQ(doc.at("ops")[0].at("tf_device"), "/job:w");
  EXPECT_EQ(doc.at("ops")[0].at("flops"), 6.0);
}

TEST(GraphJsonTest, WriterOmitsDefaultsAndUsesShortInputNames) {
  const Graph g = read_graph_file(kData + "/io/tiny_graph.json");
  const Json doc = graph_to_json(g);
  EXPECT_EQ(doc.at("format"), "dplace.graph/1");
  const Json& x = doc.at("ops")[0];
  EXPECT_EQ(x, Json::parse(R"({"name": "x", "type": "Input", "output_bytes": 4096})"));
  EXPECT_EQ(doc.at("ops")[2].at("inputs"), Json::parse(R"(["mm"])"));
  EXPECT_EQ(doc.at("ops")[1].at("output_bytes"), Json::parse("[4096, 128]"));
}

TEST(GraphJsonTest, FileRoundTripIsExact) {
  const Graph g = parse(R"({ "format": "dplace.graph/1", "name": "rt", "ops": [
      { "name": "in", "type": "Input", "output_bytes": [3, 5] },
      { "name": "op/with:colon", "inputs": ["in:1", "in"], "flops": 0.1, "bytes_accessed": 1e-7,
        "param_bytes": 123456789012, "temp_bytes": 7, "colocate": "g", "devices": ["gpu"],
        "phase": "backward", "time_s": { "gpu": 3.3333333333333335e-05 }, "note": {"k": [1, null]} },
      { "name": "z", "inputs": ["op/with:colon"], "colocate": "g", "phase": "update" } ] })");
  const std::string path = temp_path("rt.json");
  write_graph_file(g, path);
  const Graph back = read_graph_file(path);
  EXPECT_EQ(back.name(), "rt");
  ASSERT_EQ(back.num_ops(), g.num_ops());
  for (size_t i = 0; i < g.num_ops(); ++i) {
    const Op& a = g.op(OpId::from_index(i));
    const Op& b = back.op(OpId::from_index(i));
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.inputs, b.inputs);
    EXPECT_EQ(a.output_bytes, b.output_bytes);
    EXPECT_EQ(a.flops, b.flops);  // bit-identical
    EXPECT_EQ(a.bytes_accessed, b.bytes_accessed);
    EXPECT_EQ(a.param_bytes, b.param_bytes);
    EXPECT_EQ(a.temp_bytes, b.temp_bytes);
    EXPECT_EQ(a.colocate, b.colocate);
    EXPECT_EQ(a.devices, b.devices);
    EXPECT_EQ(a.phase, b.phase);
    ASSERT_EQ(a.time_s.size(), b.time_s.size());
    for (size_t k = 0; k < a.time_s.size(); ++k) {
      EXPECT_EQ(a.time_s[k].device, b.time_s[k].device);
      EXPECT_EQ(a.time_s[k].time_s, b.time_s[k].time_s);
    }
    EXPECT_EQ(a.extra, b.extra);
  }
  // One op per line, and writing the read-back graph gives the same bytes.
  const std::string text = read_text(path);
  EXPECT_NE(text.find("\n    {\"name\":\"z\""), std::string::npos) << text;
  const std::string path2 = temp_path("rt2.json");
  write_graph_file(back, path2);
  EXPECT_EQ(read_text(path2), text);
  std::filesystem::remove(path);
  std::filesystem::remove(path2);
}

TEST(GraphJsonTest, UnwritablePathIsAnError) {
  const Graph g = read_graph_file(kData + "/io/tiny_graph.json");
  EXPECT_THROW(write_graph_file(g, "/nonexistent-dir/x.json"), FormatError);
}

// --- Malformed inputs: one-line messages that start with the file and name the op and field. ---

struct MalformedCase {
  const char* file;
  const char* rest;  // the message after "<path>: "; a trailing '*' means "starts with"
};

std::string error_of(const std::string& path) {
  try {
    read_graph_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GraphJsonTest, MalformedFilesGiveOneLineMessages) {
  const std::vector<MalformedCase> cases = {
      {"cycle.json", "graph has a cycle: 'a' -> 'b' -> 'c' -> 'a'"},
      {"self_cycle.json", "op 'a': op consumes its own output (cycle of length 1)"},
      {"unknown_input.json", "op 'y': input 'zz': no op named 'zz'"},
      {"unknown_input_with_index.json", "op 'y': input 'zz:1': no op named 'zz'"},
      {"duplicate_op.json", "op 'mm': duplicate op name"},
      {"duplicate_field.json", "'ops'[]: key 'flops' appears twice in one object"},
      {"bad_output_index.json", "op 'y': input 'mm:2': op 'mm' has only 2 output(s)"},
      {"negative_flops.json", "op 'mm': field 'flops': must be non-negative, got -5"},
      {"negative_output_bytes.json",
       "op 'x': field 'output_bytes[1]': must be non-negative, got -1"},
      {"negative_param_bytes.json", "op 'w': field 'param_bytes': must be non-negative, got -4096"},
      {"negative_time.json", "op 'mm': field 'time_s.gpu': must be non-negative, got -0.5"},
      {"output_bytes_not_number.json",
       "op 'x': field 'output_bytes': expected a byte count or a list of byte counts"},
      {"empty_output_list.json", "op 'x': field 'output_bytes': must list at least one output"},
      {"bad_phase.json",
       "op 'x': field 'phase': unknown phase 'fwd' (known: forward, backward, update)"},
      {"input_not_string.json",
       "op 'y': field 'inputs': expected a list of producer names (\"op\" or \"op:k\")"},
      {"op_without_name.json", "op #1: field 'name': missing"},
      {"empty_name.json",
       "field 'name': must not be empty (leave it out to name the graph after the file)"},
      {"control_character_name.json",
       "graph name 'two\\x0alines' contains a control character (a line break, tab or other)"},
      {"ops_not_list.json", "field 'ops': expected a list of ops"},
      {"no_ops.json", "field 'ops': graph has no ops"},
      {"wrong_format.json", "field 'format': expected \"dplace.graph/1\", got \"dplace.graph/2\""},
      {"missing_format.json", "field 'format': missing"},
      {"not_object.json", "expected a JSON object"},
      {"truncated.json", "truncated JSON at byte*"},
      {"empty.json", "file is empty"},
      {"does_not_exist.json", "cannot open file"},
  };
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = kData + "/malformed/graph/" + c.file;
    const std::string message = error_of(path);
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    std::string expected = path + ": " + c.rest;
    if (expected.back() == '*') {
      expected.pop_back();
      EXPECT_EQ(message.substr(0, expected.size()), expected);
    } else {
      EXPECT_EQ(message, expected);
    }
  }
}

TEST(GraphJsonTest, StructuralProblemsAreGraphErrorsAndFieldProblemsFormatErrors) {
  const std::string dir = kData + "/malformed/graph/";
  EXPECT_THROW(read_graph_file(dir + "cycle.json"), GraphError);
  EXPECT_THROW(read_graph_file(dir + "unknown_input.json"), GraphError);
  EXPECT_THROW(read_graph_file(dir + "duplicate_op.json"), GraphError);
  EXPECT_THROW(read_graph_file(dir + "negative_flops.json"), FormatError);
  EXPECT_THROW(read_graph_file(dir + "truncated.json"), FormatError);
}

}  // namespace
}  // namespace dplace
